"""DescribeConfigs (key 32, v1-v4) for TOPIC, BROKER and GROUP resources; IncrementalAlterConfigs
(key 44, v0-v1) and the legacy AlterConfigs (key 33, v0-v2) for TOPIC and GROUP resources;
ListConfigResources (key 74, v0-v1).

Behaviour / version notes:
- TOPIC: every Kafka topic config with its effective value; source DYNAMIC_TOPIC_CONFIG when
  set on the topic, STATIC_BROKER_CONFIG when a broker setting changed the default, else
  DEFAULT_CONFIG; synonyms (v1+, on request) list the topic and broker levels; ConfigType and
  documentation (v3+) from Kafka's definitions; unknown topic: UNKNOWN_TOPIC_OR_PARTITION;
- BROKER: named by this node's id, every broker setting under its Kafka name, read-only
  (there are no dynamic broker configs); the cluster-default resource (empty name) has none;
  another broker id is INVALID_REQUEST;
- GROUP: the share.* group configs (share/config.py), GROUP_CONFIG when the group overrides them,
  else DEFAULT_CONFIG; the group need not exist (as Kafka);
- other resource types (BROKER_LOGGER, CLIENT_METRICS) are INVALID_REQUEST (SKIPPED.md);
- IncrementalAlterConfigs: SET, DELETE, and APPEND/SUBTRACT on list configs, validated like
  CreateTopics' configs (INVALID_CONFIG); each resource succeeds or fails as a whole; ValidateOnly
  changes nothing; broker configs are static (INVALID_REQUEST), as are internal topics'; group
  configs are validated against the broker's share bounds (INVALID_CONFIG) and written to the
  group's coordinator log before the answer.
- AlterConfigs (legacy, still sent by librdkafka's, aiokafka's and kafka-python's admin
  clients): a resource's configs become exactly those given, the others back to their defaults
  (Kafka's legacyAlterConfigs), validated and persisted as above; as Kafka's ConfigAdminManager
  preprocessing: a resource named twice is INVALID_REQUEST for each copy ("Each resource must
  appear at most once."), so are duplicate names and null values; BROKER_LOGGER and unknown
  types are INVALID_REQUEST ("Unknown resource type N"); answers in request order.
- ListConfigResources: v0 (Kafka's ListClientMetricsResources) lists client metrics resources,
  of which kcoord has none; v1 (KIP-1142) lists, for the requested types (none: all of
  Kafka's supported set GROUP, CLIENT_METRICS, BROKER_LOGGER, BROKER, TOPIC), the groups that
  override a group config, this node for BROKER and BROKER_LOGGER, and every topic
  (``__consumer_offsets`` included); a type outside that set answers UNSUPPORTED_VERSION.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kcoord.apis.authorization import Op, config_resource_error, require_cluster
from kcoord.apis.config_sources import (
    CONFIG_SOURCE_DEFAULT,
    CONFIG_SOURCE_GROUP,
    CONFIG_SOURCE_STATIC_BROKER,
    topic_config_source,
)
from kcoord.apis.context import RequestContext
from kcoord.apis.reply import reply_all
from kcoord.apis.services import Services
from kcoord.config import BrokerConfig, kafka_name
from kcoord.dataplane.topic_config import (
    TOPIC_CONFIGS,
    TYPE_BOOLEAN,
    TYPE_INT,
    TYPE_LIST,
    TYPE_STRING,
    effective,
)
from kcoord.groups.records import GroupConfigKey, GroupConfigValue
from kcoord.groups.store import GroupStore
from kcoord.protocol.errors import ErrorCode, KafkaError
from kcoord.protocol.messages import ApiKey, response_class
from kcoord.runtime.outcome import Operation, Outcome, Responder
from kcoord.share.config import (
    GROUP_CONFIGS,
    InvalidGroupConfig,
    effective_group_config,
    validate_group_configs,
)

RESOURCE_TOPIC = 2
RESOURCE_BROKER = 4
RESOURCE_BROKER_LOGGER = 8
RESOURCE_CLIENT_METRICS = 16
RESOURCE_GROUP = 32

_Resp = response_class(ApiKey.DescribeConfigs)
_Result = _Resp.DescribeConfigsResult
_Entry = _Result.DescribeConfigsResourceResult
_Synonym = _Entry.DescribeConfigsSynonym


def handle_describe(services: Services, ctx: RequestContext, req: Any) -> Any:
    v = ctx.api_version
    results = []
    for res in req.resources:
        keys = set(res.configuration_keys) if res.configuration_keys is not None else None
        denied = config_resource_error(
            services, ctx, Op.DESCRIBE_CONFIGS, res.resource_type, res.resource_name
        )
        if denied:
            results.append(_error(res, denied, None))
            continue
        if res.resource_type == RESOURCE_TOPIC:
            results.append(_describe_topic(services, res, keys, req, v))
        elif res.resource_type == RESOURCE_BROKER:
            results.append(_describe_broker(services, res, keys, req, v))
        elif res.resource_type == RESOURCE_GROUP:
            results.append(_describe_group(services, res, keys, req))
        else:
            results.append(
                _error(
                    res,
                    ErrorCode.INVALID_REQUEST,
                    f"kcoord does not describe resource type {res.resource_type}",
                )
            )
    return _Resp(throttle_time_ms=0, results=results)


def _describe_group(services: Services, res: Any, keys: set[str] | None, req: Any) -> Any:
    """Every group config: GROUP_CONFIG when the group overrides it, else the broker default."""
    configs = services.groups.state_for(res.resource_name).configs_of(res.resource_name)
    entries = []
    for name, d in sorted(GROUP_CONFIGS.items()):
        if keys is not None and name not in keys:
            continue
        overridden = name in configs
        synonyms = []
        if req.include_synonyms:
            if overridden:
                synonyms.append(_Synonym(name=name, value=configs[name], source=CONFIG_SOURCE_GROUP))
            if d.synonym is not None:
                synonyms.append(
                    _Synonym(name=d.synonym, value=d.default(services.config), source=CONFIG_SOURCE_DEFAULT)
                )
        entries.append(
            _Entry(
                name=name,
                value=effective_group_config(name, configs, services.config),
                read_only=False,
                config_source=CONFIG_SOURCE_GROUP if overridden else CONFIG_SOURCE_DEFAULT,
                is_default=not overridden,
                is_sensitive=False,
                synonyms=synonyms,
                config_type=d.config_type,
                documentation=d.doc if req.include_documentation else None,
            )
        )
    return _result(res, entries)


def _describe_topic(services: Services, res: Any, keys: set[str] | None, req: Any, v: int) -> Any:
    topic = services.partitions.get(res.resource_name)
    if topic is None:
        return _error(res, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {res.resource_name} does not exist")
    cfg = services.config
    entries = []
    for name in sorted(TOPIC_CONFIGS):
        if keys is not None and name not in keys:
            continue
        d = TOPIC_CONFIGS[name]
        source = topic_config_source(name, topic.configs, cfg)
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
    return _result(res, entries)


def _describe_broker(services: Services, res: Any, keys: set[str] | None, req: Any, v: int) -> Any:
    if res.resource_name == "":
        return _result(res, [])  # the cluster default: no dynamic broker configs exist
    if res.resource_name != str(services.cluster.node_id):
        return _error(res, ErrorCode.INVALID_REQUEST, f"this is broker {services.cluster.node_id}")
    cfg = services.config
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
    return _result(res, entries)


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


def _result(res: Any, entries: list[Any], code: int = 0, message: str | None = None) -> Any:
    return _Result(
        error_code=code,
        error_message=message,
        resource_type=res.resource_type,
        resource_name=res.resource_name,
        configs=entries,
    )


def _error(res: Any, code: int, message: str) -> Any:
    return _result(res, [], code, message)


def describe_error_response(req: Any, version: int, code: int, message: str | None) -> Any:
    return _Resp(throttle_time_ms=0, results=[_error(r, code, message or "") for r in req.resources])


# --- IncrementalAlterConfigs -------------------------------------------------------------------
_IResp = response_class(ApiKey.IncrementalAlterConfigs)
_IResult = _IResp.AlterConfigsResourceResponse

OP_SET, OP_DELETE, OP_APPEND, OP_SUBTRACT = 0, 1, 2, 3


def _altered(current: dict[str, str], changes: list[Any], services: Services) -> dict[str, str | None]:
    """Apply SET/DELETE/APPEND/SUBTRACT to a copy of the explicit configs (Kafka's semantics)."""
    out: dict[str, str | None] = dict(current)
    seen: set[str] = set()
    for c in changes:
        if c.name in seen:
            raise KafkaError(ErrorCode.INVALID_REQUEST, f"config {c.name} is altered more than once")
        seen.add(c.name)
        d = TOPIC_CONFIGS.get(c.name)
        if d is None:
            raise KafkaError(ErrorCode.INVALID_CONFIG, f"Unknown topic config name: {c.name}")
        if c.config_operation == OP_SET:
            out[c.name] = c.value
        elif c.config_operation == OP_DELETE:
            out.pop(c.name, None)
        elif c.config_operation in (OP_APPEND, OP_SUBTRACT):
            if d.config_type != TYPE_LIST:
                raise KafkaError(ErrorCode.INVALID_CONFIG, f"{c.name} is not a list config")
            items = [x for x in effective(c.name, current, services.config).split(",") if x]
            given = [x for x in (c.value or "").split(",") if x]
            if c.config_operation == OP_APPEND:
                items += [x for x in given if x not in items]
            else:
                items = [x for x in items if x not in given]
            out[c.name] = ",".join(items)
        else:
            raise KafkaError(ErrorCode.INVALID_REQUEST, f"unknown config operation {c.config_operation}")
    return out


def _alter_group(services: Services, res: Any, validate_only: bool) -> Operation[GroupStore] | None:
    """The operation that persists new group config overrides (record type 103); None when only
    validating. Raises KafkaError for what it refuses."""
    gid = res.resource_name
    if not gid:
        raise KafkaError(ErrorCode.INVALID_REQUEST, "a group config resource needs a group id")
    configs = dict(services.groups.state_for(gid).configs_of(gid))
    seen: set[str] = set()
    for c in res.configs:
        if c.name in seen:
            raise KafkaError(ErrorCode.INVALID_REQUEST, f"config {c.name} is altered more than once")
        seen.add(c.name)
        if c.name not in GROUP_CONFIGS:
            raise KafkaError(ErrorCode.INVALID_CONFIG, f"Unknown group config name: {c.name}")
        if c.config_operation == OP_SET and c.value is not None:
            configs[c.name] = c.value
        elif c.config_operation == OP_DELETE or (c.config_operation == OP_SET and c.value is None):
            configs.pop(c.name, None)
        else:
            raise KafkaError(ErrorCode.INVALID_CONFIG, f"{c.name} is not a list config")
    return _write_group_configs(services, gid, configs, validate_only)


def _write_group_configs(
    services: Services, gid: str, configs: dict[str, str], validate_only: bool
) -> Operation[GroupStore] | None:
    """Validate a group's complete new config overrides; the operation that persists them, or
    None when only validating."""
    try:
        validate_group_configs(configs, services.config)
    except InvalidGroupConfig as e:
        raise KafkaError(ErrorCode.INVALID_CONFIG, str(e)) from None
    if validate_only:
        return None
    value = GroupConfigValue(tuple(sorted(configs.items()))) if configs else None
    return lambda _store, _now: Outcome(records=[(GroupConfigKey(gid), value)])


def _answer_after_writes(
    services: Services, writes: list[tuple[str, Operation[GroupStore]]], build: Callable[[Any], Any]
) -> Any:
    """``build()`` at once without group writes, else once every group's new configs are durable."""
    if not writes:
        return build(None)
    reply, responders = reply_all(len(writes), build)
    for (gid, op), respond in zip(writes, responders, strict=True):

        def answered(
            store: GroupStore, now: int, op: Operation[GroupStore] = op, respond: Responder = respond
        ) -> Outcome:
            out = op(store, now)
            out.respond(respond, None)
            return out

        services.groups.tell(gid, answered)
    return reply


def handle_incremental_alter(services: Services, ctx: RequestContext, req: Any) -> Any:
    results: list[tuple[Any, int, str | None]] = []
    writes: list[tuple[str, Operation[GroupStore]]] = []
    for res in req.resources:
        try:
            denied = config_resource_error(
                services, ctx, Op.ALTER_CONFIGS, res.resource_type, res.resource_name
            )
            if denied:
                raise KafkaError(denied)
            if res.resource_type == RESOURCE_GROUP:
                op = _alter_group(services, res, req.validate_only)
                if op is not None:
                    writes.append((res.resource_name, op))
                results.append((res, 0, None))
                continue
            if res.resource_type != RESOURCE_TOPIC:
                raise KafkaError(
                    ErrorCode.INVALID_REQUEST,
                    f"kcoord cannot alter configs of resource type {res.resource_type}",
                )
            topic = services.partitions.get(res.resource_name)
            if topic is None:
                raise KafkaError(
                    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {res.resource_name} does not exist"
                )
            if topic.internal:
                raise KafkaError(
                    ErrorCode.INVALID_REQUEST, f"configs of internal topic {topic.name} are fixed"
                )
            new = services.partitions.validate_configs(_altered(topic.configs, res.configs, services))
            if not req.validate_only:
                services.partitions.alter_topic_configs(topic, new)
        except KafkaError as e:
            results.append((res, e.code, e.message))
            continue
        results.append((res, 0, None))

    def build(_: Any = None) -> Any:
        return _IResp(
            throttle_time_ms=0,
            responses=[
                _IResult(
                    error_code=code,
                    error_message=msg,
                    resource_type=r.resource_type,
                    resource_name=r.resource_name,
                )
                for r, code, msg in results
            ],
        )

    return _answer_after_writes(services, writes, build)


def incremental_alter_error_response(req: Any, version: int, code: int, message: str | None) -> Any:
    return _IResp(
        throttle_time_ms=0,
        responses=[
            _IResult(
                error_code=code,
                error_message=message,
                resource_type=r.resource_type,
                resource_name=r.resource_name,
            )
            for r in req.resources
        ],
    )


# --- AlterConfigs (legacy) ---------------------------------------------------------------------
_AResp = response_class(ApiKey.AlterConfigs)
_AResult = _AResp.AlterConfigsResourceResponse


def _legacy_alter(services: Services, res: Any, validate_only: bool) -> Operation[GroupStore] | None:
    """One resource of a legacy AlterConfigs: its configs become exactly those given (the ones
    not named go back to their defaults), as Kafka's ConfigurationControlManager.legacyAlterConfigs.
    Returns the group write to make, if any; raises KafkaError for what it refuses."""
    names = [c.name for c in res.configs]
    if len(set(names)) != len(names):
        raise KafkaError(ErrorCode.INVALID_REQUEST, "Error due to duplicate config keys")
    nulls = [c.name for c in res.configs if c.value is None]
    if nulls:
        raise KafkaError(ErrorCode.INVALID_REQUEST, "Null value not supported for : " + ", ".join(nulls))
    new = {c.name: c.value for c in res.configs}
    if res.resource_type == RESOURCE_TOPIC:
        topic = services.partitions.get(res.resource_name)
        if topic is None:
            raise KafkaError(
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {res.resource_name} does not exist"
            )
        if topic.internal:
            raise KafkaError(ErrorCode.INVALID_REQUEST, f"configs of internal topic {topic.name} are fixed")
        for name in new:
            if name not in TOPIC_CONFIGS:
                raise KafkaError(ErrorCode.INVALID_CONFIG, f"Unknown topic config name: {name}")
        clean = services.partitions.validate_configs(dict(new))
        if not validate_only:
            services.partitions.alter_topic_configs(topic, clean)
        return None
    if res.resource_type == RESOURCE_GROUP:
        if not res.resource_name:
            raise KafkaError(ErrorCode.INVALID_REQUEST, "a group config resource needs a group id")
        for name in new:
            if name not in GROUP_CONFIGS:
                raise KafkaError(ErrorCode.INVALID_CONFIG, f"Unknown group config name: {name}")
        return _write_group_configs(services, res.resource_name, new, validate_only)
    if res.resource_type == RESOURCE_BROKER:
        raise KafkaError(ErrorCode.INVALID_REQUEST, "kcoord's broker configs are static")
    if res.resource_type == RESOURCE_CLIENT_METRICS:
        raise KafkaError(ErrorCode.INVALID_REQUEST, "kcoord has no client metrics resources")
    # BROKER_LOGGER among them: legacy AlterConfigs never supported it.
    raise KafkaError(ErrorCode.INVALID_REQUEST, f"Unknown resource type {res.resource_type}")


def handle_alter(services: Services, ctx: RequestContext, req: Any) -> Any:
    seen: dict[tuple[int, str], int] = {}
    for res in req.resources:
        key = (res.resource_type, res.resource_name)
        seen[key] = seen.get(key, 0) + 1
    results: list[tuple[Any, int, str | None]] = []
    writes: list[tuple[str, Operation[GroupStore]]] = []
    for res in req.resources:
        try:
            if seen[(res.resource_type, res.resource_name)] > 1:
                raise KafkaError(ErrorCode.INVALID_REQUEST, "Each resource must appear at most once.")
            denied = config_resource_error(
                services, ctx, Op.ALTER_CONFIGS, res.resource_type, res.resource_name
            )
            if denied:
                raise KafkaError(denied)
            op = _legacy_alter(services, res, req.validate_only)
            if op is not None:
                writes.append((res.resource_name, op))
        except KafkaError as e:
            results.append((res, e.code, e.message))
            continue
        results.append((res, 0, None))

    def build(_: Any = None) -> Any:
        return _AResp(
            throttle_time_ms=0,
            responses=[
                _AResult(
                    error_code=code,
                    error_message=msg,
                    resource_type=r.resource_type,
                    resource_name=r.resource_name,
                )
                for r, code, msg in results
            ],
        )

    return _answer_after_writes(services, writes, build)


def alter_error_response(req: Any, version: int, code: int, message: str | None) -> Any:
    return _AResp(
        throttle_time_ms=0,
        responses=[
            _AResult(
                error_code=code,
                error_message=message,
                resource_type=r.resource_type,
                resource_name=r.resource_name,
            )
            for r in req.resources
        ],
    )


# --- ListConfigResources -----------------------------------------------------------------------
_LResp = response_class(ApiKey.ListConfigResources)
_LResource = _LResp.ConfigResource


def handle_list_resources(services: Services, ctx: RequestContext, req: Any) -> Any:
    v = ctx.api_version
    require_cluster(services, ctx, Op.DESCRIBE_CONFIGS)
    # ListConfigResourcesRequest.supportedResourceTypes: v0 was ListClientMetricsResources.
    supported = (
        (RESOURCE_GROUP, RESOURCE_CLIENT_METRICS, RESOURCE_BROKER_LOGGER, RESOURCE_BROKER, RESOURCE_TOPIC)
        if v >= 1
        else (RESOURCE_CLIENT_METRICS,)
    )
    types = set(req.resource_types) if v >= 1 and req.resource_types else set(supported)
    if not types <= set(supported):
        return list_resources_error_response(
            req, v, ErrorCode.UNSUPPORTED_VERSION, f"resource types {sorted(types - set(supported))}"
        )
    node = str(services.cluster.node_id)
    out = []
    for rtype in supported:
        if rtype not in types:
            continue
        if rtype == RESOURCE_GROUP:
            names = sorted(gid for store in services.groups.states() for gid in store.config_group_ids())
        elif rtype in (RESOURCE_BROKER_LOGGER, RESOURCE_BROKER):
            names = [node]
        elif rtype == RESOURCE_TOPIC:
            names = list(services.partitions.topics)
        else:
            names = []  # no client metrics resources: kcoord serves no telemetry (SKIPPED.md)
        out.extend(_LResource(resource_name=n, resource_type=rtype) for n in names)
    return _LResp(throttle_time_ms=0, error_code=0, config_resources=out)


def list_resources_error_response(req: Any, version: int, code: int, message: str | None) -> Any:
    return _LResp(throttle_time_ms=0, error_code=code, config_resources=[])
