"""The group coordinator's asyncio side: coordinator partitions, group actors, replay, cleanup.

Groups map to ``abs(javaHashCode(group_id)) % offsets.topic.num.partitions`` coordinator
partitions, each an append-only log in ``<log.dirs>/__consumer_offsets-<n>`` served read-only as
the internal topic ``__consumer_offsets``. Each group has an actor: a mailbox drained in
arrival order, one message at a time, by the event loop. A message runs the group's
synchronous state machine, whose records are applied (``GroupStore.apply``, as in replay) and
appended; its responses are released once everything the group appended up to then is
durable. All records written in one event-loop turn on a coordinator partition go into one
record batch, and all coordinator partitions share the flusher's group commit.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import struct
import time
import uuid
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

import structlog

from kcoord.classic import offsets as offset_rules
from kcoord.classic.group import ClassicGroup, GroupConfig, Outcome, Record
from kcoord.classic.records import decode_key, decode_record, encode_key, encode_value
from kcoord.classic.store import GroupStore
from kcoord.clock import Clock
from kcoord.config import BrokerConfig
from kcoord.dataplane.partitions import PartitionManager, Topic
from kcoord.protocol import records as batches
from kcoord.protocol.errors import ErrorCode, KafkaError
from kcoord.share.config import share_partition_config
from kcoord.share.group import ShareGroup
from kcoord.share.records import ShareCheckpointKey, ShareDeltaKey, ShareDeltaValue
from kcoord.storage.cleaner import LogCleaner
from kcoord.storage.flush import Flusher
from kcoord.storage.log import Log, LogConfig

log = structlog.get_logger(__name__)

OFFSETS_TOPIC = "__consumer_offsets"
_OFFSET_KEY_KINDS = (b"\x00\x00", b"\x00\x01")  # record type prefixes of offset commit keys
_GROUP_KEY_KIND = b"\x00\x02"
_SHARE_KEY_KINDS = (b"\x00\x64", b"\x00\x65")
_LOAD_PROGRESS_EVERY = 200_000


def java_string_hash(s: str) -> int:
    """Java's String.hashCode over UTF-16 code units, as a signed 32-bit int."""
    data = s.encode("utf-16-be")
    h = 0
    # Explicitly big-endian units: a native-order cast would swap the bytes of every unit on
    # little-endian machines and put groups in other partitions than Kafka's partitionFor.
    for unit in struct.unpack(f">{len(data) // 2}H", data):
        h = (31 * h + unit) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


# Every request for a group asks (a commit up to three times), and the hash is a Python loop over
# the id's characters: remember the answers for the groups in use.
@functools.lru_cache(maxsize=1 << 16)
def partition_for(group_id: str, partitions: int) -> int:
    h = java_string_hash(group_id)
    return (0 if h == -(1 << 31) else abs(h)) % partitions  # Kafka's Utils.abs


class Durable:
    """Records appended together; callbacks run once they are durable or their write failed.

    One per coordinator-partition batch, shared by every actor that wrote into it: a plain
    callback list instead of a future per write, so releasing the answers of a flush round
    costs no event-loop passes.
    """

    __slots__ = ("callbacks", "done", "error")

    def __init__(self) -> None:
        self.callbacks: list[Callable[[BaseException | None], None]] = []
        self.done = False
        self.error: BaseException | None = None

    def add(self, callback: Callable[[BaseException | None], None]) -> None:
        if self.done:
            callback(self.error)
        else:
            self.callbacks.append(callback)

    def settle(self, error: BaseException | None) -> None:
        if self.done:
            return
        self.done = True
        self.error = error
        callbacks, self.callbacks = self.callbacks, []
        for callback in callbacks:
            try:
                callback(error)
            except Exception:
                log.exception("releasing coordinator answers failed")


