"""One share-partition: the in-flight records of a (share group, topic, partition), as Kafka's
SharePartition (KIP-932), as a plain synchronous state machine.

State. The share-partition start offset (SPSO) and end offset (SPEO); every offset in
[SPSO, SPEO) is in flight: Available, Acquired (by a member, until a lock deadline),
Acknowledged or Archived, each with a delivery count (inflight.py holds them as runs). Offsets
between the log batches a fetch saw (compacted away, or batches the caller left out such as
control batches) are Archived with delivery count 0 as soon as the fetch passes them and are
never handed out; acknowledgements that cover them ignore them. SPSO moves over the leading
Acknowledged/Archived records, and state below SPSO is dropped.

Operations take the current time ``now`` (ms) and return the records to persist, already
reflected in this object; their durable form (SHARE_CHECKPOINT / SHARE_DELTA), ``apply`` for
replay and ``durable_view()`` are in durability.py.

Kafka 4.x behaviour followed beyond the seed:
- acquire: whole log batches against ``max_records`` (soft limit, at least one batch); no new
  offset at or beyond SPSO + ``max_record_locks``; an Available record whose next delivery is
  its last (delivery count limit > 2) is delivered alone; Available records inside the fetched
  span that the log no longer has (compacted) are archived (Kafka's maybeArchiveStaleBatches).
- release (ack type 2) and lock expiry: Available, or Archived once the delivery count has
  reached ``delivery_count_limit``; a member leaving (``release_member``) gives its records
  back with the delivery count decremented (Kafka's DeliveryCountOps.DECREASE: they may never
  have reached the consumer), so that writes nothing.
- acknowledge: validated as KafkaApis.validateAcknowledgementBatches (INVALID_REQUEST for
  first > last, batches out of order or overlapping, no types, a type list that is neither one
  entry nor one per offset, an unknown type); batches entirely below SPSO are skipped, the part
  of a batch below SPSO is ignored; offsets at or past SPEO are INVALID_REQUEST ("past acquired
  records"); any offset not Acquired by the member is INVALID_RECORD_STATE. All or nothing.
"""

from __future__ import annotations

import contextlib
import itertools
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from enum import IntEnum
from typing import NamedTuple

from kcoord.protocol.errors import ErrorCode
from kcoord.share.config import SharePartitionConfig
from kcoord.share.durability import DurableShareState, Record
from kcoord.share.inflight import (
    InFlightBatch,
    RecordState,
    Run,
)
from kcoord.share.records import (
    ShareKey,
    ShareValue,
)


class AckType(IntEnum):
    GAP = 0
    ACCEPT = 1
    RELEASE = 2
    REJECT = 3
    RENEW = 4  # KIP-1222 (Kafka 4.2+); whether a request may carry it is the handler's business


_ACK_TYPES = frozenset(int(t) for t in AckType)


class AcquiredRange(NamedTuple):
    first_offset: int
    last_offset: int
    delivery_count: int


class AcquireResult(NamedTuple):
    acquired: list[AcquiredRange]
    records: list[Record]


class AckResult(NamedTuple):
    error_code: int
    records: list[Record]
    counts: dict[AckType, int]  # records acknowledged per type (metrics); empty on error


class _Stop(Exception):
    """Ends an acquisition early (a last-delivery record is delivered alone)."""


