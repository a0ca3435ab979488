"""Where a config's value comes from, as DescribeConfigs and CreateTopics report it (Kafka's
ConfigSource ids)."""

from __future__ import annotations

from kcoord.config import BrokerConfig
from kcoord.dataplane.topic_config import TOPIC_CONFIGS

CONFIG_SOURCE_DYNAMIC_TOPIC = 1
CONFIG_SOURCE_STATIC_BROKER = 4
CONFIG_SOURCE_DEFAULT = 5
CONFIG_SOURCE_GROUP = 8


def topic_config_source(name: str, topic_configs: dict[str, str], cfg: BrokerConfig) -> int:
    """A topic config's source: set on the topic, changed by a broker setting, or Kafka's default."""
    if name in topic_configs:
        return CONFIG_SOURCE_DYNAMIC_TOPIC
    if TOPIC_CONFIGS[name].synonym and name not in ("compression.type",):
        d = type(cfg).model_fields.get(TOPIC_CONFIGS[name].synonym.replace(".", "_"))
        if d is not None and getattr(cfg, TOPIC_CONFIGS[name].synonym.replace(".", "_")) != d.default:
            return CONFIG_SOURCE_STATIC_BROKER
    return CONFIG_SOURCE_DEFAULT
