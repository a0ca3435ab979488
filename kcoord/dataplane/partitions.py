"""Topics and partitions of the data plane: the partition manager.

Topic metadata (name, id, partition count, configs) is kept in ``<log.dirs>/topics.json``,
written atomically; each partition's log lives in ``<log.dirs>/<topic>-<n>/`` next to a
``partition.metadata`` file holding the topic id, as Kafka lays it out. This broker leads
every partition at leader epoch 0.

Transactions' data plane (Kafka's UnifiedLog with its ProducerStateManager): producer state
follows every append; the last stable offset is the first unstable offset (clamped to the log
start offset) when it is below the high watermark, else the high watermark; ABORT markers index
their transaction in the segment's ``.txnindex``. Producer state is snapshotted to
``<20-digit offset>.snapshot`` in the partition directory when a segment rolls and at clean
shutdown: JSON ``{"version": 1, "offset": N, "producers": [[producer id, epoch, coordinator
epoch, last timestamp, ongoing transaction's first offset or null, [[first seq, last seq, first
offset, last offset, timestamp], ...]], ...]}`` (kcoord's own format, not Kafka's binary one),
the state after every batch below N. On start the newest usable snapshot is loaded and the log
after it replayed (rebuilding the transaction indexes of what is replayed), so producer state
and ongoing transactions survive retention deleting the segments they were written in.
"""

from __future__ import annotations

import base64
import errno
import json
import os
import re
import shutil
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import structlog

from kcoord.clock import Clock
from kcoord.config import BrokerConfig
from kcoord.dataplane import compaction
from kcoord.dataplane.append_rules import AppendRules
from kcoord.dataplane.producer_state import CompletedTxn, ProducerEntry, ProducerStateTable
from kcoord.dataplane.topic_config import effective, validate_topic_configs
from kcoord.protocol import records
from kcoord.protocol.errors import ErrorCode, KafkaError
from kcoord.protocol.records import BatchHeader
from kcoord.storage.atomic import DirectoryNotSynced, atomic_write
from kcoord.storage.flush import Flusher
from kcoord.storage.log import Log, LogConfig, OffsetOutOfRange
from kcoord.storage.log_cleaner import LogCleaner
from kcoord.storage.txn_index import AbortedTxn

log = structlog.get_logger(__name__)

LEADER_EPOCH: Final = 0
MAX_TOPIC_NAME: Final = 249
_LEGAL_TOPIC = re.compile(r"^[a-zA-Z0-9._-]+$")
CLEAN_SHUTDOWN_MARKER: Final = ".kcoord_cleanshutdown"
SNAPSHOT_SUFFIX: Final = ".snapshot"
SNAPSHOT_VERSION: Final = 1


def validate_topic_name(name: str | None) -> None:
    """Kafka's Topic.validate: INVALID_TOPIC_EXCEPTION for an illegal name."""
    if not name:
        raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION, "topic name is empty")
    if name in (".", ".."):
        raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION, f"topic name cannot be {name!r}")
    if len(name) > MAX_TOPIC_NAME:
        raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION, f"topic name longer than {MAX_TOPIC_NAME}")
    if not _LEGAL_TOPIC.match(name):
        raise KafkaError(
            ErrorCode.INVALID_TOPIC_EXCEPTION,
            f"topic name {name!r} has characters other than ASCII alphanumerics, '.', '_' and '-'",
        )


def uuid_to_base64(u: uuid.UUID) -> str:
    """Kafka's string form of a Uuid (URL-safe base64 without padding)."""
    return base64.urlsafe_b64encode(u.bytes).decode().rstrip("=")


def new_topic_id() -> uuid.UUID:
    # Kafka never hands out the zero id or ids whose string form starts with '-'.
    while True:
        u = uuid.uuid4()
        if not uuid_to_base64(u).startswith("-"):
            return u