class SharePartition(DurableShareState):
    def __init__(
        self,
        group_id: str,
        topic_id: uuid.UUID,
        partition: int,
        config: SharePartitionConfig,
        start_offset: int,
    ) -> None:
        """A fresh share-partition whose SPSO the caller resolved (share.auto.offset.reset).

        Nothing is durable until ``initialize()`` (or the first operation) writes checkpoint 1.
        """
        super().__init__(group_id, topic_id, partition, config, start_offset)
        # Metrics: records acknowledged per type (record-acknowledgement-count, ack-type tag).
        self.acknowledgements: Counter[str] = Counter()

    # --- construction from records --------------------------------------------------------
    @classmethod
    def from_records(
        cls,
        group_id: str,
        topic_id: uuid.UUID,
        partition: int,
        config: SharePartitionConfig,
        records: Iterable[tuple[ShareKey, ShareValue | None]],
    ) -> SharePartition | None:
        """Replay the records of this share-partition (log order); None if no checkpoint is live."""
        sp = cls(group_id, topic_id, partition, config, 0)
        for key, value in records:
            sp.apply(key, value)
        return sp if sp.checkpoint_epoch > 0 else None

    # --- inspection ---------------------------------------------------------------------------
    def next_fetch_offset(self) -> int:
        """The lowest offset that could be acquired: the first Available one, else SPEO."""
        for r in self._runs:
            if r.state == RecordState.AVAILABLE:
                return r.first
        return self.end_offset

    def can_acquire(self) -> bool:
        """False when nothing is Available and SPEO has reached SPSO + max_record_locks."""
        if self.end_offset < self.start_offset + self.config.max_record_locks:
            return True
        return any(r.state == RecordState.AVAILABLE for r in self._runs)

    def next_deadline(self) -> int | None:
        """The earliest acquisition lock deadline, if any record is Acquired."""
        return min(self._locks) if self._locks else None

    def in_flight(self) -> list[InFlightBatch]:
        return [InFlightBatch(r.first, r.last, r.state, r.dc, r.member, r.deadline) for r in self._runs]

    def state_of(self, offset: int) -> InFlightBatch | None:
        """The run holding ``offset``, or None outside [SPSO, SPEO)."""
        if not self.start_offset <= offset < self.end_offset:
            return None
        r = self._runs[self._find(offset)]
        return InFlightBatch(r.first, r.last, r.state, r.dc, r.member, r.deadline)

    # --- acquisition -------------------------------------------------------------------------
    def acquire(
        self,
        member_id: str,
        log_batches: Iterable[tuple[int, int]],
        max_records: int,
        now: int,
        strict: bool = False,
    ) -> AcquireResult:
        """Acquire records for ``member_id`` from the log batches a fetch read.

        ``log_batches``: (first_offset, last_offset) of the batches read from the log starting at
        or before ``next_fetch_offset()``, in offset order, whole batches; offsets between them
        are gaps and are never handed out (leave control batches, and aborted batches under
        read_committed, out to make them gaps). They are iterated once, in order, and no further
        than needed, so the caller may read the log as they are pulled. Returns the acquired
        ranges, merged where contiguous with the same delivery count, and the records to persist
        (none for first deliveries).

        ``max_records`` is soft (whole batches, at least one) unless ``strict``, ShareFetch v2's
        record_limit acquire mode: then no more than ``max_records`` are acquired, splitting
        batches, and the rest stays Available.
        """
        if self.deleted:
            return AcquireResult([], [])
        acquired: list[list[int]] = []
        if max_records > 0 and log_batches:
            with contextlib.suppress(_Stop):
                self._acquire(member_id, log_batches, max_records, now, acquired, strict)
        return AcquireResult([AcquiredRange(a, b, dc) for a, b, dc in acquired], self._commit())

    def _acquire(
        self,
        member: str,
        log_batches: Iterable[tuple[int, int]],
        max_records: int,
        now: int,
        acquired: list[list[int]],
        strict: bool = False,
    ) -> None:
        cfg = self.config
        deadline = now + cfg.record_lock_duration_ms
        cap = self.start_offset + cfg.max_record_locks  # new offsets must stay below this
        count = 0

        def took(first: int, last: int, dc: int) -> None:
            nonlocal count
            count += last - first + 1
            if acquired and acquired[-1][1] + 1 == first and acquired[-1][2] == dc:
                acquired[-1][1] = last
            else:
                acquired.append([first, last, dc])

        pos = max(self.next_fetch_offset(), self.start_offset)
        for bf, bl in log_batches:
            if bl < bf or bl < pos:
                continue
            if bf > pos:  # a gap: [pos, bf)
                self._archive_stale(pos, min(bf, self.end_offset) - 1)
                if bf > self.end_offset:
                    if bf >= cap:
                        return
                    self._extend(bf - 1, RecordState.ARCHIVED, 0, None, None)
                pos = bf
            # In-flight part of the batch: Available records are redelivered.
            off = pos
            in_last = min(bl, self.end_offset - 1)
            while off <= in_last:
                r = self._runs[self._find(off)]
                seg = min(r.last, in_last)
                if r.state == RecordState.AVAILABLE:
                    if strict:
                        if count >= max_records:
                            return
                        seg = min(seg, off + max_records - count - 1)
                    self._redeliver(member, off, seg, r.dc, deadline, count, took)
                off = seg + 1
            # New records beyond SPEO.
            first_new = max(pos, self.end_offset)
            last_new = min(bl, cap - 1)
            if strict:
                if count >= max_records:
                    return
                last_new = min(last_new, first_new + max_records - count - 1)
            if first_new <= last_new:
                self._extend(last_new, RecordState.ACQUIRED, 1, member, deadline)
                took(first_new, last_new, 1)
            pos = bl + 1
            if count >= max_records:
                return  # before pulling another batch: the caller may read them lazily
            if pos >= cap and pos >= self.end_offset:
                return  # nothing in flight beyond here, and no room for new records

    def _redeliver(
        self,
        member: str,
        first: int,
        last: int,
        dc: int,
        deadline: int,
        count: int,
        took: Callable[[int, int, int], None],
    ) -> None:
        limit = self.config.delivery_count_limit
        if dc >= limit:  # e.g. the limit was lowered: never deliver it again
            self._update(first, last, lambda r: (RecordState.ARCHIVED, r.dc, None, None))
            self._dirty.append((first, last))
            return
        if limit > 2 and dc == limit - 1:
            # Its last delivery: deliver it alone, so a poison record takes no others down with it.
            if count > 0:
                raise _Stop
            self._update(first, first, lambda r: (RecordState.ACQUIRED, dc + 1, member, deadline))
            took(first, first, dc + 1)
            raise _Stop
        self._update(first, last, lambda r: (RecordState.ACQUIRED, dc + 1, member, deadline))
        took(first, last, dc + 1)

    def _archive_stale(self, first: int, last: int) -> None:
        """Available in-flight records in a gap of the log: compacted away since; archive them."""
        off = max(first, self.start_offset)
        while off <= last:
            r = self._runs[self._find(off)]
            seg = min(r.last, last)
            if r.state == RecordState.AVAILABLE:
                self._update(off, seg, lambda r: (RecordState.ARCHIVED, r.dc, None, None))
                self._dirty.append((off, seg))
            off = seg + 1

    # --- acknowledgement ---------------------------------------------------------------------
    def acknowledge(
        self, member_id: str, batches: Sequence[tuple[int, int, Sequence[int]]], now: int
    ) -> AckResult:
        """Acknowledge records ``member_id`` holds: batches of (first, last, ack_types), with one
        type for the whole range or one per offset (0 Gap, 1 Accept, 2 Release, 3 Reject,
        4 Renew). All or nothing: an error changes nothing."""
        if self.deleted:
            return AckResult(ErrorCode.INVALID_RECORD_STATE, [], {})
        # Request validation (KafkaApis.validateAcknowledgementBatches).
        prev_last: int | None = None
        for first, last, types in batches:
            if first > last or (prev_last is not None and first <= prev_last) or not types:
                return AckResult(ErrorCode.INVALID_REQUEST, [], {})
            if len(types) > 1 and len(types) != last - first + 1:
                return AckResult(ErrorCode.INVALID_REQUEST, [], {})
            if not _ACK_TYPES.issuperset(types):
                return AckResult(ErrorCode.INVALID_REQUEST, [], {})
            prev_last = last
        # State validation: every offset must be Acquired by the member (gaps aside).
        for first, last, _ in batches:
            if last < self.start_offset:
                continue
            if last >= self.end_offset:
                return AckResult(ErrorCode.INVALID_REQUEST, [], {})
            off = max(first, self.start_offset)
            while off <= last:
                r = self._runs[self._find(off)]
                if not r.is_gap() and (r.state != RecordState.ACQUIRED or r.member != member_id):
                    return AckResult(ErrorCode.INVALID_RECORD_STATE, [], {})
                off = r.last + 1
        counts: Counter[AckType] = Counter()
        lock_deadline = now + self.config.record_lock_duration_ms
        for first, last, types in batches:
            if last < self.start_offset:
                continue
            lo = max(first, self.start_offset)
            if len(types) == 1:
                self._ack_range(lo, last, AckType(types[0]), lock_deadline, counts)
                continue
            for t, group in itertools.groupby(range(lo, last + 1), key=lambda o: types[o - first]):
                offs = list(group)
                self._ack_range(offs[0], offs[-1], AckType(t), lock_deadline, counts)
        for t, n in counts.items():
            self.acknowledgements[t.name.lower()] += n
        return AckResult(ErrorCode.NONE, self._commit(), dict(counts))

    def _ack_range(
        self, first: int, last: int, t: AckType, lock_deadline: int, counts: Counter[AckType]
    ) -> None:
        limit = self.config.delivery_count_limit

        def change(r: Run) -> tuple[RecordState, int, str | None, int | None]:
            if r.state != RecordState.ACQUIRED:  # a gap
                return r.state, r.dc, r.member, r.deadline
            counts[t] += r.last - r.first + 1
            if t == AckType.ACCEPT:
                return RecordState.ACKNOWLEDGED, r.dc, None, None
            if t == AckType.RELEASE:
                return self._released(r.dc, limit), r.dc, None, None
            if t == AckType.RENEW:
                return RecordState.ACQUIRED, r.dc, r.member, lock_deadline
            return RecordState.ARCHIVED, r.dc, None, None  # GAP, REJECT

        self._update(first, last, change)
        if t != AckType.RENEW:
            self._dirty.append((first, last))

    @staticmethod
    def _released(dc: int, limit: int) -> RecordState:
        return RecordState.ARCHIVED if dc >= limit else RecordState.AVAILABLE

    # --- locks and members --------------------------------------------------------------------
    def on_timer(self, now: int) -> list[Record]:
        """Release the records whose acquisition lock expired (Available, or Archived at the
        delivery count limit)."""
        if not self._locks or min(self._locks) > now:
            return []
        limit = self.config.delivery_count_limit
        expired = [
            (r.first, r.last)
            for r in self._runs
            if r.state == RecordState.ACQUIRED and r.deadline is not None and r.deadline <= now
        ]
        for first, last in expired:
            self._update(first, last, lambda r: (self._released(r.dc, limit), r.dc, None, None))
            self._dirty.append((first, last))
        return self._commit()

    def release_member(self, member_id: str, now: int) -> list[Record]:
        """Give back every record a departed member holds, delivery count decremented (Kafka's
        releaseAcquiredRecords); the durable form does not change, so normally no records."""
        held = [
            (r.first, r.last) for r in self._runs if r.state == RecordState.ACQUIRED and r.member == member_id
        ]
        for first, last in held:
            self._update(first, last, lambda r: (RecordState.AVAILABLE, r.dc - 1, None, None))
        return self._commit()

    # --- start offset -------------------------------------------------------------------------
    def move_start(self, log_start_offset: int) -> list[Record]:
        """Retention deleted the log below ``log_start_offset``: SPSO moves up to it (everything
        below is archived and dropped, locks included)."""
        if self.deleted or log_start_offset <= self.start_offset:
            return []
        if log_start_offset > self.end_offset:
            self._extend(log_start_offset - 1, RecordState.ARCHIVED, 0, None, None)
        self._update(
            self.start_offset, log_start_offset - 1, lambda r: (RecordState.ARCHIVED, r.dc, None, None)
        )
        self._dirty.append((self.start_offset, log_start_offset - 1))
        return self._commit()

    def reset_start(self, offset: int) -> list[Record]:
        """AlterShareGroupOffsets: start over at ``offset`` with nothing in flight (a checkpoint)."""
        self._clear()
        self.start_offset = self.end_offset = offset
        self.deleted = False
        return self._write_checkpoint()
