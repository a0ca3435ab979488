"""``format("kcoord")``: a PySpark 4 Python data source for Kafka topics, without JVM jars.

Batch (``spark.read``): one input partition per Kafka partition, from ``startingOffsets``
(default earliest) to ``endingOffsets`` (default latest). Streaming (``spark.readStream``):
offsets per partition, new data every trigger, and ``commit()`` stores the query's progress as
the offsets of a consumer group, so lag tools see Spark jobs. Sink (``df.write`` and
``df.writeStream``): rows with key / value / topic / partition / headers, through idempotent
producers.

Works on pyspark 4.0-4.3: option keys arrive lower-cased; ``latestOffset`` is called without
arguments on 4.0/4.1 and as ``latestOffset(start, limit)`` on 4.2+ (admission control); readers
are pickled to other Python processes, so clients are opened lazily and left out of the pickle.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from kcoord.spark import client
from kcoord.spark.options import (
    OptionError,
    SourceOptions,
    TopicPartitionKey,
    parse_sink_options,
    parse_source_options,
    partition_map_from_json,
    partition_map_to_json,
    rate_limit,
)

try:  # pyspark 4.2+: Trigger.AvailableNow with admission control (maxOffsetsPerTrigger)
    from pyspark.sql.streaming.datasource import SupportsTriggerAvailableNow as _AvailableNow
except ImportError:  # 4.0/4.1: Spark wraps the source and reads all that is there in one batch
    _AvailableNow = object  # type: ignore[assignment,misc]

log = logging.getLogger("kcoord.spark")

RECOMMIT_INTERVAL_S = 60.0  # unchanged progress is committed again after this long

HEADERS_TYPE = ArrayType(
    StructType([StructField("key", StringType(), True), StructField("value", BinaryType(), True)]), True
)


def kafka_schema(include_headers: bool = False) -> StructType:
    """The columns of Spark's Kafka source (``headers`` with ``includeHeaders=true``)."""
    fields = [
        StructField("key", BinaryType(), True),
        StructField("value", BinaryType(), True),
        StructField("topic", StringType(), True),
        StructField("partition", IntegerType(), True),
        StructField("offset", LongType(), True),
        StructField("timestamp", TimestampType(), True),
        StructField("timestampType", IntegerType(), True),
    ]
    if include_headers:
        fields.append(StructField("headers", HEADERS_TYPE, True))
    return StructType(fields)


class KafkaPartition(InputPartition):
    """Offsets [start, end) of one Kafka partition: one Spark task."""

    def __init__(self, topic: str, partition: int, start: int, end: int) -> None:
        super().__init__((topic, partition, start, end))
        self.topic = topic
        self.partition = partition
        self.start = start
        self.end = end

    def __repr__(self) -> str:
        return f"KafkaPartition({self.topic}-{self.partition} [{self.start}, {self.end}))"


def _check_schema(schema: StructType, opts: SourceOptions) -> None:
    want = kafka_schema(opts.include_headers)
    if [f.name for f in schema.fields] != [f.name for f in want.fields]:
        raise OptionError(f"the kcoord source has a fixed schema: {want.simpleString()}")


class _Reading:
    """What batch and stream readers share: options, and an admin client that is not pickled."""

    opts: SourceOptions
    _offsets: client.OffsetReader | None

    @property
    def offsets(self) -> client.OffsetReader:
        if self._offsets is None:
            self._offsets = client.OffsetReader(self.opts)
        return self._offsets

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_offsets"] = None  # executors open their own clients
        return state

    def read(self, partition: InputPartition) -> Iterator[tuple[Any, ...]]:
        assert isinstance(partition, KafkaPartition), partition
        yield from client.read_range(
            self.opts, partition.topic, partition.partition, partition.start, partition.end
        )


class KcoordBatchReader(_Reading, DataSourceReader):
    def __init__(self, options: dict[str, str], schema: StructType) -> None:
        self.opts = parse_source_options(options, streaming=False)
        _check_schema(schema, self.opts)
        self._offsets = None

    def partitions(self) -> list[InputPartition]:
        try:
            tps = self.offsets.partitions()
            start = self.offsets.resolve(self.opts.starting, tps, starting=True)
            end = self.offsets.resolve(self.opts.ending, tps, starting=False)
        finally:
            self.offsets.close()
            self._offsets = None
        return [KafkaPartition(t, p, start[(t, p)], max(start[(t, p)], end[(t, p)])) for t, p in tps]