class CoordinatorShard:
    """One coordinator partition: its log and the groups stored in it."""

    def __init__(self, index: int, log_: Log, store: GroupStore, flusher: Flusher, clock: Clock) -> None:
        self.index = index
        self.log = log_
        self.store = store
        self.flusher = flusher
        self.clock = clock
        self._pending: list[Record] = []
        self._batch: Durable | None = None
        # Log offset of the last state record of each share-partition: a SHARE_DELTA points
        # back to it (BackOffset), as the KIP-932 seed lays out the chain.
        self.share_last_offset: dict[tuple[str, Any, int], int] = {}

    def write(self, records: list[Record]) -> Durable:
        """Queue records for the partition's next batch; the Durable settles once they are durable.

        With log.flush.policy=always the batch is appended when the next flush round starts, so it
        holds everything written while the previous round synced; otherwise at the end of this
        event-loop pass.
        """
        self._pending.extend(records)
        batch = self._batch
        if batch is None:
            batch = self._batch = Durable()
            if self.flusher.waits_for_disk:
                self.flusher.before_next_round(self._write_pending)
            else:
                asyncio.get_running_loop().call_soon(self._write_pending)
        return batch

    def _write_pending(self) -> None:
        recs, self._pending = self._pending, []
        batch, self._batch = self._batch, None
        if batch is None:
            return
        try:
            now = self.clock.now_ms()
            recs = self._link_share_records(recs, self.log.log_end_offset)
            data = batches.build_batch([(encode_key(k), encode_value(v)) for k, v in recs], now)
            headers = [batches.read_header(data)]
            self.log.append(data, headers, now)
            if self.flusher.waits_for_disk:
                self.flusher.when_durable(self.log, batch.settle)
                return
            self.flusher.mark_dirty(self.log)
        except Exception as e:
            batch.settle(e)
            return
        batch.settle(None)

    def _link_share_records(self, recs: list[Record], base_offset: int) -> list[Record]:
        """Fill in BackOffset of SHARE_DELTA records: their offsets are known only now."""
        if _SHARE_STATE_KEYS.isdisjoint({type(key) for key, _ in recs}):
            return recs  # offset commits: nothing to link
        out = recs
        for i, (key, value) in enumerate(recs):
            if type(key) not in _SHARE_STATE_KEYS or value is None:
                continue
            pkey = (key.group_id, key.topic_id, key.partition)
            if isinstance(value, ShareDeltaValue):
                if out is recs:
                    out = list(recs)
                out[i] = (key, dataclasses.replace(value, back_offset=self.share_last_offset.get(pkey, -1)))
            self.share_last_offset[pkey] = base_offset + i
        return out


_SHARE_STATE_KEYS = frozenset((ShareCheckpointKey, ShareDeltaKey))

Op = Callable[[ClassicGroup | None, int], Outcome]
ShareOp = Callable[[ShareGroup | None, int], Outcome]