class Partition:
    def __init__(self, topic: Topic, index: int, log_: Log) -> None:
        self.topic = topic
        self.index = index
        self.log = log_
        self.producers = ProducerStateTable()
        self._waiters: set[Callable[[], None]] = set()
        self._snapshots = False  # data partitions only: coordinator logs have no producer state
        log_.hw_listeners.append(self._on_high_watermark)

    @property
    def leader_epoch(self) -> int:
        return LEADER_EPOCH

    @property
    def high_watermark(self) -> int:
        return self.log.high_watermark

    @property
    def first_unstable_offset(self) -> int | None:
        """The first offset of the oldest transaction not yet decided, or decided by a marker
        the high watermark has not passed; never below the log start offset."""
        first = self.producers.first_unstable_offset()
        return None if first is None else max(first, self.log.log_start_offset)

    @property
    def last_stable_offset(self) -> int:
        hw = self.log.high_watermark
        first = self.first_unstable_offset
        return first if first is not None and first < hw else hw

    @property
    def log_start_offset(self) -> int:
        return self.log.log_start_offset

    # --- appending ---------------------------------------------------------------------------
    def append_from_client(
        self, data: bytearray | memoryview, headers: list[BatchHeader], now_ms: int, log_append_time: bool
    ) -> tuple[int, int, bool]:
        """Append validated producer batches (no control batches): (first offset, log append
        time, appended). A duplicate of a recent batch is not appended; its offsets answer."""
        duplicate = self.producers.validate(headers)
        if duplicate is not None:
            return duplicate.first_offset, -1, False
        info = self.log.append(data, headers, now_ms, log_append_time=log_append_time)
        for h in headers:
            self.producers.update(h, h.max_timestamp)
        return info.first_offset, info.log_append_time, True

    def write_txn_marker(
        self, producer_id: int, producer_epoch: int, coordinator_epoch: int, commit: bool, now_ms: int
    ) -> int:
        """Append a COMMIT or ABORT marker for the producer's transaction (the partition leader's
        part of WriteTxnMarkers); returns its offset. INVALID_PRODUCER_EPOCH for an epoch older
        than the producer's, TRANSACTION_COORDINATOR_FENCED for an older coordinator epoch;
        nothing is appended then. Durability is the caller's (the flusher)."""
        self.producers.validate_marker(producer_id, producer_epoch, coordinator_epoch)
        data = records.build_end_txn_marker(producer_id, producer_epoch, coordinator_epoch, commit, now_ms)
        h = records.read_header(data)
        offset = self.log.append(data, [h], now_ms).first_offset
        self._apply_marker(h, commit, coordinator_epoch, self.log.append_aborted_txn)
        self.producers.on_high_watermark(self.log.high_watermark)
        self._wake()  # the LSO may have moved without the high watermark
        return offset

    def _apply_marker(
        self, h: BatchHeader, commit: bool, coordinator_epoch: int, index: Callable[[AbortedTxn], None]
    ) -> CompletedTxn | None:
        completed = self.producers.update_marker(h, commit, coordinator_epoch, h.max_timestamp)
        if completed is not None:
            if completed.aborted:
                lso = self.producers.last_stable_offset_after(completed)
                index(AbortedTxn(completed.producer_id, completed.first_offset, completed.last_offset, lso))
            self.producers.complete(completed)
        return completed

    # --- reading -----------------------------------------------------------------------------
    def aborted_transactions(self, fetch_offset: int, upper_bound: int) -> list[AbortedTxn]:
        """Aborted transactions overlapping [fetch_offset, upper_bound): what a read_committed
        fetch returning that range answers with (Kafka's collectAbortedTransactions)."""
        return self.log.collect_aborted_txns(fetch_offset, upper_bound)

    def ongoing_transactions(self) -> dict[int, int]:
        """Producer id -> first offset of each transaction not yet ended by a marker."""
        return {pid: first for first, pid in self.producers.ongoing.items()}

    def active_producers(self) -> list[ProducerEntry]:
        """What DescribeProducers lists (Kafka's UnifiedLog.activeProducers)."""
        return list(self.producers.producers.values())

    # --- producer state on disk --------------------------------------------------------------
    def load_producer_state(self, unclean: bool) -> None:
        """Rebuild producer state, ongoing transactions and the transaction indexes of what is
        replayed: from the newest snapshot the log still covers, replaying the log after it.

        After an unclean shutdown the segments Log.open recovered (the last one or two) may have
        lost batches or index entries: the snapshot must not be newer than their start, so that
        their transaction indexes are rebuilt from their batches.
        """
        lg = self.log
        self._snapshots = True
        lg.roll_listeners.append(self._on_roll)
        segs = lg.segments
        limit = lg.log_end_offset
        if unclean:
            limit = segs[-2].base_offset if len(segs) >= 2 else segs[-1].base_offset
        start = segs[0].base_offset
        chosen: int | None = None
        for offset in self._snapshot_offsets():
            if offset > lg.log_end_offset or offset < start:
                (lg.directory / _snapshot_name(offset)).unlink(missing_ok=True)  # stale or orphaned
            elif offset <= limit:
                chosen = offset
        table = ProducerStateTable()
        replay_from = start
        if chosen is not None:
            try:
                data = json.loads((lg.directory / _snapshot_name(chosen)).read_bytes())
                if data.get("version") != SNAPSHOT_VERSION or data.get("offset") != chosen:
                    raise ValueError(f"snapshot version {data.get('version')}")
                table = ProducerStateTable.restore(data)
                replay_from = chosen
            except (ValueError, KeyError, TypeError) as e:
                log.warning("ignoring unreadable producer snapshot", offset=chosen, error=str(e))
        self._replay(table, replay_from)

    def rebuild_producer_state(self) -> None:
        """Rebuild from the whole log, ignoring snapshots."""
        self._replay(ProducerStateTable(), self.log.segments[0].base_offset)

    def _replay(self, table: ProducerStateTable, offset: int) -> None:
        """Continue ``table`` (the state below ``offset``) with the log from ``offset``; the
        transaction indexes are rewritten from there."""
        lg = self.log
        self.producers = table
        for seg in lg.segments:
            seg.txn_index.truncate_to(offset)
        for h, batch in lg.batches(offset):
            if not h.is_control:
                self.producers.update(h, h.max_timestamp)
                continue
            marker = records.read_end_txn_marker(bytes(batch), h) if h.has_producer_id else None
            if marker is not None:
                self._apply_marker(h, marker[0], marker[1], lg.segment_of(h.base_offset).txn_index.append)
        self.producers.on_high_watermark(lg.high_watermark)

    def take_snapshot(self) -> None:
        """Snapshot producer state at the log end (a roll, a clean shutdown)."""
        if not self._snapshots:
            return
        if not all(seg.txn_index.write_pending() for seg in self.log.segments):
            # An aborted transaction the disk has not taken into its index yet: a snapshot past
            # it would have a restart after a crash skip rebuilding that index from the log, and
            # read-committed fetches then return the aborted records.
            log.warning(
                "producer snapshot skipped: a transaction index lacks entries the disk refused",
                partition=self.log.directory.name,
            )
            return
        offset = self.log.log_end_offset
        data = {"version": SNAPSHOT_VERSION, "offset": offset, **self.producers.snapshot()}
        try:
            atomic_write(self.log.directory / _snapshot_name(offset), json.dumps(data).encode())
        except OSError as e:  # a full disk: an older snapshot, or none, means a longer replay
            log.warning(
                "could not write a producer snapshot: the next start replays more of the log",
                partition=self.log.directory.name,
                error=str(e),
            )

    def drop_producer_snapshots(self) -> None:
        """Remove every producer snapshot, so that the next start replays the whole log and
        rebuilds producer state and every transaction index from it."""
        for offset in self._snapshot_offsets():
            (self.log.directory / _snapshot_name(offset)).unlink(missing_ok=True)

    def delete_snapshots_below(self, offset: int) -> None:
        """Snapshots of deleted segments (retention, DeleteRecords) are of no more use."""
        for o in self._snapshot_offsets():
            if o < offset:
                (self.log.directory / _snapshot_name(o)).unlink(missing_ok=True)

    def _snapshot_offsets(self) -> list[int]:
        return sorted(
            int(p.name.removesuffix(SNAPSHOT_SUFFIX))
            for p in self.log.directory.glob("*" + SNAPSHOT_SUFFIX)
            if p.name.removesuffix(SNAPSHOT_SUFFIX).isdigit()
        )

    def _on_roll(self, _base_offset: int) -> None:
        self.take_snapshot()

    # --- long polling --------------------------------------------------------------------
    def add_waiter(self, waiter: Callable[[], None]) -> None:
        """Call ``waiter`` once, the next time the high watermark or the last stable offset
        moves (or the topic goes)."""
        self._waiters.add(waiter)

    def remove_waiter(self, waiter: Callable[[], None]) -> None:
        self._waiters.discard(waiter)

    def _on_high_watermark(self, offset: int) -> None:
        self.producers.on_high_watermark(offset)
        self._wake()

    def _wake(self) -> None:
        if self._waiters:
            waiters, self._waiters = self._waiters, set()
            for waiter in waiters:
                waiter()


