"""Group configs (GROUP resources of Describe/IncrementalAlterConfigs), as Kafka 4.3's GroupConfig.

Each ``share.*`` config defaults to a broker setting and must stay within the broker's bounds
(``group.share.min/max.*``); unknown names are INVALID_CONFIG, as are the configs of the
consumer (KIP-848) and streams protocols, which kcoord does not implement.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from kcoord.config import BrokerConfig
from kcoord.protocol.configs import TYPE_BOOLEAN, TYPE_INT, TYPE_STRING

_DURATION = re.compile(r"^-?P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?$")


@dataclass(frozen=True)
class SharePartitionConfig:
    record_lock_duration_ms: int = 30000  # group.share.record.lock.duration.ms
    delivery_count_limit: int = 5  # group.share.delivery.count.limit
    max_record_locks: int = 2000  # group.share.partition.max.record.locks
    # Checkpoint policy: write a SHARE_CHECKPOINT instead of the next SHARE_DELTA once the
    # current checkpoint epoch has this many deltas, or (checkpoint_when_smaller) when the
    # checkpoint would hold fewer state batches than the delta.
    checkpoint_every_deltas: int = 50
    checkpoint_when_smaller: bool = True


class InvalidGroupConfig(ValueError):
    pass


@dataclass(frozen=True)
class GroupConfigDef:
    name: str
    config_type: int
    default: Callable[[BrokerConfig], str]
    validate: Callable[[str, BrokerConfig], None]
    doc: str
    synonym: str | None = None


def _int_between(
    lo: Callable[[BrokerConfig], int], hi: Callable[[BrokerConfig], int]
) -> Callable[[str, BrokerConfig], None]:
    def check(value: str, cfg: BrokerConfig) -> None:
        try:
            v = int(value)
        except ValueError:
            raise InvalidGroupConfig(f"{value!r} is not an integer") from None
        if not lo(cfg) <= v <= hi(cfg):
            raise InvalidGroupConfig(f"{v} is outside [{lo(cfg)}, {hi(cfg)}]")

    return check


def _one_of(*choices: str) -> Callable[[str, BrokerConfig], None]:
    def check(value: str, _cfg: BrokerConfig) -> None:
        if value not in choices:
            raise InvalidGroupConfig(f"{value!r} is not one of {', '.join(choices)}")

    return check


def parse_by_duration(value: str) -> int:
    """Milliseconds of a ``by_duration:<ISO-8601 duration>`` reset strategy."""
    m = _DURATION.match(value)
    if m is None or value.startswith("-") or value in ("P", "PT"):
        raise InvalidGroupConfig(f"{value!r} is not a non-negative ISO-8601 duration (PnDTnHnMn.nS)")
    days, hours, minutes, seconds = (float(x) if x else 0.0 for x in m.groups())
    return int((((days * 24 + hours) * 60 + minutes) * 60 + seconds) * 1000)


def _auto_offset_reset(value: str, _cfg: BrokerConfig) -> None:
    if value in ("earliest", "latest"):
        return
    if value.startswith("by_duration:"):
        parse_by_duration(value.removeprefix("by_duration:"))
        return
    raise InvalidGroupConfig(f"{value!r} is not earliest, latest or by_duration:<duration>")


def _bool(value: str, _cfg: BrokerConfig) -> None:
    if value.lower() not in ("true", "false"):
        raise InvalidGroupConfig(f"{value!r} is not a boolean")


GROUP_CONFIGS: dict[str, GroupConfigDef] = {
    d.name: d
    for d in [
        GroupConfigDef(
            "share.session.timeout.ms",
            TYPE_INT,
            lambda c: str(c.group_share_session_timeout_ms),
            _int_between(
                lambda c: c.group_share_min_session_timeout_ms, lambda c: c.group_share_max_session_timeout_ms
            ),
            "A member that does not heartbeat for this long is removed.",
            "group.share.session.timeout.ms",
        ),
        GroupConfigDef(
            "share.heartbeat.interval.ms",
            TYPE_INT,
            lambda c: str(c.group_share_heartbeat_interval_ms),
            _int_between(
                lambda c: c.group_share_min_heartbeat_interval_ms,
                lambda c: c.group_share_max_heartbeat_interval_ms,
            ),
            "How often members heartbeat.",
            "group.share.heartbeat.interval.ms",
        ),
        GroupConfigDef(
            "share.record.lock.duration.ms",
            TYPE_INT,
            lambda c: str(c.group_share_record_lock_duration_ms),
            _int_between(
                lambda c: c.group_share_min_record_lock_duration_ms,
                lambda c: c.group_share_max_record_lock_duration_ms,
            ),
            "How long acquired records stay locked to a member.",
            "group.share.record.lock.duration.ms",
        ),
        GroupConfigDef(
            "share.delivery.count.limit",
            TYPE_INT,
            lambda c: str(c.group_share_delivery_count_limit),
            _int_between(
                lambda c: c.group_share_min_delivery_count_limit,
                lambda c: c.group_share_max_delivery_count_limit,
            ),
            "Deliveries after which a record is archived.",
            "group.share.delivery.count.limit",
        ),
        GroupConfigDef(
            "share.partition.max.record.locks",
            TYPE_INT,
            lambda c: str(c.group_share_partition_max_record_locks),
            _int_between(lambda _c: 100, lambda _c: 10000),
            "Records in flight per share-partition.",
            "group.share.partition.max.record.locks",
        ),
        GroupConfigDef(
            "share.auto.offset.reset",
            TYPE_STRING,
            lambda _c: "latest",
            _auto_offset_reset,
            "Where a new share-partition starts: earliest, latest or by_duration:<duration>.",
        ),
        GroupConfigDef(
            "share.isolation.level",
            TYPE_STRING,
            lambda c: c.group_share_isolation_level,
            _one_of("read_uncommitted", "read_committed"),
            "Which records a share group may see.",
            "group.share.isolation.level",
        ),
        GroupConfigDef(
            "share.renew.acknowledge.enable",
            TYPE_BOOLEAN,
            lambda _c: "true",
            _bool,
            "Whether members may renew acquisition locks (KIP-1222).",
        ),
    ]
}


def validate_group_configs(configs: dict[str, str], cfg: BrokerConfig) -> None:
    for name, value in configs.items():
        d = GROUP_CONFIGS.get(name)
        if d is None:
            raise InvalidGroupConfig(f"Unknown group config name: {name}")
        try:
            d.validate(value, cfg)
        except InvalidGroupConfig as e:
            raise InvalidGroupConfig(f"Invalid value {value} for configuration {name}: {e}") from None
    session = int(effective_group_config("share.session.timeout.ms", configs, cfg))
    heartbeat = int(effective_group_config("share.heartbeat.interval.ms", configs, cfg))
    if heartbeat >= session:
        raise InvalidGroupConfig("share.heartbeat.interval.ms must be less than share.session.timeout.ms")


def effective_group_config(name: str, configs: dict[str, str], cfg: BrokerConfig) -> str:
    return configs[name] if name in configs else GROUP_CONFIGS[name].default(cfg)


def share_partition_config(configs: dict[str, str], cfg: BrokerConfig) -> SharePartitionConfig:
    return SharePartitionConfig(
        record_lock_duration_ms=int(effective_group_config("share.record.lock.duration.ms", configs, cfg)),
        delivery_count_limit=int(effective_group_config("share.delivery.count.limit", configs, cfg)),
        max_record_locks=int(effective_group_config("share.partition.max.record.locks", configs, cfg)),
    )
