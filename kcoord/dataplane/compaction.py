"""Compacted data topics: ``cleanup.policy`` compact (or compact,delete), as Kafka.

The topic configs are read afresh at every cleaning, so AlterConfigs applies at the next one:
``delete.retention.ms``, ``min.cleanable.dirty.ratio``, ``min.compaction.lag.ms`` and
``max.compaction.lag.ms`` make the partition's ``DataTopicRules`` (storage/compaction_rules).
Records without a key are refused on such topics (INVALID_RECORD), as Kafka's LogValidator
does: the cleaner could not tell which record they replace.
"""

from __future__ import annotations

from kcoord.config import BrokerConfig
from kcoord.dataplane.topic_config import effective
from kcoord.protocol.records import BatchHeader, InvalidBatch
from kcoord.storage import record_filter
from kcoord.storage.compaction_rules import DataTopicRules


def policies(configs: dict[str, str], broker: BrokerConfig) -> set[str]:
    return set(effective("cleanup.policy", configs, broker).split(","))


def is_compacted(configs: dict[str, str], broker: BrokerConfig) -> bool:
    return "compact" in policies(configs, broker)


def rules_for(configs: dict[str, str], broker: BrokerConfig) -> DataTopicRules:
    return DataTopicRules(
        delete_retention_ms=int(effective("delete.retention.ms", configs, broker)),
        min_cleanable_ratio=float(effective("min.cleanable.dirty.ratio", configs, broker)),
        min_compaction_lag_ms=int(effective("min.compaction.lag.ms", configs, broker)),
        max_compaction_lag_ms=int(effective("max.compaction.lag.ms", configs, broker)),
    )


def roll_ms(configs: dict[str, str], broker: BrokerConfig) -> int:
    """segment.ms, or max.compaction.lag.ms if smaller on a compacted topic (KIP-354: the
    active segment is never cleaned, so it must roll for the lag to hold)."""
    segment_ms = int(effective("segment.ms", configs, broker))
    if is_compacted(configs, broker):
        return min(segment_ms, int(effective("max.compaction.lag.ms", configs, broker)))
    return segment_ms


def check_keys(batch: bytes | bytearray | memoryview, h: BatchHeader) -> None:
    """Kafka's validateKey: every record of a compacted topic has a key."""
    body = record_filter.records_body(memoryview(batch)[h.position : h.position + h.size], h)
    for r in record_filter.iter_raw(body, h):
        if r.key is None:
            raise InvalidBatch("Compacted topic cannot accept message without key.", corrupt=False)
