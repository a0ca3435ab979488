"""The durable form of a share-partition: SHARE_CHECKPOINT / SHARE_DELTA records (KIP-932 seed).

``apply`` rebuilds state from records — a checkpoint replaces, the deltas of its epoch overlay —
and is what log replay runs; records the state already reflects are ignored, so an actor may
apply what an operation returned. ``_commit`` turns the ranges an operation changed into the
next record: a SHARE_DELTA, or per the checkpoint policy a SHARE_CHECKPOINT (next epoch) plus
tombstones for the delta keys it supersedes.

Acquired is transient: an Acquired record with delivery count n is written as Available with
n - 1, so a first delivery writes nothing and a restart redelivers the record. A delta covers
the changed ranges plus every offset between the end of what the log already records (the
"durable end") and the change, so replay always sees contiguous state. Trailing Available or
Archived offsets with delivery count 0 mean "not delivered yet" and are trimmed from the durable
view, whose end offset may thus be below the live SPEO.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass

from kcoord.share.config import SharePartitionConfig
from kcoord.share.inflight import TERMINAL, TRIVIAL, InFlightRecords, RecordState
from kcoord.share.records import (
    ShareCheckpointKey,
    ShareCheckpointValue,
    ShareDeltaKey,
    ShareDeltaValue,
    ShareKey,
    ShareRecord,
    ShareValue,
    StateBatch,
)

Record = ShareRecord


@dataclass(frozen=True)
class DurableView:
    """The normalized state a restart must reproduce (Acquired as Available with count - 1,
    adjacent equal ranges merged, trailing not-yet-delivered ranges trimmed)."""

    start_offset: int
    end_offset: int
    batches: tuple[StateBatch, ...]


def _merge_intervals(intervals: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[list[int]] = []
    for a, b in sorted(intervals):
        if out and a <= out[-1][1] + 1:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return [(a, b) for a, b in out]


class DurableShareState(InFlightRecords):
    def __init__(
        self,
        group_id: str,
        topic_id: uuid.UUID,
        partition: int,
        config: SharePartitionConfig,
        start_offset: int,
    ) -> None:
        super().__init__(start_offset)
        self.group_id = group_id
        self.topic_id = topic_id
        self.partition = partition
        self.config = config
        # What replaying the records written so far yields.
        self.checkpoint_epoch = 0  # 0: nothing written yet
        self.delta_seq = 0  # last delta written in this checkpoint epoch
        self._durable_end = start_offset
        self._dirty: list[tuple[int, int]] = []  # ranges changed since the last record
        self.deleted = False

    # --- replay ----------------------------------------------------------------------------
    def apply(self, key: ShareKey, value: ShareValue | None) -> None:
        """Rebuild state from one record: a checkpoint replaces, a delta overlays.

        Records already reflected here (a checkpoint epoch not above ours, a delta of our epoch
        with a sequence not above ours) and deltas of other epochs (superseded) are ignored.
        """
        if isinstance(key, ShareCheckpointKey):
            if value is None:
                self._load(0, 0, ())
                self.checkpoint_epoch = 0
                self.delta_seq = 0
                self.deleted = True
                return
            assert isinstance(value, ShareCheckpointValue)
            if value.checkpoint_epoch <= self.checkpoint_epoch:
                return
            self._load(value.start_offset, value.end_offset, value.batches)
            self.checkpoint_epoch = value.checkpoint_epoch
            self.delta_seq = 0
            self.deleted = False
            return
        if value is None or key.checkpoint_epoch != self.checkpoint_epoch or key.delta_seq <= self.delta_seq:
            return
        assert isinstance(value, ShareDeltaValue)
        for b in value.batches:
            self._overlay(b)
        self.delta_seq = key.delta_seq
        self._advance_start()
        self._durable_end = self.end_offset

    def _load(self, start: int, end: int, batches: Iterable[StateBatch]) -> None:
        self._clear()
        self.start_offset = self.end_offset = start
        self._durable_end = start
        for b in batches:
            if b.base_offset < end:
                self._overlay(
                    StateBatch(b.base_offset, min(b.last_offset, end - 1), b.state, b.delivery_count)
                )
        if self.end_offset < end:
            self._extend(end - 1, RecordState.AVAILABLE, 0, None, None)
        self._advance_start()
        self._durable_end = self.end_offset

    def _overlay(self, b: StateBatch) -> None:
        first = max(b.base_offset, self.start_offset)
        last = b.last_offset
        if last < first:
            return
        if last >= self.end_offset:
            # Offsets up to the batch that no record mentioned have not been delivered.
            self._extend(last, RecordState.AVAILABLE, 0, None, None)
        state = RecordState(b.state)
        self._update(first, last, lambda r: (state, b.delivery_count, None, None))

    def durable_view(self) -> DurableView:
        batches = self._durable_batches(None)
        end = batches[-1].last_offset + 1 if batches else self.start_offset
        return DurableView(self.start_offset, end, tuple(batches))

    def _durable_batches(self, limit: int | None) -> list[StateBatch]:
        """Normalized durable batches; with ``limit``, stops once more than that many are sure."""
        out: list[list[int]] = []  # [first, last, state, dc]
        trivial_tail = 0  # how many trailing entries of out are trivial
        for r in self._runs:
            state, dc = r.durable()
            if out and out[-1][2] == state and out[-1][3] == dc and out[-1][1] + 1 == r.first:
                out[-1][1] = r.last
                continue
            out.append([r.first, r.last, state, dc])
            if dc == 0 and state in TRIVIAL:
                trivial_tail += 1
            else:
                trivial_tail = 0
            if limit is not None and len(out) - trivial_tail > limit:
                break
        if trivial_tail:
            del out[len(out) - trivial_tail :]
        return [StateBatch(a, b, s, d) for a, b, s, d in out]

    # --- durability ---------------------------------------------------------------------------
    def initialize(self) -> list[Record]:
        """The records that make a fresh share-partition durable (SHARE_CHECKPOINT epoch 1)."""
        if self.checkpoint_epoch > 0 or self.deleted:
            return []
        return self._write_checkpoint()

    def delete_records(self) -> list[Record]:
        """Tombstones for every live record of this share-partition (DeleteShareGroupState)."""
        out: list[Record] = [(self._checkpoint_key(), None)]
        out += [(self._delta_key(self.checkpoint_epoch, s), None) for s in range(1, self.delta_seq + 1)]
        self._clear()
        self.end_offset = self.start_offset
        self.checkpoint_epoch = self.delta_seq = 0
        self.deleted = True
        return out

    def _checkpoint_key(self) -> ShareCheckpointKey:
        return ShareCheckpointKey(self.group_id, self.topic_id, self.partition)

    def _delta_key(self, epoch: int, seq: int) -> ShareDeltaKey:
        return ShareDeltaKey(self.group_id, self.topic_id, self.partition, epoch, seq)

    def _commit(self) -> list[Record]:
        """End of an operation: move SPSO, then write what changed (a delta or a checkpoint)."""
        if self.deleted:
            self._dirty = []
            return []
        new_start = self.start_offset
        for r in self._runs:
            if r.state not in TERMINAL:
                break
            new_start = r.last + 1
        dirty = _merge_intervals(self._dirty)
        self._dirty = []
        hi = max(dirty[-1][1] if dirty else -1, new_start - 1)
        if hi >= self._durable_end:
            dirty = _merge_intervals([*dirty, (self._durable_end, hi)])
        batches = self._batches_over(dirty)
        self._drop_below(new_start)
        if self.checkpoint_epoch == 0:
            return self._write_checkpoint()
        if not batches:
            return []
        cfg = self.config
        if self.delta_seq >= cfg.checkpoint_every_deltas or (
            cfg.checkpoint_when_smaller and len(self._durable_batches(len(batches))) < len(batches)
        ):
            return self._write_checkpoint()
        self.delta_seq += 1
        self._durable_end = max(self._durable_end, batches[-1].last_offset + 1, self.start_offset)
        value = ShareDeltaValue(self.checkpoint_epoch, -1, tuple(batches))
        return [(self._delta_key(self.checkpoint_epoch, self.delta_seq), value)]

    def _write_checkpoint(self) -> list[Record]:
        view = self.durable_view()
        old_epoch, old_seq = self.checkpoint_epoch, self.delta_seq
        self.checkpoint_epoch += 1
        self.delta_seq = 0
        self._durable_end = view.end_offset
        self._dirty = []
        out: list[Record] = [
            (
                self._checkpoint_key(),
                ShareCheckpointValue(self.checkpoint_epoch, view.start_offset, view.end_offset, view.batches),
            )
        ]
        if old_epoch > 0:
            out += [(self._delta_key(old_epoch, s), None) for s in range(1, old_seq + 1)]
        return out

    def _batches_over(self, intervals: list[tuple[int, int]]) -> list[StateBatch]:
        """Durable-form state batches of the live runs over ``intervals`` (within [SPSO, SPEO))."""
        out: list[list[int]] = []
        for a, b in intervals:
            a = max(a, self.start_offset)
            b = min(b, self.end_offset - 1)
            if a > b:
                continue
            i = self._find(a)
            while i < len(self._runs) and self._runs[i].first <= b:
                r = self._runs[i]
                lo, hi = max(r.first, a), min(r.last, b)
                state, dc = r.durable()
                if out and out[-1][1] + 1 == lo and out[-1][2] == state and out[-1][3] == dc:
                    out[-1][1] = hi
                else:
                    out.append([lo, hi, state, dc])
                i += 1
        return [StateBatch(a, b, s, d) for a, b, s, d in out]

    def _clear(self) -> None:
        super()._clear()
        self._dirty = []
