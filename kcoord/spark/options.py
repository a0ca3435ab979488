"""Options of the ``kcoord`` PySpark data source, parsed the way Spark's Kafka source reads them.

Pure Python (no pyspark import), so it can be tested and used on its own. Spark hands option
keys to Python data sources lower-cased, so every lookup here is by lower-cased key; values keep
their case.

Offsets are JSON in Spark's Kafka source format, ``{"topic": {"0": 23, "1": -2}}`` with -2 for
earliest and -1 for latest; the same format is what a stream's offsets look like in its
checkpoint (string partition keys: offsets round-trip through JSON).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

TopicPartitionKey = tuple[str, int]

LATEST = -1  # Spark's KafkaOffsetRangeLimit.LATEST
EARLIEST = -2  # KafkaOffsetRangeLimit.EARLIEST

DEFAULT_GROUP_PREFIX = "kcoord-spark"

# Options that are not client settings even though they start with "kafka.".
_RESERVED_KAFKA = {
    "kafka.bootstrap.servers",
    "kafka.group.id",
    "kafka.isolation.level",
    "kafka.key.deserializer",
    "kafka.value.deserializer",
    "kafka.key.serializer",
    "kafka.value.serializer",
    "kafka.enable.auto.commit",
    "kafka.auto.offset.reset",
}


class OptionError(ValueError):
    """An option is missing, unknown or malformed."""


@dataclass(frozen=True)
class OffsetLimit:
    """Where reading starts or ends: "earliest", "latest", per-partition offsets or timestamps."""

    kind: str  # "earliest" | "latest" | "offsets" | "timestamp" | "timestamps"
    offsets: dict[TopicPartitionKey, int] = field(default_factory=dict)  # for "offsets" / "timestamps"
    timestamp: int | None = None  # for "timestamp" (one for every partition)

    @classmethod
    def parse(cls, value: str) -> OffsetLimit:
        v = value.strip()
        if v.lower() in ("earliest", "latest"):
            return cls(v.lower())
        return cls("offsets", parse_partition_json(v, "offsets"))


@dataclass(frozen=True)
class SourceOptions:
    bootstrap_servers: str
    subscribe: tuple[str, ...] = ()
    subscribe_pattern: str | None = None
    assign: tuple[TopicPartitionKey, ...] = ()
    starting: OffsetLimit = OffsetLimit("latest")
    ending: OffsetLimit = OffsetLimit("latest")
    starting_no_match_latest: bool = False  # startingOffsetsByTimestampStrategy=latest
    include_headers: bool = False
    read_committed: bool = False
    fail_on_data_loss: bool = True
    max_offsets_per_trigger: int | None = None
    commit_offsets: bool = True
    group_id: str = DEFAULT_GROUP_PREFIX
    poll_timeout_ms: int = 120_000
    client_configs: dict[str, Any] = field(default_factory=dict)

    @property
    def isolation_level(self) -> str:
        return "read_committed" if self.read_committed else "read_uncommitted"

    def describe_subscription(self) -> str:
        if self.subscribe:
            return ",".join(self.subscribe)
        if self.subscribe_pattern is not None:
            return f"pattern:{self.subscribe_pattern}"
        return "assign:" + ",".join(f"{t}-{p}" for t, p in self.assign)


@dataclass(frozen=True)
class SinkOptions:
    bootstrap_servers: str
    topic: str | None = None
    include_headers: bool = True
    client_configs: dict[str, Any] = field(default_factory=dict)


# --- parsing ------------------------------------------------------------------------------------
def lower_keys(options: Mapping[str, str]) -> dict[str, str]:
    """Spark passes keys lower-cased already (4.0-4.3); do it anyway for direct callers."""
    return {str(k).lower(): str(v) for k, v in options.items()}


def parse_bool(value: str, name: str) -> bool:
    v = value.strip().lower()
    if v in ("true", "1", "yes"):
        return True
    if v in ("false", "0", "no"):
        return False
    raise OptionError(f"option {name} must be true or false, got {value!r}")


def parse_int(value: str, name: str, minimum: int | None = None) -> int:
    try:
        n = int(value.strip())
    except ValueError:
        raise OptionError(f"option {name} must be an integer, got {value!r}") from None
    if minimum is not None and n < minimum:
        raise OptionError(f"option {name} must be at least {minimum}, got {n}")
    return n


def parse_partition_json(value: str, what: str) -> dict[TopicPartitionKey, int]:
    """``{"topic": {"0": 23}}`` -> {("topic", 0): 23}."""
    try:
        data = json.loads(value)
    except json.JSONDecodeError as e:
        raise OptionError(f'{what} must be JSON like {{"topic":{{"0":23}}}}: {e}') from None
    return partition_map_from_json(data, what)


def partition_map_from_json(data: Any, what: str = "offsets") -> dict[TopicPartitionKey, int]:
    if not isinstance(data, dict):
        raise OptionError(f"{what} must be a JSON object of topics, got {data!r}")
    out: dict[TopicPartitionKey, int] = {}
    for topic, parts in data.items():
        if not isinstance(parts, dict):
            raise OptionError(f"{what}: partitions of {topic!r} must be an object, got {parts!r}")
        for p, o in parts.items():
            try:
                out[(str(topic), int(p))] = int(o)
            except (TypeError, ValueError):
                raise OptionError(f"{what}: bad entry {topic!r}/{p!r}: {o!r}") from None
    return out


def partition_map_to_json(offsets: Mapping[TopicPartitionKey, int]) -> dict[str, dict[str, int]]:
    """{("topic", 0): 23} -> {"topic": {"0": 23}}, sorted, as JSON object keys must be strings."""
    out: dict[str, dict[str, int]] = {}
    for (topic, p), o in sorted(offsets.items()):
        out.setdefault(topic, {})[str(p)] = int(o)
    return out


def parse_assign(value: str) -> tuple[TopicPartitionKey, ...]:
    """``{"topic": [0, 1]}`` -> (("topic", 0), ("topic", 1))."""
    try:
        data = json.loads(value)
    except json.JSONDecodeError as e:
        raise OptionError(f'assign must be JSON like {{"topic":[0,1]}}: {e}') from None
    if not isinstance(data, dict) or not all(isinstance(v, list) for v in data.values()):
        raise OptionError(f'assign must be JSON like {{"topic":[0,1]}}, got {value!r}')
    return tuple(sorted((str(t), int(p)) for t, parts in data.items() for p in parts))


def _limit(opts: dict[str, str], prefix: str, default: str) -> OffsetLimit:
    """startingTimestamp > startingOffsetsByTimestamp > startingOffsets (Spark's precedence)."""
    if f"{prefix}timestamp" in opts:
        return OffsetLimit(
            "timestamp", timestamp=parse_int(opts[f"{prefix}timestamp"], f"{prefix}Timestamp", 0)
        )
    if f"{prefix}offsetsbytimestamp" in opts:
        return OffsetLimit(
            "timestamps",
            parse_partition_json(opts[f"{prefix}offsetsbytimestamp"], f"{prefix}OffsetsByTimestamp"),
        )
    return OffsetLimit.parse(opts.get(f"{prefix}offsets", default))


def client_configs(opts: dict[str, str], known: set[str] | None = None) -> dict[str, Any]:
    """``kafka.<name>`` options as kafka-python settings (dots become underscores).

    ``known`` limits them to the settings the client understands; others are dropped so that a
    Java-only setting in shared options (e.g. ``kafka.sasl.jaas.config``) does not break a job.
    """
    out: dict[str, Any] = {}
    for key, value in opts.items():
        if not key.startswith("kafka.") or key in _RESERVED_KAFKA:
            continue
        name = key[len("kafka.") :].replace(".", "_")
        if known is not None and name not in known:
            continue
        v: Any = value
        if re.fullmatch(r"-?\d+", value):
            v = int(value)
        elif value.lower() in ("true", "false"):
            v = value.lower() == "true"
        out[name] = v
    return out


def default_group_id(subscription: str, prefix: str = DEFAULT_GROUP_PREFIX) -> str:
    """``<prefix>-<topics>`` for subscribe; a pattern or an assignment gets a short stable hash."""
    if subscription and ":" not in subscription and len(subscription) <= 200:
        return f"{prefix}-{subscription}"
    return f"{prefix}-{hashlib.sha1(subscription.encode()).hexdigest()[:12]}"


def parse_source_options(
    options: Mapping[str, str], streaming: bool, known_client_configs: set[str] | None = None
) -> SourceOptions:
    opts = lower_keys(options)
    bootstrap = opts.get("kafka.bootstrap.servers")
    if not bootstrap:
        raise OptionError("option kafka.bootstrap.servers is required")
    strategies = [k for k in ("subscribe", "subscribepattern", "assign") if k in opts]
    if len(strategies) != 1:
        raise OptionError(
            "exactly one of the options subscribe, subscribePattern, assign is required"
            + (f" (got {', '.join(strategies)})" if strategies else "")
        )
    subscribe: tuple[str, ...] = ()
    pattern = None
    assign: tuple[TopicPartitionKey, ...] = ()
    if "subscribe" in opts:
        subscribe = tuple(t.strip() for t in opts["subscribe"].split(",") if t.strip())
        if not subscribe:
            raise OptionError("option subscribe names no topic")
    elif "subscribepattern" in opts:
        pattern = opts["subscribepattern"].strip()
        try:
            re.compile(pattern)
        except re.error as e:
            raise OptionError(f"option subscribePattern is not a regular expression: {e}") from None
    else:
        assign = parse_assign(opts["assign"])

    starting = _limit(opts, "starting", "latest" if streaming else "earliest")
    ending = _limit(opts, "ending", "latest")
    if streaming and any(k.startswith("ending") for k in opts):
        raise OptionError("ending offsets are not valid for a streaming query")
    if starting.kind == "latest" and not streaming and "startingoffsets" in opts:
        raise OptionError("startingOffsets=latest is not valid for a batch query")
    if ending.kind == "earliest":
        raise OptionError("endingOffsets=earliest is not valid")
    if ending.kind == "offsets" and any(o == EARLIEST for o in ending.offsets.values()):
        raise OptionError("endingOffsets cannot use -2 (earliest)")
    if starting.kind == "offsets" and not streaming and any(o == LATEST for o in starting.offsets.values()):
        raise OptionError("startingOffsets cannot use -1 (latest) for a batch query")

    isolation = opts.get("kafka.isolation.level", "read_uncommitted").strip().lower()
    if isolation not in ("read_committed", "read_uncommitted"):
        raise OptionError(
            f"kafka.isolation.level must be read_committed or read_uncommitted, got {isolation!r}"
        )
    strategy = opts.get("startingoffsetsbytimestampstrategy", "error").strip().lower()
    if strategy not in ("error", "latest"):
        raise OptionError(f"startingOffsetsByTimestampStrategy must be error or latest, got {strategy!r}")

    max_per_trigger = None
    if "maxoffsetspertrigger" in opts:
        max_per_trigger = parse_int(opts["maxoffsetspertrigger"], "maxOffsetsPerTrigger", 1)

    base = SourceOptions(
        bootstrap_servers=bootstrap,
        subscribe=subscribe,
        subscribe_pattern=pattern,
        assign=assign,
        starting=starting,
        ending=ending,
        starting_no_match_latest=strategy == "latest",
        include_headers=parse_bool(opts.get("includeheaders", "false"), "includeHeaders"),
        read_committed=isolation == "read_committed",
        fail_on_data_loss=parse_bool(opts.get("failondataloss", "true"), "failOnDataLoss"),
        max_offsets_per_trigger=max_per_trigger,
        commit_offsets=parse_bool(opts.get("commitoffsets", "true"), "commitOffsets"),
        poll_timeout_ms=parse_int(
            opts.get("kafkaconsumer.polltimeoutms", "120000"), "kafkaConsumer.pollTimeoutMs", 1
        ),
        client_configs=client_configs(opts, known_client_configs),
    )
    group = opts.get("kafka.group.id") or default_group_id(
        base.describe_subscription(), opts.get("groupidprefix", DEFAULT_GROUP_PREFIX)
    )
    return replace(base, group_id=group)


def parse_sink_options(
    options: Mapping[str, str], known_client_configs: set[str] | None = None
) -> SinkOptions:
    opts = lower_keys(options)
    bootstrap = opts.get("kafka.bootstrap.servers")
    if not bootstrap:
        raise OptionError("option kafka.bootstrap.servers is required")
    return SinkOptions(
        bootstrap_servers=bootstrap,
        topic=opts.get("topic") or None,
        include_headers=parse_bool(opts.get("includeheaders", "true"), "includeHeaders"),
        client_configs=client_configs(opts, known_client_configs),
    )


# --- micro-batch planning -----------------------------------------------------------------------
def rate_limit(
    start: Mapping[TopicPartitionKey, int], latest: Mapping[TopicPartitionKey, int], limit: int
) -> dict[TopicPartitionKey, int]:
    """End offsets reading at most about ``limit`` records, shared in proportion to each
    partition's backlog (Spark's KafkaMicroBatchStream.rateLimit): a partition's share rounds
    down, but a share below one record rounds up so that every backlog moves."""
    sizes = {tp: max(0, end - start.get(tp, end)) for tp, end in latest.items()}
    total = sum(sizes.values())
    if total <= limit:
        return dict(latest)
    out = {}
    for tp, end in latest.items():
        begin = start.get(tp, end)
        if sizes[tp] == 0:
            out[tp] = end
            continue
        share = limit * (sizes[tp] / total)
        n = int(share) if share >= 1 else 1
        out[tp] = min(end, begin + n)
    return out
