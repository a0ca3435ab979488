"""The Kafka side of the ``kcoord`` PySpark data source, on kafka-python (no pyspark import).

- :class:`OffsetReader` runs where Spark plans (the driver): it lists partitions and resolves
  offsets through one admin client, as Spark's KafkaOffsetReaderAdmin does (Metadata,
  ListOffsets earliest / latest / by timestamp with the query's isolation level), and commits a
  stream's progress as the offsets of a standalone consumer group (OffsetCommit, generation -1).
- :func:`read_range` runs on executors: a fresh consumer per call, assign + seek + poll over
  [start, end) of one partition, as Spark's KafkaDataConsumer does.
- :func:`write_rows` runs on executors: one idempotent producer per task.

Clients are opened lazily and never pickled: Spark ships readers and writers to other Python
processes, where they must open their own.
"""

from __future__ import annotations

import datetime as dt
import logging
import re
import time
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from kafka import IsolationLevel, KafkaAdminClient, KafkaConsumer, KafkaProducer, OffsetSpec, TopicPartition
from kafka.errors import KafkaError, NoError, OffsetOutOfRangeError, UnknownTopicOrPartitionError
from kafka.structs import OffsetAndMetadata

from kcoord.spark.options import (
    EARLIEST,
    LATEST,
    OffsetLimit,
    OptionError,
    SinkOptions,
    SourceOptions,
    TopicPartitionKey,
)

log = logging.getLogger("kcoord.spark")

_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_UNKNOWN_TOPIC = UnknownTopicOrPartitionError.errno


class DataLossError(RuntimeError):
    """Offsets a query needs are gone (retention, a recreated topic); see failOnDataLoss."""


def _configs(cls: type, configs: Mapping[str, Any]) -> dict[str, Any]:
    known = getattr(cls, "DEFAULT_CONFIG", {})
    return {k: v for k, v in configs.items() if k in known}


def new_admin(bootstrap: str, configs: Mapping[str, Any], client_id: str = "kcoord-spark-driver") -> Any:
    return KafkaAdminClient(
        bootstrap_servers=bootstrap, **{"client_id": client_id, **_configs(KafkaAdminClient, configs)}
    )