class KcoordStreamReader(_Reading, DataSourceStreamReader, _AvailableNow):
    def __init__(self, options: dict[str, str], schema: StructType) -> None:
        self.opts = parse_source_options(options, streaming=True)
        _check_schema(schema, self.opts)
        self._offsets = None
        self._last_end: dict[TopicPartitionKey, int] | None = None
        self._committed: dict[TopicPartitionKey, int] | None = None
        self._committed_at = 0.0
        self._available_now: dict[TopicPartitionKey, int] | None = None

    def initialOffset(self) -> dict[str, dict[str, int]]:
        tps = self.offsets.partitions()
        start = self.offsets.resolve(self.opts.starting, tps, starting=True)
        self._last_end = start
        return partition_map_to_json(start)

    def latestOffset(self, start: dict | None = None, limit: Any = None) -> dict[str, dict[str, int]]:
        """Latest offsets of every partition, capped by maxOffsetsPerTrigger.

        pyspark 4.0/4.1 call ``latestOffset()``; 4.2+ see the parameters and call
        ``latestOffset(start, limit)`` with the limit from :meth:`getDefaultReadLimit` (or
        ReadAllAvailable, e.g. for Trigger.AvailableNow).
        """
        begin = partition_map_from_json(start) if start is not None else self._last_end
        if begin is not None:
            # Spark runs one micro-batch at a time: when it asks for the next end, the batch that
            # ended at ``begin`` is done (in its commit log). Its own commit() call for that batch
            # only comes once another batch with new data starts, so commit here too: the group's
            # lag is then current at every trigger, not one batch behind.
            self._commit_progress(begin)
        if self._available_now is not None:  # Trigger.AvailableNow: nothing beyond its target
            latest = dict(self._available_now)
        else:
            latest = self.offsets.latest(self.offsets.partitions())
        if begin is not None:
            # Data loss (a recreated topic, retention past the start) is reported when the batch
            # is read; never hand Spark an end below its start.
            latest = {tp: max(o, begin.get(tp, o)) for tp, o in latest.items()}
        max_rows = self._max_rows(limit)
        if max_rows is not None and begin is not None:
            new = [tp for tp in latest if tp not in begin]
            full_begin = {**begin, **self.offsets.earliest(new)} if new else begin
            latest = rate_limit(full_begin, latest, max_rows)
        self._last_end = latest
        return partition_map_to_json(latest)

    def prepareForTriggerAvailableNow(self) -> None:
        """pyspark 4.2+, Trigger.AvailableNow: read up to the offsets that are latest now, in
        micro-batches of at most maxOffsetsPerTrigger, then stop."""
        self._available_now = self.offsets.latest(self.offsets.partitions())

    def _max_rows(self, limit: Any) -> int | None:
        if limit is None:  # pyspark 4.0/4.1: no admission control, the option applies
            return self.opts.max_offsets_per_trigger
        return getattr(limit, "max_rows", None)  # ReadMaxRows; ReadAllAvailable has none

    def getDefaultReadLimit(self) -> Any:
        from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

        n = self.opts.max_offsets_per_trigger
        return ReadMaxRows(n) if n is not None else ReadAllAvailable()

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        begin = partition_map_from_json(start)
        until = partition_map_from_json(end)
        new = [tp for tp in until if tp not in begin]
        if new:  # partitions added since the last batch start at their earliest offset
            begin = {**begin, **self.offsets.earliest(new)}
        self._last_end = until
        out: list[InputPartition] = []
        for (t, p), e in sorted(until.items()):
            s = begin[(t, p)]
            if e > s:
                out.append(KafkaPartition(t, p, s, e))
        return out

    def commit(self, end: dict) -> None:
        """Spark finished every offset below ``end``: store it as the group's committed offsets."""
        self._commit_progress(partition_map_from_json(end))

    def _commit_progress(self, offsets: dict[TopicPartitionKey, int]) -> None:
        """OffsetCommit for the group (``kafka.group.id``, default kcoord-spark-<topics>), unless
        the same offsets were committed less than a minute ago; re-committing an idle stream's
        offsets keeps them from expiring (offsets.retention.minutes) while the query runs."""
        if not self.opts.commit_offsets or not offsets:
            return
        now = time.monotonic()
        if offsets == self._committed and now - self._committed_at < RECOMMIT_INTERVAL_S:
            return
        try:
            self.offsets.commit(self.opts.group_id, offsets, "kcoord.spark")
        except Exception as e:  # progress reporting must not fail the query
            log.warning("could not commit offsets of group %s: %s", self.opts.group_id, e)
            return
        self._committed, self._committed_at = dict(offsets), now

    def stop(self) -> None:
        if self._offsets is not None:
            self._offsets.close()
            self._offsets = None


