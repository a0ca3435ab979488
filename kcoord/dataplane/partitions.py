"""Topics and partitions of the data plane: the partition manager.

Topic metadata (name, id, partition count, configs) is kept in ``<log.dirs>/topics.json``,
written atomically; each partition's log lives in ``<log.dirs>/<topic>-<n>/`` next to a
``partition.metadata`` file holding the topic id, as Kafka lays it out. This broker leads
every partition at leader epoch 0.

A partition itself (its log, producer state and snapshots) is dataplane/partition.py's.
"""

from __future__ import annotations

import base64
import errno
import json
import os
import re
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

import structlog

from kcoord.clock import Clock
from kcoord.config import BrokerConfig
from kcoord.dataplane import compaction
from kcoord.dataplane.partition import Partition, Topic
from kcoord.dataplane.topic_config import effective, validate_topic_configs
from kcoord.protocol.errors import ErrorCode, KafkaError
from kcoord.storage.atomic import DirectoryNotSynced, atomic_write
from kcoord.storage.flush import Flusher
from kcoord.storage.log import Log, LogConfig, OffsetOutOfRange
from kcoord.storage.log_cleaner import LogCleaner

log = structlog.get_logger(__name__)

MAX_TOPIC_NAME: Final = 249
_LEGAL_TOPIC = re.compile(r"^[a-zA-Z0-9._-]+$")
CLEAN_SHUTDOWN_MARKER: Final = ".kcoord_cleanshutdown"


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