# --- driver -------------------------------------------------------------------------------------
class OffsetReader:
    """Partitions and offsets of a subscription, through one lazily opened admin client."""

    def __init__(self, opts: SourceOptions) -> None:
        self.opts = opts
        self._admin: Any = None

    @property
    def admin(self) -> Any:
        if self._admin is None:
            self._admin = new_admin(self.opts.bootstrap_servers, self.opts.client_configs)
        return self._admin

    def close(self) -> None:
        if self._admin is not None:
            try:
                self._admin.close()
            finally:
                self._admin = None

    @property
    def isolation(self) -> IsolationLevel:
        return IsolationLevel.READ_COMMITTED if self.opts.read_committed else IsolationLevel.READ_UNCOMMITTED

    def partitions(self) -> list[TopicPartitionKey]:
        """The partitions the subscription covers now (topics not created yet have none)."""
        o = self.opts
        if o.assign:
            return sorted(o.assign)
        if o.subscribe:
            topics = list(o.subscribe)
        else:
            assert o.subscribe_pattern is not None
            rx = re.compile(o.subscribe_pattern)
            topics = [t for t in self.admin.list_topics() if not t.startswith("__") and rx.fullmatch(t)]
        if not topics:
            return []
        out = []
        for t in self.admin.describe_topics(topics):
            if t["error_code"] == _UNKNOWN_TOPIC:
                log.warning("topic %s does not exist (yet)", t["name"])
                continue
            if t["error_code"] != 0:
                raise KafkaError(f"describing topic {t['name']} failed with error code {t['error_code']}")
            out.extend((t["name"], p["partition_index"]) for p in t["partitions"])
        return sorted(out)

    def list_offsets(self, specs: Mapping[TopicPartitionKey, int]) -> dict[TopicPartitionKey, int]:
        """ListOffsets for {partition: spec}; a spec is OffsetSpec.LATEST/EARLIEST or a timestamp
        in ms (answered with -1 when no record is that recent)."""
        if not specs:
            return {}
        res = self.admin.list_partition_offsets(
            {TopicPartition(t, p): spec for (t, p), spec in specs.items()}, isolation_level=self.isolation
        )
        return {(tp.topic, tp.partition): r.offset for tp, r in res.items()}

    def earliest(self, tps: Iterable[TopicPartitionKey]) -> dict[TopicPartitionKey, int]:
        return self.list_offsets(dict.fromkeys(tps, OffsetSpec.EARLIEST))

    def latest(self, tps: Iterable[TopicPartitionKey]) -> dict[TopicPartitionKey, int]:
        return self.list_offsets(dict.fromkeys(tps, OffsetSpec.LATEST))

    def resolve(
        self, limit: OffsetLimit, tps: list[TopicPartitionKey], starting: bool
    ) -> dict[TopicPartitionKey, int]:
        """Concrete offsets for ``limit`` on ``tps`` (Spark's fetchPartitionOffsets)."""
        if limit.kind == "earliest":
            return self.earliest(tps)
        if limit.kind == "latest":
            return self.latest(tps)
        if limit.kind == "offsets":
            given = set(limit.offsets)
            if given != set(tps):
                raise OptionError(
                    f"{'starting' if starting else 'ending'}Offsets must name every partition of the "
                    f"subscription (-2 for earliest, -1 for latest): given {sorted(given)}, "
                    f"assigned {sorted(tps)}"
                )
            specs = {tp: o for tp, o in limit.offsets.items() if o in (LATEST, EARLIEST)}
            resolved = self.list_offsets({tp: OffsetSpec(o) for tp, o in specs.items()})
            return {tp: resolved.get(tp, o) for tp, o in limit.offsets.items()}
        if limit.kind == "timestamps":
            if set(limit.offsets) != set(tps):
                raise OptionError(
                    "offsets by timestamp must name every partition of the subscription: "
                    f"given {sorted(limit.offsets)}, assigned {sorted(tps)}"
                )
            stamps = dict(limit.offsets)
        else:
            assert limit.timestamp is not None
            stamps = dict.fromkeys(tps, limit.timestamp)
        found = self.list_offsets(stamps)
        missing = [tp for tp, o in found.items() if o < 0]
        if missing:
            if starting and not self.opts.starting_no_match_latest:
                raise OptionError(
                    f"no offset matched the starting timestamp on {sorted(missing)} "
                    "(startingOffsetsByTimestampStrategy=latest starts those at the latest offset)"
                )
            found.update(self.latest(missing))
        return found

    def commit(self, group: str, offsets: Mapping[TopicPartitionKey, int], metadata: str = "") -> None:
        """Commit ``offsets`` (the next offsets to read) as a standalone group's offsets."""
        if not offsets:
            return
        result = self.admin.alter_group_offsets(
            group, {TopicPartition(t, p): OffsetAndMetadata(o, metadata, -1) for (t, p), o in offsets.items()}
        )
        failed = {tp: err for tp, err in result.items() if err is not NoError}
        if failed:
            raise KafkaError(f"committing offsets of group {group} failed: {failed}")


# --- executors: reading -------------------------------------------------------------------------
def new_consumer(opts: SourceOptions) -> Any:
    base = {
        "client_id": "kcoord-spark-executor",
        **_configs(KafkaConsumer, opts.client_configs),
        "group_id": None,  # executors never join or commit
        "enable_auto_commit": False,
        "auto_offset_reset": "none",
        "isolation_level": opts.isolation_level,
    }
    return KafkaConsumer(bootstrap_servers=opts.bootstrap_servers, **base)


def to_row(rec: Any, include_headers: bool) -> tuple[Any, ...]:
    """A record as a row of Spark's Kafka source schema."""
    row: tuple[Any, ...] = (
        rec.key,
        rec.value,
        rec.topic,
        rec.partition,
        rec.offset,
        _EPOCH + dt.timedelta(milliseconds=rec.timestamp),
        rec.timestamp_type,
    )
    if include_headers:
        row += ([(k, v) for k, v in rec.headers] if rec.headers else [],)
    return row


