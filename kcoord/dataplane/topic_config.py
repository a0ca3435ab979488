"""Topic-level configs: Kafka's names, types and defaults (LogConfig / TopicConfig).

Every Kafka topic config can be described. Configs kcoord acts on can be set to any valid
value; the others (replication, tiered storage, ...) accept only
their default, so that a client is told clearly instead of being silently ignored.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from kcoord.config import BrokerConfig
from kcoord.protocol.configs import (
    TYPE_BOOLEAN,
    TYPE_DOUBLE,
    TYPE_INT,
    TYPE_LIST,
    TYPE_LONG,
    TYPE_SHORT,
    TYPE_STRING,
)

LONG_MAX: Final = 9223372036854775807


@dataclass(frozen=True)
class TopicConfigDef:
    name: str
    config_type: int
    default: Callable[[BrokerConfig], str]
    honoured: bool
    doc: str
    synonym: str | None = None  # the broker config that supplies the default
    choices: tuple[str, ...] | None = None


def _const(v: object) -> Callable[[BrokerConfig], str]:
    s = str(v).lower() if isinstance(v, bool) else str(v)
    return lambda _cfg: s


def _c(
    name: str,
    t: int,
    default: object,
    honoured: bool,
    doc: str,
    synonym: str | None = None,
    choices: tuple[str, ...] | None = None,
) -> TopicConfigDef:
    fn = default if callable(default) else _const(default)
    return TopicConfigDef(name, t, fn, honoured, doc, synonym, choices)


TOPIC_CONFIGS: dict[str, TopicConfigDef] = {
    d.name: d
    for d in [
        _c(
            "cleanup.policy",
            TYPE_LIST,
            "delete",
            True,
            "delete: retention deletes old segments; compact: the log cleaner keeps the latest "
            "record of every key; both: compact, and delete past retention.",
            "log.cleanup.policy",
            ("delete", "compact", "delete,compact", "compact,delete"),
        ),
        _c(
            "compression.type",
            TYPE_STRING,
            "producer",
            True,
            "producer: batches are stored as the producer compressed them; uncompressed, gzip, "
            "snappy, lz4, zstd: batches with another codec are recompressed with this one on append.",
            "compression.type",
            ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"),
        ),
        _c(
            "compression.gzip.level",
            TYPE_INT,
            -1,
            True,
            "gzip level when compression.type=gzip recompresses (-1: zlib's default).",
        ),
        _c("compression.lz4.level", TYPE_INT, 9, True, "lz4 level when compression.type=lz4 recompresses."),
        _c(
            "compression.zstd.level", TYPE_INT, 3, True, "zstd level when compression.type=zstd recompresses."
        ),
        _c(
            "delete.retention.ms",
            TYPE_LONG,
            lambda c: str(c.log_cleaner_delete_retention_ms),
            True,
            "Keep tombstones this long when compacting.",
            "log.cleaner.delete.retention.ms",
        ),
        _c("file.delete.delay.ms", TYPE_LONG, 60000, False, "Files are deleted at once."),
        _c(
            "flush.messages",
            TYPE_LONG,
            LONG_MAX,
            True,
            "fsync once this many messages are unsynced (log.flush.policy=always syncs every write).",
        ),
        _c(
            "flush.ms",
            TYPE_LONG,
            LONG_MAX,
            True,
            "fsync at the latest this long after a write (log.flush.policy=always syncs every write).",
        ),
        _c("follower.replication.throttled.replicas", TYPE_LIST, "", False, "No replication."),
        _c(
            "index.interval.bytes",
            TYPE_INT,
            lambda c: str(c.log_index_interval_bytes),
            True,
            "Bytes between offset-index entries.",
            "log.index.interval.bytes",
        ),
        _c("leader.replication.throttled.replicas", TYPE_LIST, "", False, "No replication."),
        _c("local.retention.bytes", TYPE_LONG, -2, False, "No tiered storage."),
        _c("local.retention.ms", TYPE_LONG, -2, False, "No tiered storage."),
        _c(
            "max.compaction.lag.ms",
            TYPE_LONG,
            LONG_MAX,
            True,
            "Clean a record at the latest this long after it was written (rolls the active segment too).",
        ),
        _c(
            "max.message.bytes",
            TYPE_INT,
            lambda c: str(c.message_max_bytes),
            True,
            "Largest record batch accepted.",
            "message.max.bytes",
        ),
        _c(
            "message.timestamp.after.max.ms",
            TYPE_LONG,
            3600000,
            True,
            "Reject batches whose timestamp is this far in the future.",
        ),
        _c(
            "message.timestamp.before.max.ms",
            TYPE_LONG,
            LONG_MAX,
            True,
            "Reject batches whose timestamp is this far in the past.",
        ),
        _c(
            "message.timestamp.type",
            TYPE_STRING,
            lambda c: c.log_message_timestamp_type,
            True,
            "CreateTime or LogAppendTime.",
            "log.message.timestamp.type",
            ("CreateTime", "LogAppendTime"),
        ),
        _c(
            "min.cleanable.dirty.ratio",
            TYPE_DOUBLE,
            lambda c: str(c.log_cleaner_min_cleanable_ratio),
            True,
            "Clean once this share of the cleanable log was written since the last cleaning.",
            "log.cleaner.min.cleanable.ratio",
        ),
        _c(
            "min.compaction.lag.ms",
            TYPE_LONG,
            0,
            True,
            "Leave records uncompacted for at least this long.",
        ),
        _c("min.insync.replicas", TYPE_INT, 1, False, "One broker: one replica."),
        _c(
            "preallocate",
            TYPE_BOOLEAN,
            lambda c: str(c.log_preallocate).lower(),
            True,
            "Grow the active segment's file ahead of its appends (trimmed when it rolls).",
            "log.preallocate",
        ),
        _c("remote.storage.enable", TYPE_BOOLEAN, False, False, "No tiered storage."),
        _c("remote.log.copy.disable", TYPE_BOOLEAN, False, False, "No tiered storage."),
        _c("remote.log.delete.on.disable", TYPE_BOOLEAN, False, False, "No tiered storage."),
        _c(
            "retention.bytes",
            TYPE_LONG,
            lambda c: str(c.log_retention_bytes),
            True,
            "Delete old segments beyond this size.",
            "log.retention.bytes",
        ),
        _c(
            "retention.ms",
            TYPE_LONG,
            lambda c: str(c.effective_log_retention_ms),
            True,
            "Delete segments older than this.",
            "log.retention.ms",
        ),
        _c(
            "segment.bytes",
            TYPE_INT,
            lambda c: str(c.log_segment_bytes),
            True,
            "Roll segments at this size.",
            "log.segment.bytes",
        ),
        _c("segment.index.bytes", TYPE_INT, 10485760, False, "Indexes grow as needed."),
        _c(
            "segment.jitter.ms",
            TYPE_LONG,
            0,
            True,
            "Each segment rolls up to this much (random) before segment.ms.",
        ),
        _c(
            "segment.ms",
            TYPE_LONG,
            lambda c: str(c.effective_log_roll_ms),
            True,
            "Roll segments this old.",
            "log.roll.ms",
        ),
        _c("unclean.leader.election.enable", TYPE_BOOLEAN, False, False, "One broker: one leader."),
    ]
}


class InvalidTopicConfig(ValueError):
    pass


def _check_type(d: TopicConfigDef, value: str) -> None:
    try:
        if d.config_type in (TYPE_INT, TYPE_LONG, TYPE_SHORT):
            int(value)
        elif d.config_type == TYPE_DOUBLE:
            float(value)
        elif d.config_type == TYPE_BOOLEAN and value.lower() not in ("true", "false"):
            raise ValueError
    except ValueError:
        raise InvalidTopicConfig(f"invalid value {value!r} for {d.name}") from None
    if d.name == "compression.type" and value not in (d.choices or ()):
        # Kafka's ConfigDef.ValidString message.
        raise InvalidTopicConfig(
            f"Invalid value {value} for configuration {d.name}: String must be one of: "
            + ", ".join(d.choices or ())
        )
    if d.choices is not None and value not in d.choices:
        raise InvalidTopicConfig(f"invalid value {value!r} for {d.name}: one of {', '.join(d.choices)}")


# Kafka's ranges of the codec levels (GzipCompression, Lz4Compression, ZstdCompression).
_LEVELS = {
    "compression.gzip.level": (1, 9),
    "compression.lz4.level": (1, 17),
    "compression.zstd.level": (-131072, 22),
}


def _check_level(name: str, level: int) -> None:
    bounds = _LEVELS.get(name)
    if bounds is None:
        return
    low, high = bounds
    if name == "compression.gzip.level":
        if level != -1 and not low <= level <= high:
            raise InvalidTopicConfig(
                f"Invalid value {level} for configuration {name}: Value must be between {low} and "
                f"{high} or equal to -1"
            )
    elif level < low:
        raise InvalidTopicConfig(
            f"Invalid value {level} for configuration {name}: Value must be at least {low}"
        )
    elif level > high:
        raise InvalidTopicConfig(
            f"Invalid value {level} for configuration {name}: Value must be no more than {high}"
        )


def validate_topic_configs(configs: dict[str, str | None], broker: BrokerConfig) -> dict[str, str]:
    """Check user-set topic configs; returns the ones to store (null values dropped)."""
    out: dict[str, str] = {}
    for name, value in configs.items():
        d = TOPIC_CONFIGS.get(name)
        if d is None:
            raise InvalidTopicConfig(f"Unknown topic config name: {name}")
        if value is None:
            continue
        _check_type(d, value)
        if name == "min.cleanable.dirty.ratio" and not 0.0 <= float(value) <= 1.0:
            raise InvalidTopicConfig(
                f"Invalid value {value} for configuration min.cleanable.dirty.ratio: Value must be "
                "no more than 1 and at least 0"
            )
        if (
            name in ("min.compaction.lag.ms", "delete.retention.ms", "flush.ms", "segment.jitter.ms")
            and int(value) < 0
        ):
            raise InvalidTopicConfig(
                f"Invalid value {value} for configuration {name}: Value must be at least 0"
            )
        if name in ("max.compaction.lag.ms", "flush.messages") and int(value) < 1:
            raise InvalidTopicConfig(
                f"Invalid value {value} for configuration {name}: Value must be at least 1"
            )
        _check_level(name, int(value) if name in _LEVELS else 0)
        if not d.honoured and value != d.default(broker):
            raise InvalidTopicConfig(
                f"kcoord does not implement {name}; only its default {d.default(broker)!r} is accepted"
            )
        if name == "segment.bytes" and int(value) < 1048576:
            raise InvalidTopicConfig("Invalid value for segment.bytes: must be at least 1048576")
        out[name] = value
    min_lag = int(out.get("min.compaction.lag.ms", "0"))
    max_lag = int(out.get("max.compaction.lag.ms", str(LONG_MAX)))
    if min_lag > max_lag:
        raise InvalidTopicConfig(
            f"conflict topic configs: min.compaction.lag.ms {min_lag} is greater than "
            f"max.compaction.lag.ms {max_lag}"
        )
    return out


def effective(name: str, topic_configs: dict[str, str], broker: BrokerConfig) -> str:
    if name in topic_configs:
        return topic_configs[name]
    return TOPIC_CONFIGS[name].default(broker)
