"""DescribeConfigs (key 32), v1-v4, for TOPIC and BROKER resources.

Behaviour / version notes:
- TOPIC: every Kafka topic config with its effective value; source DYNAMIC_TOPIC_CONFIG when
  set on the topic, STATIC_BROKER_CONFIG when a broker setting changed the default, else
  DEFAULT_CONFIG; synonyms (v1+, on request) list the topic and broker levels; ConfigType and
  documentation (v3+) from Kafka's definitions; unknown topic: UNKNOWN_TOPIC_OR_PARTITION;
- BROKER: named by this node's id, every broker setting under its Kafka name, read-only
  (there are no dynamic broker configs); the cluster-default resource (empty name) has none;
  another broker id is INVALID_REQUEST;
- other resource types (BROKER_LOGGER, GROUP, CLIENT_METRICS) are INVALID_REQUEST for now
  (SKIPPED.md).
"""

from __future__ import annotations

from typing import Any

from kcoord.broker.apis.topics import CONFIG_SOURCE_DEFAULT, CONFIG_SOURCE_STATIC_BROKER, _source
from kcoord.broker.topic_config import (
    TOPIC_CONFIGS,
    TYPE_BOOLEAN,
    TYPE_INT,
    TYPE_LIST,
    TYPE_STRING,
    effective,
)
from kcoord.config import BrokerConfig, kafka_name
from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.messages import ApiKey, response_class

RESOURCE_TOPIC = 2
RESOURCE_BROKER = 4

_Resp = response_class(ApiKey.DescribeConfigs)
_Result = _Resp.DescribeConfigsResult
_Entry = _Result.DescribeConfigsResourceResult
_Synonym = _Entry.DescribeConfigsSynonym


def handle_describe(broker: Any, ctx: Any, req: Any) -> Any:
    v = ctx.api_version
    results = []
    for res in req.resources:
        keys = set(res.configuration_keys) if res.configuration_keys is not None else None
        if res.resource_type == RESOURCE_TOPIC:
            results.append(_describe_topic(broker, res, keys, req, v))
        elif res.resource_type == RESOURCE_BROKER:
            results.append(_describe_broker(broker, res, keys, req, v))
        else:
            results.append(
                _error(
                    res,
                    ErrorCode.INVALID_REQUEST,
                    f"kcoord does not describe resource type {res.resource_type}",
                )
            )
    return _Resp(throttle_time_ms=0, results=results)


def _describe_topic(broker: Any, res: Any, keys: set[str] | None, req: Any, v: int) -> Any:
    topic = broker.partitions.get(res.resource_name)
    if topic is None:
        return _error(res, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {res.resource_name} does not exist")
    cfg = broker.config
    entries = []
    for name in sorted(TOPIC_CONFIGS):
        if keys is not None and name not in keys:
            continue
        d = TOPIC_CONFIGS[name]
        source = _source(name, topic.configs, cfg)
        synonyms = []
        if req.include_synonyms:
            if name in topic.configs:
                synonyms.append(_Synonym(name=name, value=topic.configs[name], source=1))
            if d.synonym is not None:
                field = d.synonym.replace(".", "_")
                if field in BrokerConfig.model_fields:
                    synonyms.append(
                        _Synonym(
                            name=d.synonym,
                            value=_str(getattr(cfg, field)),
                            source=CONFIG_SOURCE_STATIC_BROKER
                            if source != CONFIG_SOURCE_DEFAULT or name in topic.configs
                            else CONFIG_SOURCE_DEFAULT,
                        )
                    )
        entries.append(
            _Entry(
                name=name,
                value=effective(name, topic.configs, cfg),
                read_only=False,
                config_source=source,
                is_default=source == CONFIG_SOURCE_DEFAULT,
                is_sensitive=False,
                synonyms=synonyms,
                config_type=d.config_type,
                documentation=d.doc if req.include_documentation else None,
            )
        )
    return _Result(
        error_code=0,
        error_message=None,
        resource_type=res.resource_type,
        resource_name=res.resource_name,
        configs=entries,
    )


def _describe_broker(broker: Any, res: Any, keys: set[str] | None, req: Any, v: int) -> Any:
    if res.resource_name == "":
        return _Result(
            error_code=0, error_message=None, resource_type=res.resource_type, resource_name="", configs=[]
        )
    if res.resource_name != str(broker.node_id):
        return _error(res, ErrorCode.INVALID_REQUEST, f"this is broker {broker.node_id}")
    cfg = broker.config
    explicit = cfg.model_fields_set
    entries = []
    for field, info in BrokerConfig.model_fields.items():
        name = kafka_name(field)
        if keys is not None and name not in keys:
            continue
        source = CONFIG_SOURCE_STATIC_BROKER if field in explicit else CONFIG_SOURCE_DEFAULT
        value = getattr(cfg, field)
        entries.append(
            _Entry(
                name=name,
                value=_str(value),
                read_only=True,
                config_source=source,
                is_default=source == CONFIG_SOURCE_DEFAULT,
                is_sensitive=False,
                synonyms=[_Synonym(name=name, value=_str(value), source=source)]
                if req.include_synonyms
                else [],
                config_type=_type_of(info.annotation),
                documentation=info.description if req.include_documentation else None,
            )
        )
    return _Result(
        error_code=0,
        error_message=None,
        resource_type=res.resource_type,
        resource_name=res.resource_name,
        configs=entries,
    )


def _str(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)


def _type_of(annotation: Any) -> int:
    if annotation is bool:
        return TYPE_BOOLEAN
    if annotation is int or annotation == (int | None):
        return TYPE_INT
    if annotation is list:
        return TYPE_LIST
    return TYPE_STRING


def _error(res: Any, code: int, message: str) -> Any:
    return _Result(
        error_code=code,
        error_message=message,
        resource_type=res.resource_type,
        resource_name=res.resource_name,
        configs=[],
    )


def describe_error_response(req: Any, version: int, code: int, message: str | None) -> Any:
    return _Resp(throttle_time_ms=0, results=[_error(r, code, message or "") for r in req.resources])