# --- sink ----------------------------------------------------------------------------------------
@dataclass
class KcoordCommitMessage(WriterCommitMessage):
    rows: int


def _sink_columns(schema: StructType, has_topic_option: bool) -> list[str]:
    names = [f.name for f in schema.fields]
    types = {f.name: f.dataType for f in schema.fields}
    if "value" not in names:
        raise OptionError("the kcoord sink needs a value column (string or binary)")
    if not has_topic_option and "topic" not in names:
        raise OptionError("the kcoord sink needs a topic option or a topic column")
    for name in ("key", "value"):
        if name in types and not isinstance(types[name], StringType | BinaryType):
            raise OptionError(f"column {name} must be string or binary, not {types[name].simpleString()}")
    if "partition" in types and not isinstance(types["partition"], IntegerType):
        raise OptionError(f"column partition must be int, not {types['partition'].simpleString()}")
    return names


class KcoordWriter(DataSourceWriter):
    def __init__(self, options: dict[str, str], schema: StructType, overwrite: bool) -> None:
        if overwrite:
            raise OptionError("the kcoord sink only appends (save mode append)")
        self.opts = parse_sink_options(options)
        self.columns = _sink_columns(schema, self.opts.topic is not None)

    def write(self, iterator: Iterator[Any]) -> KcoordCommitMessage:
        return KcoordCommitMessage(client.write_rows(self.opts, iterator, self.columns))

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        n = sum(m.rows for m in messages if isinstance(m, KcoordCommitMessage))
        log.info("kcoord sink wrote %d rows", n)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        # Records already acknowledged stay in the log (at-least-once, as Spark's Kafka sink).
        log.warning("kcoord sink aborted; rows written by finished tasks remain in the topics")


class KcoordStreamWriter(DataSourceStreamWriter):
    def __init__(self, options: dict[str, str], schema: StructType) -> None:
        self.opts = parse_sink_options(options)
        self.columns = _sink_columns(schema, self.opts.topic is not None)

    def write(self, iterator: Iterator[Any]) -> KcoordCommitMessage:
        return KcoordCommitMessage(client.write_rows(self.opts, iterator, self.columns))

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        pass

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        log.warning("kcoord sink: micro-batch %d aborted; rows already written remain", batchId)


# --- the data source -----------------------------------------------------------------------------
class KcoordDataSource(DataSource):
    """Found by PySpark through ``pyspark_kcoord`` when installed; else ``kcoord.spark.register(spark)``."""

    @classmethod
    def name(cls) -> str:
        return "kcoord"

    def schema(self) -> StructType:
        opts = {str(k).lower(): str(v) for k, v in self.options.items()}
        return kafka_schema(opts.get("includeheaders", "false").strip().lower() == "true")

    def reader(self, schema: StructType) -> DataSourceReader:
        return KcoordBatchReader(self.options, schema)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return KcoordStreamReader(self.options, schema)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        return KcoordWriter(self.options, schema, overwrite)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        return KcoordStreamWriter(self.options, schema)


def register(spark: Any) -> None:
    """Make ``format("kcoord")`` available in this SparkSession."""
    spark.dataSource.register(KcoordDataSource)
