"""The topic settings every Produce append checks, read once per change of the topic's configs.

Each is a topic config with a broker default (``effective``): looking all of them up, and
parsing the numbers, for every partition of every Produce request cost more than the checks
themselves. Broker configs are static, and ``PartitionManager.alter_topic_configs`` gives a topic
a new configs dict, so the rules are kept for as long as the topic holds the same dict.
"""

from __future__ import annotations

from kcoord.config import BrokerConfig
from kcoord.dataplane import compaction, compression
from kcoord.dataplane.topic_config import effective


class AppendRules:
    __slots__ = (
        "codec",
        "compacted",
        "configs",
        "log_append_time",
        "max_message_bytes",
        "segment_bytes",
        "timestamp_after_max_ms",
        "timestamp_before_max_ms",
    )

    def __init__(self, configs: dict[str, str], broker: BrokerConfig) -> None:
        self.configs = configs  # what the rules were read from
        self.segment_bytes = int(effective("segment.bytes", configs, broker))
        self.max_message_bytes = int(effective("max.message.bytes", configs, broker))
        self.log_append_time = effective("message.timestamp.type", configs, broker) == "LogAppendTime"
        self.timestamp_after_max_ms = int(effective("message.timestamp.after.max.ms", configs, broker))
        self.timestamp_before_max_ms = int(effective("message.timestamp.before.max.ms", configs, broker))
        self.compacted = compaction.is_compacted(configs, broker)
        # (codec id, level) batches are recompressed to; None stores them as the producer sent them.
        self.codec = compression.topic_codec(configs, broker)
