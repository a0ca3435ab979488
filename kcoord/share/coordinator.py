"""Share group delivery: what ShareFetch and ShareAcknowledge do inside a group's actor.

Acknowledgements are applied first (so a fetch can re-acquire what the same request released),
then each requested share-partition is initialized if needed (its start offset from
share.auto.offset.reset: earliest, latest, or by_duration), moved past records retention
deleted, and asked to acquire records from the log batches read at its next fetch offset,
up to the high watermark (read_uncommitted) or the last stable offset (read_committed).

The ShareCoordinator also owns the share sessions, wakes parked ShareFetch long polls when a
group's records become available again (releases, lock timeouts, new data), and releases a
member's records when its connection closes, as Kafka's share session cache does.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

from kcoord.config import BrokerConfig
from kcoord.groups.store import GroupStore
from kcoord.metrics import Metrics, tags
from kcoord.protocol import records as batches
from kcoord.protocol.errors import ErrorCode
from kcoord.runtime.outcome import Outcome
from kcoord.runtime.runtime import CoordinatorRuntime
from kcoord.share.config import effective_group_config, parse_by_duration
from kcoord.share.group import ShareGroup
from kcoord.share.partition import AcquiredRange, SharePartition
from kcoord.share.sessions import ShareSessionCache
from kcoord.share.store import ShareGroups
from kcoord.share.topics import SharedPartition, Topics
from kcoord.storage.log import Log, OffsetOutOfRange
from kcoord.storage.read_errors import READ_ERRORS, unreadable
from kcoord.storage.txn_index import AbortedTxn

PartitionKey = tuple[uuid.UUID, int]
AckBatches = list[tuple[int, int, list[int]]]


@dataclass
class PartitionResult:
    error: int = 0
    error_message: str | None = None
    ack_error: int | None = None  # None: no acknowledgements for this partition
    records: bytes | memoryview = b""
    acquired: list[AcquiredRange] = field(default_factory=list)

    def has_news(self) -> bool:
        return bool(self.acquired) or bool(self.error) or self.ack_error is not None


class GroupWaiters:
    """The waiters of one share group (a long poll's wake source)."""

    __slots__ = ("_group_id", "_waiters")

    def __init__(self, waiters: dict[str, set[Callable[[], None]]], group_id: str) -> None:
        self._waiters = waiters
        self._group_id = group_id

    def add_waiter(self, waiter: Callable[[], None]) -> None:
        self._waiters.setdefault(self._group_id, set()).add(waiter)

    def remove_waiter(self, waiter: Callable[[], None]) -> None:
        waiting = self._waiters.get(self._group_id)
        if waiting is not None:
            waiting.discard(waiter)
            if not waiting:
                del self._waiters[self._group_id]


class ShareCoordinator:
    def __init__(
        self,
        config: BrokerConfig,
        groups: CoordinatorRuntime[GroupStore],
        topics: Topics,
        metrics: Metrics,
    ) -> None:
        self.config = config
        self.groups = groups
        self.topics = topics
        self.sessions = ShareSessionCache(self.config.group_share_max_share_sessions)
        self.waiters: dict[str, set[Callable[[], None]]] = {}
        self.metrics = metrics
        self._register_metrics()

    def all_groups(self) -> list[ShareGroup]:
        return [g for store in self.groups.states() for g in store.kind(ShareGroups).groups.values()]

    # --- metrics (KIP-932: group-coordinator-metrics, protocol=share) --------------------------
    def _register_metrics(self) -> None:
        m = self.metrics
        share = tags(protocol="share")
        m.gauge("group-count", share, lambda: len(self.all_groups()))
        for state in ("Empty", "Stable", "Dead"):
            m.gauge("group-count", tags(protocol="share", state=state), self._count_in(state))
        m.gauge("num-partitions", share, lambda: sum(len(g.partitions) for g in self.all_groups()))
        self.rebalances = m.meter("rebalance", share)
        self.ack_meters = {
            t: m.meter("record-acknowledgement", tags(protocol="share", ack_type=t))
            for t in ("accept", "release", "reject")
        }
        self.load_time = m.avg_max("partition-load-time", share)

    def record_load_times(self) -> None:
        """partition-load-time of the coordinator partitions that loaded share state."""
        for store, seconds in zip(self.groups.states(), self.groups.load_seconds, strict=True):
            if store.kind(ShareGroups).groups:
                self.load_time.record(seconds * 1000)

    def _count_in(self, state: str) -> Callable[[], int]:
        return lambda: sum(1 for g in self.all_groups() if g.state == state)

    # --- long polls ------------------------------------------------------------------------
    def wake(self, group_id: str) -> None:
        """Records of the group may be deliverable again: wake its parked ShareFetch long polls."""
        for waiter in self.waiters.pop(group_id, ()):
            waiter()

    def records_of(self, group_id: str) -> GroupWaiters:
        """What a ShareFetch of the group waits on: the group's records becoming available."""
        return GroupWaiters(self.waiters, group_id)

    # --- members going away ----------------------------------------------------------------
    def connection_closed(self, conn: object) -> None:
        for group_id, member_id in self.sessions.closed_connection(conn):
            self.release_member(group_id, member_id)

    def release_member(self, group_id: str, member_id: str) -> None:
        def op(store: GroupStore, now: int) -> Outcome:
            out = Outcome()
            group = store.kind(ShareGroups).get(group_id)
            if group is not None:
                for sp in group.partitions.values():
                    out.records.extend(sp.release_member(member_id, now))
                self.wake(group_id)  # the released records may go to members parked in ShareFetch
            return out

        self.groups.tell(group_id, op)

    # --- topics going away -----------------------------------------------------------------
    def topic_deleted(self, topic_id: uuid.UUID) -> None:
        """Delete, durably, every share-partition of a deleted topic (tombstones for its state
        records), as Kafka deletes share-partition state with the topic."""
        for store in self.groups.states():
            for group in list(store.kind(ShareGroups).groups.values()):
                if any(tid == topic_id for tid, _ in group.partitions):
                    self._forget_topic(group.group_id, {topic_id})

    def forget_deleted_topics(self) -> None:
        """At start-up: share-partitions whose topic is gone (deleted before their tombstones were
        written) are deleted now."""
        for store in self.groups.states():
            for group in list(store.kind(ShareGroups).groups.values()):
                gone = {tid for tid, _ in group.partitions if self.topics.get_by_id(tid) is None}
                if gone:
                    self._forget_topic(group.group_id, gone)

    def _forget_topic(self, group_id: str, topic_ids: set[uuid.UUID]) -> None:
        def op(store: GroupStore, now: int) -> Outcome:
            out = Outcome()
            group = store.kind(ShareGroups).get(group_id)
            if group is not None:
                for key in [k for k in group.partitions if k[0] in topic_ids]:
                    out.records.extend(group.partitions.pop(key).delete_records())
            return out

        self.groups.tell(group_id, op)

    # --- configs -------------------------------------------------------------------------------
    def group_config(self, group: ShareGroup, name: str) -> str:
        return effective_group_config(name, group.configs, self.config)

    def group_config_of(self, group_id: str, name: str) -> str:
        """A group's config, read outside its actor (for answers; configs change by records)."""
        configs = self.groups.state_for(group_id).configs_of(group_id)
        return effective_group_config(name, configs, self.config)

    def lock_duration_ms(self, group_id: str) -> int:
        return int(self.group_config_of(group_id, "share.record.lock.duration.ms"))

    # --- the work inside the actor -------------------------------------------------------------
    def acknowledge(
        self,
        group: ShareGroup,
        member_id: str,
        acks: dict[PartitionKey, AckBatches],
        now: int,
        out: Outcome,
        results: dict[PartitionKey, PartitionResult],
    ) -> None:
        for pkey, ack_batches in acks.items():
            res = results.setdefault(pkey, PartitionResult())
            # As Kafka's KafkaApis: a topic id nobody knows (deleted) is UNKNOWN_TOPIC_ID, a
            # partition the topic does not have UNKNOWN_TOPIC_OR_PARTITION; nothing is applied.
            topic = self.topics.get_by_id(pkey[0])
            if topic is None:
                res.ack_error = ErrorCode.UNKNOWN_TOPIC_ID
                continue
            sp = group.partitions.get(pkey)
            if sp is None or topic.internal or not 0 <= pkey[1] < len(topic.partitions):
                res.ack_error = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                continue
            ack = sp.acknowledge(member_id, ack_batches, now)
            res.ack_error = ack.error_code
            out.records.extend(ack.records)
            for t, n in ack.counts.items():
                meter = self.ack_meters.get(t.name.lower())
                if meter is not None:
                    meter.record(now, n)

    def acquire(
        self,
        group: ShareGroup,
        member_id: str,
        keys: list[PartitionKey],
        max_records: int,
        max_bytes: int,
        now: int,
        out: Outcome,
        results: dict[PartitionKey, PartitionResult],
        strict: bool = False,
    ) -> int:
        """Acquire records on every partition of ``keys``; returns how many were acquired.

        ``max_records`` is a soft limit (whole batches) unless ``strict`` (ShareFetch v2's
        record_limit acquire mode)."""
        topics = self.topics
        read_committed = self.group_config(group, "share.isolation.level") == "read_committed"
        total = 0
        remaining_bytes = max_bytes
        for pkey in keys:
            res = results.setdefault(pkey, PartitionResult())
            topic = topics.get_by_id(pkey[0])
            if topic is None:
                res.error = ErrorCode.UNKNOWN_TOPIC_ID
                continue
            if topic.internal or not 0 <= pkey[1] < len(topic.partitions):
                res.error = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                continue
            part = topic.partitions[pkey[1]]
            sp = group.partitions.get(pkey)
            if sp is None:
                try:
                    start = self._start_offset(group, part, now)
                except READ_ERRORS as e:  # a by_duration reset reads the log
                    res.error = unreadable("share fetch", topic.name, pkey[1], e)
                    continue
                sp = SharePartition(
                    group.group_id,
                    pkey[0],
                    pkey[1],
                    self.groups.state_for(group.group_id).kind(ShareGroups).partition_config(group.group_id),
                    start,
                )
                group.partitions[pkey] = sp
                out.records.extend(sp.initialize())
            if sp.start_offset < part.log_start_offset:
                out.records.extend(sp.move_start(part.log_start_offset))
            if total >= max_records or remaining_bytes <= 0:
                continue
            if not sp.can_acquire():
                continue  # at share.partition.max.record.locks: do not read the log at all
            limit = part.last_stable_offset if read_committed else part.high_watermark
            offset = max(sp.next_fetch_offset(), part.log_start_offset)
            if offset >= limit:
                continue
            log_batches = _LogBatches(
                part.log,
                offset,
                limit,
                remaining_bytes,
                part.aborted_transactions if read_committed else None,
            )
            got = sp.acquire(member_id, log_batches, max_records - total, now, strict=strict)
            out.records.extend(got.records)
            if not got.acquired:
                if log_batches.error is not None:
                    res.error = unreadable("share fetch", topic.name, pkey[1], log_batches.error)
                continue
            first, last = got.acquired[0].first_offset, got.acquired[-1].last_offset
            data, headers = log_batches.data(), log_batches.headers
            start = next(h.position for h in headers if h.last_offset >= first)
            end = next(h.position + h.size for h in reversed(headers) if h.base_offset <= last)
            res.records = data[start:end]
            res.acquired = got.acquired
            remaining_bytes -= end - start
            total += sum(r.last_offset - r.first_offset + 1 for r in got.acquired)
        return total

    def _start_offset(self, group: ShareGroup, part: SharedPartition, now: int) -> int:
        """Where a new share-partition starts: share.auto.offset.reset (default latest)."""
        reset = self.group_config(group, "share.auto.offset.reset")
        if reset == "earliest":
            return part.log_start_offset
        if reset.startswith("by_duration:"):
            since = now - parse_by_duration(reset.removeprefix("by_duration:"))
            found = part.log.offset_for_timestamp(since, part.high_watermark)
            return found[0] if found is not None else part.high_watermark
        return part.high_watermark


# The first read of a share-partition's log per ShareFetch; each further read doubles.
FIRST_READ_BYTES = 64 * 1024


class _LogBatches:
    """The (first, last) offsets of the non-control batches of a log from ``offset`` below
    ``limit``, read as SharePartition.acquire iterates them: in chunks of doubling size, at most
    ``max_bytes`` in all (but at least one batch, KIP-74).

    With ``aborted`` (read_committed: the partition's aborted transactions over a range) the
    batches of aborted transactions are left out too: a transactional batch is aborted when an
    aborted transaction of its producer spans its offset (from its first offset to its ABORT
    marker). Left out, they become gaps the share-partition archives, never delivered, as
    Kafka's share-partition leader filters them.

    A ShareFetch's MaxBytes is 50 MiB by default (the Java client's fetch.max.bytes), far more
    than the records one acquisition takes (MaxRecords, 500 by default). Reading and parsing
    MaxBytes of log per ShareFetch made each fetch cost the whole backlog (quadratic in it);
    Kafka likewise only reads the batches SharePartition.acquire iterates. ``headers`` (their
    positions count from the start of ``data()``) are those read so far.
    """

    def __init__(
        self,
        log: Log,
        offset: int,
        limit: int,
        max_bytes: int,
        aborted: Callable[[int, int], Sequence[AbortedTxn]] | None = None,
    ) -> None:
        self._log = log
        self._aborted = aborted
        self._aborted_ranges: dict[int, list[tuple[int, int]]] = {}  # producer id -> (first, marker)
        self._next = offset
        self._limit = limit
        self._left = max_bytes
        self._chunk = FIRST_READ_BYTES
        self.error: Exception | None = None  # the read that ended the batches early, if one failed
        self._chunks: list[bytes | memoryview] = []
        self._size = 0
        self.headers: list[batches.BatchHeader] = []

    def data(self) -> bytes | memoryview:
        return self._chunks[0] if len(self._chunks) == 1 else b"".join(self._chunks)

    def _read_more(self) -> list[batches.BatchHeader]:
        if self._next >= self._limit or (self._chunks and self._left <= 0):
            return []
        try:
            data = self._log.read(self._next, min(self._left, self._chunk), self._limit, min_one=True)
            if not data or (self._chunks and len(data) > self._left):
                return []  # only the first batch may exceed max_bytes
            read = list(batches.iter_headers(data, partial_ok=True))
        except OffsetOutOfRange:
            return []
        except READ_ERRORS as e:
            # A segment the disk cannot read (EIO), or whose bytes changed since start-up's
            # recovery checked them, ends the batches here: those read so far are acquired, and
            # the error never reaches the share-partition's state machine half-way through an
            # acquisition (raised in the group's operation, it stopped the broker as a failed
            # coordinator write does).
            self.error = e
            return []
        if not read:
            return []
        if self._aborted is not None:
            for txn in self._aborted(read[0].base_offset, read[-1].next_offset):
                ranges = self._aborted_ranges.setdefault(txn.producer_id, [])
                if (txn.first_offset, txn.last_offset) not in ranges:
                    ranges.append((txn.first_offset, txn.last_offset))
        for h in read:
            h.position += self._size
        self._chunks.append(data)
        self._size += len(data)
        self._left -= len(data)
        self._chunk *= 2
        self._next = read[-1].next_offset
        self.headers.extend(read)
        return read

    def __iter__(self) -> Iterator[tuple[int, int]]:
        read = self.headers or self._read_more()
        while read:
            for h in read:
                if not h.is_control and not (h.is_transactional and self._is_aborted(h)):
                    yield h.base_offset, h.last_offset
            read = self._read_more()

    def _is_aborted(self, h: batches.BatchHeader) -> bool:
        ranges = self._aborted_ranges.get(h.producer_id, ())
        return any(first <= h.base_offset <= marker for first, marker in ranges)