class GroupActor:
    """The mailbox of one group; messages run one at a time, in arrival order."""

    def __init__(self, coordinator: GroupCoordinator, group_id: str, shard: CoordinatorShard) -> None:
        self.coordinator = coordinator
        self.group_id = group_id
        self.shard = shard
        self.mailbox: deque[tuple[Any, bool, bool]] = deque()
        self._scheduled = False
        self._last_write: Durable | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at: int | None = None

    def tell(self, op: Op, create: bool = False) -> None:
        """Queue ``op``; it gets the classic group (created first when ``create``) or None."""
        self._enqueue(op, create, False)

    def tell_share(self, op: ShareOp, create: bool = False) -> None:
        """Queue ``op``; it gets the share group (created first when ``create``) or None."""
        self._enqueue(op, create, True)

    def _enqueue(self, op: Any, create: bool, share: bool) -> None:
        self.mailbox.append((op, create, share))
        if not self._scheduled:
            self._scheduled = True
            self.coordinator.schedule(self)

    def _drain(self) -> None:
        self._scheduled = False
        store = self.shard.store
        while self.mailbox:
            op, create, share = self.mailbox.popleft()
            now = self.coordinator.clock.now_ms()
            group: ClassicGroup | ShareGroup | None
            if share:
                group = store.get_share(self.group_id)
                if group is None and create and store.get(self.group_id) is None:
                    group = store.get_or_create_share(self.group_id)
            else:
                group = store.get(self.group_id)
                if group is None and create and store.get_share(self.group_id) is None:
                    group = store.get_or_create(self.group_id, now)
            try:
                outcome = op(group, now)
            except Exception as e:
                log.exception("group operation failed", group=self.group_id)
                outcome = Outcome()
                self.coordinator.fail(e)
            self._commit(outcome, now)
        self._arm_timer()
        if (
            self.shard.store.group_type(self.group_id) is None
            and self._timer is None
            and (self._last_write is None or self._last_write.done)
        ):
            self.coordinator.actors.pop(self.group_id, None)

    def _commit(self, outcome: Outcome, now: int) -> None:
        if outcome.records:
            for key, value in outcome.records:
                self.shard.store.apply(key, value, now)
            self._last_write = self.shard.write(outcome.records)
        if not outcome.responses:
            return
        pending = self._last_write
        if pending is None or (pending.done and pending.error is None):
            for responder, value in outcome.responses:
                responder(value)
            return
        responses = outcome.responses

        def release(exc: BaseException | None) -> None:
            for responder, value in responses:
                responder(KafkaError(ErrorCode.NOT_COORDINATOR, str(exc)) if exc else value)
            if exc is not None:
                self.coordinator.fail(exc)

        pending.add(release)

    def _arm_timer(self) -> None:
        store = self.shard.store
        group = store.get(self.group_id) or store.get_share(self.group_id)
        deadline = group.next_deadline() if group is not None else None
        if deadline == self._timer_at:
            return
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._timer_at = deadline
        if deadline is not None:
            delay = max(0.0, (deadline - self.coordinator.clock.now_ms()) / 1000)
            self._timer = asyncio.get_running_loop().call_later(delay, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        self._timer_at = None
        if self.shard.store.get_share(self.group_id) is not None:
            lookup = self.coordinator.topic_lookup
            self.tell_share(
                lambda g, now: self.coordinator.share_timer(g, now, lookup) if g is not None else Outcome()
            )
        else:
            self.tell(lambda g, now: g.on_timer(now) if g is not None else Outcome())


class GroupCoordinator:
    def __init__(
        self, config: BrokerConfig, flusher: Flusher, clock: Clock, partitions: PartitionManager
    ) -> None:
        self.config = config
        self.flusher = flusher
        self.clock = clock
        self.partition_manager = partitions
        self.num_partitions = config.offsets_topic_num_partitions
        self.group_config = GroupConfig(
            min_session_timeout_ms=config.group_min_session_timeout_ms,
            max_session_timeout_ms=config.group_max_session_timeout_ms,
            initial_rebalance_delay_ms=config.group_initial_rebalance_delay_ms,
            max_size=config.group_max_size,
        )
        self.retention_ms = config.offsets_retention_minutes * 60_000
        self.shards: list[CoordinatorShard] = []
        self.actors: dict[str, GroupActor] = {}
        self._ready: deque[GroupActor] = deque()  # actors with messages, in the order they got them
        self._run_scheduled = False
        # Run after each pass over the ready actors, on the same pass (the server writes the
        # answers they completed at once instead of a loop pass later).
        self.after_run: list[Callable[[], None]] = []
        self._tasks: list[asyncio.Task[Any]] = []
        self.cleaner = LogCleaner(
            clock,
            config.log_cleaner_delete_retention_ms,
            config.log_cleaner_backoff_ms,
            config.log_cleaner_min_cleanable_ratio,
        )
        self.failed: BaseException | None = None
        self.share_waiters: Callable[[str], None] | None = None  # wakes ShareFetch long polls
        self.share_load_times: list[float] = []  # partition-load-time of partitions with share state
        self.on_failure: Callable[[BaseException], None] | None = None

    # --- lookup ------------------------------------------------------------------------------
    def shard_for(self, group_id: str) -> CoordinatorShard:
        return self.shards[partition_for(group_id, self.num_partitions)]

    def schedule(self, actor: GroupActor) -> None:
        """Drain ``actor`` in the next pass of the event loop (one callback for all actors)."""
        self._ready.append(actor)
        if not self._run_scheduled:
            self._run_scheduled = True
            asyncio.get_running_loop().call_soon(self._run_ready)

    def _run_ready(self) -> None:
        self._run_scheduled = False
        ready = self._ready
        # Actors scheduled while these run wait for the next pass, as with a call_soon each.
        for _ in range(len(ready)):
            try:
                ready.popleft()._drain()
            except Exception:  # one actor's bug must not stall the actors queued behind it
                log.exception("group actor failed")
        for hook in self.after_run:
            try:
                hook()
            except Exception:
                log.exception("after-run hook failed")

    def actor(self, group_id: str) -> GroupActor:
        actor = self.actors.get(group_id)
        if actor is None:
            actor = GroupActor(self, group_id, self.shard_for(group_id))
            self.actors[group_id] = actor
        return actor

    def all_groups(self) -> list[ClassicGroup]:
        return [g for s in self.shards for g in s.store.groups.values()]

    def all_share_groups(self) -> list[ShareGroup]:
        return [g for s in self.shards for g in s.store.share_groups.values()]

    def store_for(self, group_id: str) -> GroupStore:
        return self.shard_for(group_id).store

    def topic_lookup(self, name: str) -> tuple[uuid.UUID, int] | None:
        """Topic name -> (id, partition count) for share group assignment (existing topics only)."""
        topic = self.partition_manager.get(name)
        if topic is None or topic.internal:
            return None
        return topic.topic_id, len(topic.partitions)

    def share_timer(self, group: ShareGroup, now: int, lookup: Any) -> Outcome:
        out = group.on_timer(now, lookup)
        if self.share_waiters is not None:
            self.share_waiters(group.group_id)
        return out

    def fail(self, exc: BaseException) -> None:
        """A coordinator write failed: memory is ahead of the log, so stop serving (fail-stop)."""
        if self.failed is None:
            self.failed = exc
            log.critical("coordinator write failed; shutting down", error=repr(exc))
            if self.on_failure is not None:
                self.on_failure(exc)

    # --- start and stop -----------------------------------------------------------------------
    def open(self, unclean: bool) -> None:
        data_dir: Path = self.config.data_dir
        log_config = LogConfig(
            segment_bytes=self.config.offsets_topic_segment_bytes,
            roll_ms=7 * 24 * 3_600_000,
            retention_ms=-1,
            retention_bytes=-1,
            index_interval_bytes=self.config.log_index_interval_bytes,
        )
        self.num_partitions = self._existing_partition_count(data_dir) or self.num_partitions
        topic = self._offsets_topic(data_dir)
        started = time.monotonic()
        total = 0
        now = self.clock.now_ms()
        for i in range(self.num_partitions):
            lg = Log.open(data_dir / f"{OFFSETS_TOPIC}-{i}", log_config, self.flusher, unclean=unclean)
            store = GroupStore(
                self.group_config, lambda configs: share_partition_config(configs, self.config)
            )
            shard = CoordinatorShard(i, lg, store, self.flusher, self.clock)
            loading = time.monotonic()
            n = self._replay(lg, store, now, total, shard.share_last_offset)
            if store.share_groups:
                self.share_load_times.append(time.monotonic() - loading)
            total += n
            self.shards.append(shard)
            self.cleaner.register(lg)
            self.partition_manager.add_internal_partition(topic, lg)
        groups = sum(len(s.store.groups) for s in self.shards)
        log.info(
            "loaded coordinator partitions",
            partitions=self.num_partitions,
            records=total,
            groups=groups,
            seconds=round(time.monotonic() - started, 3),
        )

    def _existing_partition_count(self, data_dir: Path) -> int | None:
        """The partition count of an ``__consumer_offsets`` already on disk, if any.

        As in Kafka, offsets.topic.num.partitions applies when the topic is created: groups map to
        partitions by that count, so reading an existing topic with another count would look for
        every group in the wrong partition.
        """
        found = [
            int(suffix)
            for d in data_dir.glob(f"{OFFSETS_TOPIC}-*")
            if d.is_dir() and (suffix := d.name[len(OFFSETS_TOPIC) + 1 :]).isdigit()
        ]
        if not found:
            return None
        count = max(found) + 1
        if count != self.config.offsets_topic_num_partitions:
            log.info(
                "__consumer_offsets exists; keeping its partition count",
                partitions=count,
                offsets_topic_num_partitions=self.config.offsets_topic_num_partitions,
            )
        return count

    def _offsets_topic(self, data_dir: Path) -> Topic:
        id_file = data_dir / f"{OFFSETS_TOPIC}.id"
        if id_file.exists():
            topic_id = uuid.UUID(id_file.read_text().strip())
        else:
            from kcoord.dataplane.partitions import new_topic_id
            from kcoord.storage.atomic import atomic_write

            topic_id = new_topic_id()
            atomic_write(id_file, f"{topic_id}\n".encode())
        return self.partition_manager.add_internal_topic(
            OFFSETS_TOPIC, topic_id, {"cleanup.policy": "compact"}
        )

    @staticmethod
    def _replay(
        lg: Log,
        store: GroupStore,
        now: int,
        loaded_before: int,
        share_last_offset: dict[Any, int] | None = None,
    ) -> int:
        """Apply a coordinator log to ``store`` through GroupStore.replay; returns its record count.

        Offset commits dominate these logs and most are overwritten by a later commit of the same
        partition, so only the last record of each offset key is decoded and applied, with the
        same end state as applying them all: a group's offset records are held back as bytes
        (later ones replacing earlier ones) and applied at the end of the log; the value that
        brings a group (back) into existence is applied where it is, so groups are created where
        the log creates them; a group tombstone drops what is held for the group, since it removes
        the group with all its offsets anyway; an offset tombstone for a group that has had no
        offset value since it (last) came into existence removes nothing and is skipped.
        """
        count = 0
        held: dict[bytes, dict[bytes, bytes | None]] = {}  # group key bytes -> key rest -> value
        live: set[bytes] = set()  # groups with offset values since their last tombstone

        def records() -> Any:
            nonlocal count
            offset_kinds = _OFFSET_KEY_KINDS
            for h, data in lg.batches():
                if h.is_control:
                    continue
                if (loaded_before + count) // _LOAD_PROGRESS_EVERY != (
                    loaded_before + count + h.records_count
                ) // _LOAD_PROGRESS_EVERY:
                    log.info(
                        "replaying coordinator log",
                        partition=str(lg.directory.name),
                        records=loaded_before + count + h.records_count,
                    )
                for off, key, value in batches.iter_key_values(data, h):
                    if key is None:
                        continue
                    count += 1
                    kind = key[:2]
                    if kind in offset_kinds and len(key) >= 4 and key[2] < 0x80:
                        g = key[2 : 4 + ((key[2] << 8) | key[3])]  # the group id with its length
                        if g in live:
                            group_held = held.get(g)
                            if group_held is None:
                                group_held = held[g] = {}
                            group_held[key[2:]] = value
                        elif value is not None:
                            live.add(g)
                            yield decode_record(key, value)
                        continue
                    if kind == _GROUP_KEY_KIND and value is None:
                        g = key[2:]
                        held.pop(g, None)
                        live.discard(g)
                    elif share_last_offset is not None and kind in _SHARE_KEY_KINDS:
                        k = decode_key(key)
                        share_last_offset[(k.group_id, k.topic_id, k.partition)] = off
                    yield decode_record(key, value)
            for group_held in held.values():
                for rest, value in group_held.items():
                    yield decode_record(b"\x00\x01" + rest, value)

        store.replay(records(), now)
        return count

    def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._tasks.append(loop.create_task(self._expiration_loop(), name="kcoord-offsets-expiration"))
        self._tasks.append(loop.create_task(self.cleaner.run(), name="kcoord-log-cleaner"))
        # Loaded members are on fresh session timers: arm their actors.
        for shard in self.shards:
            for group_id, group in shard.store.groups.items():
                if group.next_deadline() is not None:
                    self.actor(group_id)._arm_timer()

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        for actor in self.actors.values():
            if actor._timer is not None:
                actor._timer.cancel()

    def close(self) -> None:
        for shard in self.shards:
            shard.log.close()

    # --- KIP-211 expiration ------------------------------------------------------------------------
    async def _expiration_loop(self) -> None:
        interval = self.config.offsets_retention_check_interval_ms / 1000
        while True:
            await asyncio.sleep(interval)
            self.expire_all()

    def expire_all(self) -> None:
        """Ask every group for its expired offsets (and its own tombstone once it is gone)."""
        retention = self.retention_ms
        for shard in self.shards:
            for group_id in list(shard.store.groups):
                self.actor(group_id).tell(
                    lambda g, now: offset_rules.expire(g, now, retention) if g is not None else Outcome()
                )