def read_range(
    opts: SourceOptions, topic: str, partition: int, start: int, end: int, consumer: Any = None
) -> Iterator[tuple[Any, ...]]:
    """Rows of offsets [start, end) of one partition, read with assign + seek + poll."""
    if end <= start:
        return
    own = consumer is None
    c = new_consumer(opts) if own else consumer
    tp = TopicPartition(topic, partition)
    try:
        c.assign([tp])
        c.seek(tp, start)
        offset = start
        idle_since = time.monotonic()
        while offset < end:
            try:
                polled = c.poll(timeout_ms=500).get(tp, [])
            except OffsetOutOfRangeError:
                earliest = c.beginning_offsets([tp])[tp]
                msg = f"{topic}-{partition}: offset {offset} is gone, the log now starts at {earliest}"
                if opts.fail_on_data_loss:
                    raise DataLossError(msg + " (set failOnDataLoss=false to skip lost data)") from None
                log.warning("%s; skipping to it", msg)
                if earliest >= end:
                    return
                offset = earliest
                c.seek(tp, offset)
                continue
            for rec in polled:
                if rec.offset < offset:
                    continue
                if rec.offset >= end:
                    return
                yield to_row(rec, opts.include_headers)
                offset = rec.offset + 1
            if polled:
                idle_since = time.monotonic()
                continue
            # No records: gaps (compaction, transaction markers, aborted data) move the position.
            position = c.position(tp)
            if position is not None and position > offset:
                offset = min(position, end)
                idle_since = time.monotonic()
            elif (time.monotonic() - idle_since) * 1000 > opts.poll_timeout_ms:
                raise TimeoutError(
                    f"{topic}-{partition}: no records at offset {offset} (reading to {end}) "
                    f"within kafkaConsumer.pollTimeoutMs={opts.poll_timeout_ms}"
                )
    finally:
        if own:
            c.close()


# --- executors: writing -------------------------------------------------------------------------
def _bytes(value: Any, what: str) -> bytes | None:
    if value is None:
        return None
    if isinstance(value, bytes):
        return value
    if isinstance(value, bytearray | memoryview):
        return bytes(value)
    if isinstance(value, str):
        return value.encode("utf-8")
    raise TypeError(f"{what} must be a string or binary, got {type(value).__name__}")


def new_producer(opts: SinkOptions) -> Any:
    settings = {
        "client_id": "kcoord-spark-sink",
        "acks": "all",
        "enable_idempotence": True,  # as the Java client's default, which Spark's sink uses
        "linger_ms": 5,
        **_configs(KafkaProducer, opts.client_configs),
    }
    return KafkaProducer(bootstrap_servers=opts.bootstrap_servers, **settings)


def write_rows(opts: SinkOptions, rows: Iterable[Any], columns: Iterable[str]) -> int:
    """Send every row (a pyspark Row or a mapping) with one producer; returns the count.

    Columns as Spark's Kafka sink: value (required), key, topic (the ``topic`` option wins),
    partition, headers (array of (key, value)). Strings are written as UTF-8.
    """
    cols = set(columns)
    errors: list[BaseException] = []
    producer = new_producer(opts)
    count = 0
    try:
        for row in rows:
            topic = opts.topic or (row["topic"] if "topic" in cols else None)
            if topic is None:
                raise OptionError("no topic: set the topic option or give rows a non-null topic column")
            key = _bytes(row["key"], "key") if "key" in cols else None
            value = _bytes(row["value"], "value")
            partition = row["partition"] if "partition" in cols else None
            headers = None
            if opts.include_headers and "headers" in cols and row["headers"]:
                # kafka-python cannot send a null header value: it is written empty.
                headers = [(str(h[0]), _bytes(h[1], "header value") or b"") for h in row["headers"]]
            if key is None and value is None:
                raise ValueError("a row with a null key and a null value cannot be written by kafka-python")
            fut = producer.send(topic, value=value, key=key, headers=headers, partition=partition)
            fut.add_errback(errors.append)
            count += 1
            if errors:
                raise errors[0]
        producer.flush()
        if errors:
            raise errors[0]
    finally:
        producer.close()
    return count