def _snapshot_name(offset: int) -> str:
    return f"{offset:020d}{SNAPSHOT_SUFFIX}"


@dataclass
class Topic:
    name: str
    topic_id: uuid.UUID
    configs: dict[str, str]
    internal: bool = False
    partitions: list[Partition] = field(default_factory=list)
    _append_rules: AppendRules | None = field(default=None, repr=False, compare=False)

    def append_rules(self, broker: BrokerConfig) -> AppendRules:
        """The settings Produce checks, read again only when the topic's configs were replaced."""
        rules = self._append_rules
        if rules is None or rules.configs is not self.configs:
            rules = self._append_rules = AppendRules(self.configs, broker)
        return rules


class PartitionManager:
    def __init__(self, config: BrokerConfig, flusher: Flusher, clock: Clock) -> None:
        self.config = config
        self.flusher = flusher
        self.clock = clock
        self.data_dir = config.data_dir
        self.topics: dict[str, Topic] = {}
        self.by_id: dict[uuid.UUID, Topic] = {}
        self.version = 0  # changes whenever a topic is created or deleted or gains partitions
        self.unclean_start = False
        self.closed_cleanly = False
        # Compacts the partitions of topics with cleanup.policy compact; the broker runs it.
        self.cleaner = LogCleaner(
            clock,
            config.log_cleaner_delete_retention_ms,
            config.log_cleaner_backoff_ms,
            config.log_cleaner_min_cleanable_ratio,
        )

    # --- start and stop ------------------------------------------------------------------
    def open(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        marker = self.data_dir / CLEAN_SHUTDOWN_MARKER
        existing = self._read_topics_file()
        self.unclean_start = bool(existing) and not marker.exists()
        # Whether the last run closed every log, coordinator logs included (those exist without
        # any data topic, so ``unclean_start`` alone would call a crash of such a broker clean).
        self.closed_cleanly = marker.exists()
        marker.unlink(missing_ok=True)
        for name, meta in existing.items():
            topic = Topic(name, uuid.UUID(meta["id"]), dict(meta.get("configs", {})))
            self._register(topic)
            for p in range(meta["partitions"]):
                self._open_partition(topic, p)
        self._remove_orphans()
        if self.unclean_start:
            log.warning("previous shutdown was not clean; recovered log tails", topics=len(self.topics))

    def close(self) -> None:
        for topic in self.topics.values():
            if topic.internal:
                continue  # their owners close them
            for p in topic.partitions:
                p.take_snapshot()
                try:
                    p.log.close()
                except OSError as e:
                    # A transaction index the disk could not take whole: without a snapshot to
                    # start from, the next start rebuilds every one of them from the log.
                    p.drop_producer_snapshots()
                    log.warning(
                        "could not write a transaction index: the next start rebuilds the "
                        "partition's producer state from its whole log",
                        partition=p.log.directory.name,
                        error=str(e),
                    )
        try:
            (self.data_dir / CLEAN_SHUTDOWN_MARKER).touch()
        except OSError as e:  # a full disk: the next start checks the logs' tails, nothing more
            log.warning("could not mark the shutdown clean", error=str(e))

    def _remove_orphans(self) -> None:
        """Partition directories not in topics.json: a crash in the middle of a delete."""
        for d in self.data_dir.iterdir():
            if not d.is_dir():
                continue
            if d.name.endswith("-delete"):
                _rmtree(d)
                continue
            topic, _, p = d.name.rpartition("-")
            if p.isdigit() and topic and not topic.startswith("__"):
                t = self.topics.get(topic)
                if t is None or int(p) >= len(t.partitions):
                    log.warning("removing partition directory of a deleted topic", dir=str(d))
                    _rmtree(d)

    # --- topics.json ---------------------------------------------------------------------
    def _topics_file(self) -> Path:
        return self.data_dir / "topics.json"

    def _read_topics_file(self) -> dict[str, dict[str, Any]]:
        try:
            data = json.loads(self._topics_file().read_text())
        except FileNotFoundError:
            return {}
        topics: dict[str, dict[str, Any]] = data["topics"]
        return topics

    def _write_topics_file(self) -> None:
        data = {
            "version": 1,
            "topics": {
                t.name: {"id": str(t.topic_id), "partitions": len(t.partitions), "configs": t.configs}
                for t in self.topics.values()
                if not t.internal
            },
        }
        atomic_write(self._topics_file(), json.dumps(data, indent=1, sort_keys=True).encode())

    # --- lookups -------------------------------------------------------------------------
    def _register(self, topic: Topic) -> None:
        self.topics[topic.name] = topic
        self.by_id[topic.topic_id] = topic
        self.version += 1

    # --- topics as groups see them (kcoord.groups.topics.TopicsView) ---------------------
    def lookup(self, name: str) -> tuple[uuid.UUID, int] | None:
        topic = self.topics.get(name)
        if topic is None or topic.internal:
            return None
        return topic.topic_id, len(topic.partitions)

    def names(self) -> list[str]:
        return [name for name, topic in self.topics.items() if not topic.internal]

    def name_of(self, topic_id: uuid.UUID) -> str | None:
        topic = self.by_id.get(topic_id)
        return topic.name if topic is not None and not topic.internal else None

    def get(self, name: str) -> Topic | None:
        return self.topics.get(name)

    def get_by_id(self, topic_id: uuid.UUID) -> Topic | None:
        return self.by_id.get(topic_id)

    def partition(self, topic: str, index: int) -> Partition | None:
        t = self.topics.get(topic)
        if t is None or not 0 <= index < len(t.partitions):
            return None
        return t.partitions[index]

    def partition_by_id(self, topic_id: uuid.UUID, index: int) -> Partition | None:
        t = self.by_id.get(topic_id)
        if t is None or not 0 <= index < len(t.partitions):
            return None
        return t.partitions[index]

    def all_partitions(self) -> Iterator[Partition]:
        for t in self.topics.values():
            yield from t.partitions

    # --- changes ---------------------------------------------------------------------------
    def log_config(self, configs: dict[str, str]) -> LogConfig:
        c = self.config
        return LogConfig(
            segment_bytes=int(effective("segment.bytes", configs, c)),
            roll_ms=compaction.roll_ms(configs, c),
            retention_ms=int(effective("retention.ms", configs, c)),
            retention_bytes=int(effective("retention.bytes", configs, c)),
            index_interval_bytes=int(effective("index.interval.bytes", configs, c)),
            flush_messages=int(effective("flush.messages", configs, c)),
            flush_ms=int(effective("flush.ms", configs, c)),
            roll_jitter_ms=int(effective("segment.jitter.ms", configs, c)),
            preallocate=effective("preallocate", configs, c).lower() == "true",
            cache_retain_bytes=c.log_cache_retain_bytes,
        )

    def _open_partition(self, topic: Topic, index: int, fresh: bool = False) -> Partition:
        """Open (or create) a partition's log; ``fresh``: one that did not exist, whose directory,
        if there is one, is a deleted topic's that could not be removed (or whose removal a crash
        cut short): it goes, as start-up would remove it, rather than becoming the new
        partition's log."""
        directory = self.data_dir / f"{topic.name}-{index}"
        if fresh and directory.exists():
            if topic.name.startswith("__"):
                # Start-up never removes these either: the coordinators' logs are named so.
                raise FileExistsError(errno.EEXIST, f"{directory} exists and is not a deleted topic's")
            log.warning("removing a deleted topic's partition directory", dir=str(directory))
            doomed = directory.with_name(f"{directory.name}.{uuid.uuid4().hex}-delete")
            os.rename(directory, doomed)
            _rmtree(doomed)
        new = not directory.exists()
        lg = Log.open(directory, self.log_config(topic.configs), self.flusher, unclean=self.unclean_start)
        if new:
            try:
                atomic_write(
                    directory / "partition.metadata",
                    f"version: 0\ntopic_id: {uuid_to_base64(topic.topic_id)}\n".encode(),
                )
            except OSError:
                lg.close()  # the caller drops the topic; its directory is left to the next start
                raise
        part = Partition(topic, index, lg)
        part.load_producer_state(unclean=self.unclean_start and not new)
        topic.partitions.append(part)
        self._register_for_cleaning(topic, part)
        return part

    def _register_for_cleaning(self, topic: Topic, part: Partition) -> None:
        if compaction.is_compacted(topic.configs, self.config):
            self.cleaner.register(part.log, lambda: compaction.rules_for(topic.configs, self.config))
        else:
            self.cleaner.unregister(part.log)

    def create_topic(
        self, name: str, num_partitions: int, configs: dict[str, str | None], validate_only: bool = False
    ) -> Topic:
        validate_topic_name(name)
        if name in self.topics:
            raise KafkaError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
        if num_partitions <= 0:
            raise KafkaError(ErrorCode.INVALID_PARTITIONS, "number of partitions must be larger than 0")
        clean = self.validate_configs(configs)
        topic = Topic(name, new_topic_id(), clean)
        if validate_only:
            return topic
        self._register(topic)
        recording = False  # a DirectoryNotSynced of topics.json, not of a partition's own files
        try:
            for p in range(num_partitions):
                self._open_partition(topic, p, fresh=True)
            recording = True
            self._write_topics_file()
        except OSError as e:  # a full or failing disk: the topic's result says so
            if recording and isinstance(e, DirectoryNotSynced):  # topics.json lists the topic: it stays
                message = f"the topic is created, but may not survive a crash: {e}"
                raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, message) from e
            self._drop(topic)
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, f"the topic could not be created: {e}") from e
        except Exception:
            self._drop(topic)
            raise
        log.info(
            "created topic", topic=name, partitions=num_partitions, topic_id=uuid_to_base64(topic.topic_id)
        )
        return topic

    def validate_configs(self, configs: dict[str, str | None]) -> dict[str, str]:
        from kcoord.dataplane.topic_config import InvalidTopicConfig

        try:
            return validate_topic_configs(configs, self.config)
        except InvalidTopicConfig as e:
            raise KafkaError(ErrorCode.INVALID_CONFIG, str(e)) from e

    def create_partitions(self, name: str, count: int, validate_only: bool = False) -> None:
        topic = self.topics.get(name)
        if topic is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {name!r} does not exist")
        if topic.internal:
            raise KafkaError(ErrorCode.INVALID_REQUEST, f"cannot add partitions to internal topic {name}")
        current = len(topic.partitions)
        if count < current:
            raise KafkaError(
                ErrorCode.INVALID_PARTITIONS, f"topic has {current} partitions; cannot reduce to {count}"
            )
        if count == current:
            raise KafkaError(ErrorCode.INVALID_PARTITIONS, f"topic already has {current} partitions")
        if validate_only:
            return
        recording = False  # as in create_topic
        try:
            for p in range(current, count):
                self._open_partition(topic, p, fresh=True)
            self.version += 1
            recording = True
            self._write_topics_file()
        except OSError as e:
            if recording and isinstance(e, DirectoryNotSynced):  # topics.json lists them: they stay
                message = f"the partitions are created, but may not survive a crash: {e}"
                raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, message) from e
            # None of them is kept: topics.json still says ``current``.
            added = topic.partitions[current:]
            del topic.partitions[current:]
            self._delete_partition_logs(added)
            self.version += 1
            raise KafkaError(
                ErrorCode.KAFKA_STORAGE_ERROR, f"the partitions could not be created: {e}"
            ) from e

    def delete_topic(self, topic: Topic) -> None:
        """The topic leaves topics.json first, then its logs leave the disk: a crash in between
        leaves directories that the next start removes as a deleted topic's (``_remove_orphans``),
        where the other order brought the topic back, empty, from topics.json. Kafka likewise
        records a deletion in its metadata log before it removes the logs. Raises OSError, with
        nothing deleted, when topics.json cannot be written; DirectoryNotSynced when it was but may
        not survive a crash: the topic is gone, and its files stay until a start finds them a
        deleted topic's (or, the old topics.json back, the topic whole)."""
        self._forget(topic)
        try:
            self._write_topics_file()
        except DirectoryNotSynced:
            self._delete_logs(topic, remove_files=False)
            raise
        except OSError:
            self._register(topic)
            raise
        self._delete_logs(topic)
        log.info("deleted topic", topic=topic.name)

    def _drop(self, topic: Topic) -> None:
        self._forget(topic)
        self._delete_logs(topic)

    def _forget(self, topic: Topic) -> None:
        self.topics.pop(topic.name, None)
        self.by_id.pop(topic.topic_id, None)
        self.version += 1

    def _delete_logs(self, topic: Topic, remove_files: bool = True) -> None:
        self._delete_partition_logs(topic.partitions, remove_files)
        topic.partitions.clear()

    def _delete_partition_logs(self, partitions: list[Partition], remove_files: bool = True) -> None:
        for p in partitions:
            p._on_high_watermark(-1)  # wake long polls so they see the topic is gone
            self.cleaner.unregister(p.log)
            try:
                if remove_files:
                    p.log.delete()
                else:
                    p.log.close()
            except OSError as e:  # the topic is gone all the same: the next start removes the rest
                log.warning(
                    "could not remove a deleted partition's files", dir=str(p.log.directory), error=str(e)
                )

    def add_internal_topic(self, name: str, logs: list[Log], configs: dict[str, str]) -> Topic:
        """Serve ``logs``, which a coordinator owns, read-only as the partitions of topic ``name``.

        The topic id is kept in ``<log.dirs>/<name>.id``, so that it survives restarts as a
        topic id must.
        """
        id_file = self.config.data_dir / f"{name}.id"
        if id_file.exists():
            topic_id = uuid.UUID(id_file.read_text().strip())
        else:
            topic_id = new_topic_id()
            atomic_write(id_file, f"{topic_id}\n".encode())
        topic = Topic(name, topic_id, configs, internal=True)
        self._register(topic)
        for log_ in logs:
            topic.partitions.append(Partition(topic, len(topic.partitions), log_))
        return topic

    def alter_topic_configs(self, topic: Topic, configs: dict[str, str]) -> None:
        topic.configs = configs
        for p in topic.partitions:
            p.log.config = self.log_config(configs)
            self._register_for_cleaning(topic, p)
        self._write_topics_file()

    def delete_records(self, part: Partition, offset: int) -> int:
        """DeleteRecords on one partition, as Kafka's Partition.deleteRecordsOnLeader: ``offset``
        (-1: the high watermark) becomes the log start offset, durably, when it is above it;
        returns the partition's low watermark (its log start offset, with one replica)."""
        tp = f"{part.topic.name}-{part.index}"
        if "delete" not in effective("cleanup.policy", part.topic.configs, self.config).split(","):
            raise KafkaError(
                ErrorCode.POLICY_VIOLATION,
                f"Records of partition {tp} can not be deleted due to the configured policy",
            )
        target = part.high_watermark if offset == -1 else offset
        if target < 0:
            raise KafkaError(
                ErrorCode.OFFSET_OUT_OF_RANGE, f"The offset {target} for partition {tp} is not valid"
            )
        try:
            if part.log.advance_start_offset(target):
                log.info("deleted records", partition=tp, log_start_offset=target)
        except OffsetOutOfRange as e:
            raise KafkaError(ErrorCode.OFFSET_OUT_OF_RANGE, f"partition {tp}: {e}") from None
        return part.log_start_offset

    def enforce_retention(self) -> int:
        now = self.clock.now_ms()
        deleted = 0
        for p in self.all_partitions():
            if p.topic.internal:
                continue
            before = p.log.segments[0].base_offset
            deleted += p.log.delete_segments_below_start()
            # As in Kafka, time and size retention delete only under cleanup.policy=delete: a
            # compact-only topic keeps its records until the cleaner replaces them.
            policies = compaction.policies(p.topic.configs, self.config)
            if "delete" in policies:
                deleted += p.log.enforce_retention(now)
            if "compact" in policies:
                self._roll_idle(p, now)
            if p.log.segments[0].base_offset != before:
                p.delete_snapshots_below(p.log.segments[0].base_offset)
            p.producers.expire(now, self.config.producer_id_expiration_ms)
        return deleted

    @staticmethod
    def _roll_idle(p: Partition, now: int) -> None:
        """Roll a compacted partition's active segment once it is older than its roll time even
        if nothing is written (Kafka rolls only on append): the cleaner never touches the active
        segment, so an idle topic would otherwise never be compacted."""
        active = p.log.active
        first = active.first_batch_timestamp
        if active.size and first is not None and first >= 0 and now - first > p.log.roll_after_ms:
            p.log.roll()


def _rmtree(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)
