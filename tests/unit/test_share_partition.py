"""The share-partition state machine (KIP-932), driven by a manual clock.

The first tests replay the seed's in-flight records example step by step (SPSO 100 -> 110 ->
120) and check the cumulative state and the SHARE_DELTA / SHARE_CHECKPOINT records at each
step; then Kafka 4.x behaviour beyond the seed; then a stateful property test: whatever the
operations, replaying the records written (as written, and after compaction) reproduces
``durable_view()``. The property test writes through the production coordinator shard (the
share-partition inside its group in a GroupStore, records applied by the store's ``replay``,
appended with their SHARE_DELTA BackOffset linked), compacts with the real log cleaner, and
restarts from the real log.
"""

from __future__ import annotations

import shutil
import tempfile
import uuid
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from kcoord.protocol.errors import ErrorCode as E
from kcoord.runtime.outcome import Outcome
from kcoord.share import records as R
from kcoord.share.config import SharePartitionConfig
from kcoord.share.durability import DurableView
from kcoord.share.inflight import RecordState
from kcoord.share.partition import AckType, SharePartition
from kcoord.share.store import ShareGroups
from tests.unit.grouputil import Harness, share_store

TID = uuid.UUID("6f1c1a43-7f0b-4f43-9a57-5a8a3b0c1d2e")
G = "G1"
LOCK = 30_000

A, B = "member-a", "member-b"
ACC, REL, REJ, GAP, RENEW = AckType.ACCEPT, AckType.RELEASE, AckType.REJECT, AckType.GAP, AckType.RENEW
S = {state: state.name.lower() for state in RecordState}


def sp_new(start: int = 100, **cfg: object) -> SharePartition:
    return SharePartition(G, TID, 0, SharePartitionConfig(**cfg), start)  # type: ignore[arg-type]


def state(sp: SharePartition) -> tuple[int, int, list[tuple[int, int, str, int]]]:
    """(SPSO, SPEO, runs as (first, last, state, delivery count))."""
    return (
        sp.start_offset,
        sp.end_offset,
        [(b.first_offset, b.last_offset, S[b.state], b.delivery_count) for b in sp.in_flight()],
    )


def delta(seq: int, *batches: tuple[int, int, int, int], epoch: int = 1) -> R.ShareRecord:
    return (
        R.ShareDeltaKey(G, TID, 0, epoch, seq),
        R.ShareDeltaValue(epoch, -1, tuple(R.StateBatch(*b) for b in batches)),
    )


def checkpoint(epoch: int, start: int, end: int, *batches: tuple[int, int, int, int]) -> R.ShareRecord:
    return (
        R.ShareCheckpointKey(G, TID, 0),
        R.ShareCheckpointValue(epoch, start, end, tuple(R.StateBatch(*b) for b in batches)),
    )


def ack(
    sp: SharePartition, member: str, first: int, last: int, *types: int, now: int = 0
) -> list[R.ShareRecord]:
    err, records, _ = sp.acknowledge(member, [(first, last, list(types))], now)
    assert err == E.NONE
    return records


def durable(start: int, end: int, *batches: tuple[int, int, int, int]) -> DurableView:
    return DurableView(start, end, tuple(R.StateBatch(*b) for b in batches))


def replay(records: list[R.ShareRecord], **cfg: object) -> SharePartition:
    sp = SharePartition.from_records(G, TID, 0, SharePartitionConfig(**cfg), records)  # type: ignore[arg-type]
    assert sp is not None
    return sp


AV, ACK_, ARC = 0, 2, 4  # state ids in records


# --- the seed's example ---------------------------------------------------------------------------
def run_seed_example(sp: SharePartition) -> tuple[list[list[R.ShareRecord]], DurableView]:
    """The seed's operations, asserting the cumulative state after each; returns the records
    written per step and the durable view after the lock timeout step."""
    out = [sp.initialize()]
    assert state(sp) == (100, 100, [])

    # Fetch records 100-109: acquired with delivery count 1; nothing is written.
    acquired, records = sp.acquire(A, [(100, 109)], 500, now=0)
    assert acquired == [(100, 109, 1)] and records == []
    assert state(sp) == (100, 110, [(100, 109, "acquired", 1)])
    # Acknowledge 100-109 -> SPSO 110.
    out.append(ack(sp, A, 100, 109, ACC, now=100))
    assert state(sp) == (110, 110, [])

    # Fetch records 110-119.
    acquired, records = sp.acquire(A, [(110, 119)], 500, now=1_000)
    assert acquired == [(110, 119, 1)] and records == []
    assert state(sp) == (110, 120, [(110, 119, "acquired", 1)])
    # Release 110.
    out.append(ack(sp, A, 110, 110, REL, now=1_100))
    assert state(sp) == (110, 120, [(110, 110, "available", 1), (111, 119, "acquired", 1)])
    # Acknowledge 119.
    out.append(ack(sp, A, 119, 119, ACC, now=1_200))
    assert state(sp) == (
        110,
        120,
        [(110, 110, "available", 1), (111, 118, "acquired", 1), (119, 119, "acknowledged", 1)],
    )

    # Fetch records 110, 120 (the log read starts at the next fetch offset, 110).
    assert sp.next_fetch_offset() == 110
    acquired, records = sp.acquire(A, [(110, 119), (120, 120)], 500, now=2_000)
    assert acquired == [(110, 110, 2), (120, 120, 1)] and records == []
    assert state(sp) == (
        110,
        121,
        [
            (110, 110, "acquired", 2),
            (111, 118, "acquired", 1),
            (119, 119, "acknowledged", 1),
            (120, 120, "acquired", 1),
        ],
    )

    # The lock of 111-112 times out while 113-118 are held longer: the member renews them
    # (KIP-1222), which keeps them Acquired and writes nothing.
    out_renew = ack(sp, A, 113, 118, RENEW, now=20_000)
    assert out_renew == []
    assert sp.next_deadline() == 1_000 + LOCK
    assert sp.on_timer(1_000 + LOCK - 1) == []
    out.append(sp.on_timer(1_000 + LOCK))
    assert state(sp) == (
        110,
        121,
        [
            (110, 110, "acquired", 2),
            (111, 112, "available", 1),
            (113, 118, "acquired", 1),
            (119, 119, "acknowledged", 1),
            (120, 120, "acquired", 1),
        ],
    )
    snapshot_after_timeout = sp.durable_view()

    # Acknowledge 113-118.
    out.append(ack(sp, A, 113, 118, ACC, now=31_100))
    assert state(sp) == (
        110,
        121,
        [
            (110, 110, "acquired", 2),
            (111, 112, "available", 1),
            (113, 119, "acknowledged", 1),
            (120, 120, "acquired", 1),
        ],
    )

    # Fetch records 111, 112: the timed-out records go to another member, delivery count 2.
    assert sp.next_fetch_offset() == 111
    acquired, records = sp.acquire(B, [(110, 119)], 500, now=31_200)
    assert acquired == [(111, 112, 2)] and records == []
    assert state(sp) == (
        110,
        121,
        [
            (110, 110, "acquired", 2),
            (111, 112, "acquired", 2),
            (113, 119, "acknowledged", 1),
            (120, 120, "acquired", 1),
        ],
    )
    assert [b.member_id for b in sp.in_flight()] == [A, B, None, A]

    # Acknowledge 110 -> SPSO 111.
    out.append(ack(sp, A, 110, 110, ACC, now=31_300))
    assert state(sp) == (
        111,
        121,
        [(111, 112, "acquired", 2), (113, 119, "acknowledged", 1), (120, 120, "acquired", 1)],
    )
    # Acknowledge 111, 112 -> SPSO 120.
    out.append(ack(sp, B, 111, 112, ACC, now=31_400))
    assert state(sp) == (120, 121, [(120, 120, "acquired", 1)])
    return out, snapshot_after_timeout


def test_seed_example_as_deltas() -> None:
    sp = sp_new(checkpoint_when_smaller=False)
    steps, _ = run_seed_example(sp)
    assert steps == [
        # The seed's checkpoint at "offset 130" (its StartOffset 110 there is a typo for 100).
        [checkpoint(1, 100, 100)],
        [delta(1, (100, 109, ACK_, 1))],  # offset 131
        [delta(2, (110, 110, AV, 1))],  # offset 132: the recorded SPEO is 111 now
        [delta(3, (111, 118, AV, 0), (119, 119, ACK_, 1))],  # offset 133
        [delta(4, (111, 112, AV, 1))],  # offset 134: lock timeout
        [delta(5, (113, 118, ACK_, 1))],  # offset 135
        [delta(6, (110, 110, ACK_, 2))],  # offset 136
        [delta(7, (111, 112, ACK_, 2))],  # offset 137
    ]
    records = [r for step in steps for r in step]
    # Replaying them: SPSO 120 and nothing recorded after it (120's first delivery is not).
    again = replay(records)
    assert again.durable_view() == sp.durable_view() == durable(120, 120)
    assert (again.start_offset, again.end_offset, again.in_flight()) == (120, 120, [])


def test_seed_checkpoint_example_is_the_durable_view() -> None:
    """The seed's SHARE_CHECKPOINT for "SPSO=110, SPEO=121, 110 acquired (2), 111-112 available
    (1), 113-118 acquired (1), 119 acknowledged, 120 acquired (1)" records Acquired as
    Available with delivery count - 1; it replays to the same durable view as the live state."""
    sp = sp_new(checkpoint_when_smaller=False)
    _, after_timeout = run_seed_example(sp)
    seed = checkpoint(
        1,
        110,
        121,
        (110, 110, AV, 1),
        (111, 112, AV, 1),
        (113, 118, AV, 0),
        (119, 119, ACK_, 1),
        (120, 120, AV, 0),
    )
    assert replay([seed]).durable_view() == after_timeout
    # Normalized: equal neighbours merged, the trailing first delivery (120) trimmed.
    assert after_timeout == durable(110, 120, (110, 112, AV, 1), (113, 118, AV, 0), (119, 119, ACK_, 1))


def test_seed_example_alternative_checkpoint() -> None:
    """The seed's "or alternatively, taking a new checkpoint": the 7th write of the epoch is a checkpoint
    (epoch 2, SPSO 120, nothing recorded), with tombstones for the six deltas it supersedes."""
    sp = sp_new(checkpoint_when_smaller=False, checkpoint_every_deltas=6)
    steps, _ = run_seed_example(sp)
    assert steps[-1] == [checkpoint(2, 120, 120)] + [
        (R.ShareDeltaKey(G, TID, 0, 1, s), None) for s in range(1, 7)
    ]
    records = [r for step in steps for r in step]
    assert replay(records).durable_view() == sp.durable_view()
    assert replay(compact(records)).durable_view() == sp.durable_view()
    assert compact(records) == [checkpoint(2, 120, 120)]


def test_default_policy_checkpoints_when_smaller() -> None:
    """With the default policy an acknowledgement that empties the window writes a checkpoint
    (no state batches) rather than a one-batch delta."""
    sp = sp_new()
    sp.initialize()
    sp.acquire(A, [(100, 109)], 500, now=0)
    assert ack(sp, A, 100, 109, ACC) == [checkpoint(2, 110, 110)]
    sp.acquire(A, [(110, 119)], 500, now=0)
    assert ack(sp, A, 112, 112, ACC) == [delta(1, (110, 111, AV, 0), (112, 112, ACK_, 1), epoch=2)]


def compact(records: list[R.ShareRecord]) -> list[R.ShareRecord]:
    """Log compaction: the newest record per key, in log order; tombstoned delta keys dropped."""
    last: dict[object, int] = {}
    for i, (k, _) in enumerate(records):
        last[k] = i
    return [
        (k, v)
        for i, (k, v) in enumerate(records)
        if last[k] == i and not (v is None and isinstance(k, R.ShareDeltaKey))
    ]


def stepped(sp: SharePartition, records: list[R.ShareRecord]) -> list[R.ShareRecord]:
    """Check that replaying everything written so far reproduces the live durable view."""
    assert replay(records).durable_view() == sp.durable_view()
    assert replay(compact(records)).durable_view() == sp.durable_view()
    return records


# --- delivery ----------------------------------------------------------------------------------
def test_release_redelivers_with_a_higher_delivery_count() -> None:
    sp = sp_new()
    log = sp.initialize()
    assert sp.acquire(A, [(100, 104)], 500, 0).acquired == [(100, 104, 1)]
    log += ack(sp, A, 100, 104, REL, REL, ACC, REL, REL)
    assert sp.next_fetch_offset() == 100
    assert sp.acquire(B, [(100, 104)], 500, 10).acquired == [(100, 101, 2), (103, 104, 2)]
    assert sp.acknowledgements == {"release": 4, "accept": 1}
    stepped(sp, log)


def test_reject_is_never_redelivered() -> None:
    sp = sp_new()
    log = sp.initialize()
    sp.acquire(A, [(100, 104)], 500, 0)
    log += ack(sp, A, 100, 104, REL, REJ, REL, REL, REL)
    assert sp.state_of(101).state == RecordState.ARCHIVED
    assert sp.acquire(A, [(100, 104)], 500, 10).acquired == [(100, 100, 2), (102, 104, 2)]
    assert sp.acknowledge(A, [(100, 104, [REL])], 20)[0] == E.INVALID_RECORD_STATE  # 101 is archived
    err, records, _ = sp.acknowledge(A, [(100, 100, [REL]), (102, 104, [REL])], 20)
    assert err == E.NONE
    log += records
    assert sp.acquire(B, [(100, 104)], 500, 20).acquired == [(100, 100, 3), (102, 104, 3)]
    stepped(sp, log)


def test_delivery_count_limit_archives_a_poison_record() -> None:
    sp = sp_new(delivery_count_limit=3)
    log = sp.initialize()
    for n in (1, 2):
        assert sp.acquire(A, [(100, 104)], 500, 0).acquired == [(100, 104, n)]
        log += ack(sp, A, 100, 104, REL)
    # The third delivery is the last one: such a record is delivered alone (Kafka 4.x), so a
    # poison record cannot take its neighbours down with it.
    assert sp.acquire(A, [(100, 104)], 500, 0).acquired == [(100, 100, 3)]
    assert sp.acquire(B, [(100, 104)], 500, 0).acquired == [(101, 101, 3)]
    log += ack(sp, B, 101, 101, ACC)
    log += ack(sp, A, 100, 100, REL)  # at the limit: archived, not redelivered
    assert sp.state_of(100) is None and sp.start_offset == 102
    assert log[-1] == delta(4, (100, 100, ARC, 3))
    # The lock timeout archives too.
    assert sp.acquire(A, [(100, 104)], 500, 1_000).acquired == [(102, 102, 3)]
    log += sp.on_timer(1_000 + LOCK)
    assert sp.start_offset == 103 and sp.next_fetch_offset() == 103
    stepped(sp, log)


def test_no_isolation_with_a_limit_of_two() -> None:
    sp = sp_new(delivery_count_limit=2)
    sp.initialize()
    sp.acquire(A, [(100, 104)], 500, 0)
    ack(sp, A, 100, 104, REL)
    assert sp.acquire(A, [(100, 104)], 500, 0).acquired == [(100, 104, 2)]
    ack(sp, A, 100, 104, REL)
    assert (sp.start_offset, sp.end_offset, sp.in_flight()) == (105, 105, [])


def test_lock_timeout_redelivers_to_another_member() -> None:
    sp = sp_new()
    log = sp.initialize()
    sp.acquire(A, [(100, 109)], 500, 0)
    assert sp.next_deadline() == LOCK
    assert sp.on_timer(LOCK - 1) == [] and sp.next_fetch_offset() == 110
    log += sp.on_timer(LOCK)
    assert log[-1] == delta(1, (100, 109, AV, 1))
    assert sp.next_deadline() is None
    assert sp.acquire(B, [(100, 109)], 500, LOCK + 1).acquired == [(100, 109, 2)]
    err, _, _ = sp.acknowledge(A, [(100, 109, [ACC])], LOCK + 2)
    assert err == E.INVALID_RECORD_STATE
    log += ack(sp, B, 100, 109, ACC)
    assert sp.start_offset == 110
    stepped(sp, log)


def test_renew_restarts_the_lock() -> None:
    sp = sp_new()
    sp.initialize()
    sp.acquire(A, [(100, 109)], 500, 0)
    err, records, counts = sp.acknowledge(A, [(100, 104, [RENEW])], 20_000)
    assert (err, records, counts) == (E.NONE, [], {RENEW: 5})
    sp.on_timer(LOCK)
    assert [(b.first_offset, b.last_offset, b.state) for b in sp.in_flight()] == [
        (100, 104, RecordState.ACQUIRED),
        (105, 109, RecordState.AVAILABLE),
    ]
    assert sp.next_deadline() == 20_000 + LOCK


def test_member_leaving_gives_records_back_uncounted() -> None:
    """Kafka's releaseAcquiredRecords decrements the delivery count (the records may never have
    reached the consumer); the durable form is unchanged, so nothing is written."""
    sp = sp_new()
    log = sp.initialize()
    sp.acquire(A, [(100, 104)], 500, 0)
    log += ack(sp, A, 100, 100, REL)
    sp.acquire(A, [(100, 100)], 500, 0)  # 100: delivery 2
    sp.acquire(B, [(105, 109)], 500, 0)
    assert sp.release_member(A, 5) == []
    assert sp.acquire(B, [(100, 104)], 500, 10).acquired == [(100, 100, 2), (101, 104, 1)]
    assert [b.member_id for b in sp.in_flight()] == [B, B, B]
    stepped(sp, log)


# --- acknowledgement errors --------------------------------------------------------------------
@pytest.mark.parametrize(
    ("member", "batches", "error"),
    [
        (B, [(100, 104, [ACC])], E.INVALID_RECORD_STATE),  # another member's records
        (A, [(100, 106, [ACC])], E.INVALID_RECORD_STATE),  # 105-106 are available
        (A, [(110, 110, [ACC])], E.INVALID_RECORD_STATE),  # 110 is acknowledged
        (A, [(100, 100, [ACC]), (110, 110, [ACC])], E.INVALID_RECORD_STATE),  # all or nothing
        (A, [(111, 112, [ACC])], E.INVALID_REQUEST),  # past SPEO (past acquired records)
        (A, [(100, 101, [ACC, ACC, ACC])], E.INVALID_REQUEST),  # types neither 1 nor per offset
        (A, [(100, 101, [])], E.INVALID_REQUEST),
        (A, [(100, 100, [5])], E.INVALID_REQUEST),  # unknown type
        (A, [(101, 100, [ACC])], E.INVALID_REQUEST),  # first > last
        (A, [(102, 103, [ACC]), (100, 101, [ACC])], E.INVALID_REQUEST),  # out of order
        (A, [(100, 102, [ACC]), (102, 103, [ACC])], E.INVALID_REQUEST),  # overlapping
    ],
)
def test_invalid_acknowledgements_change_nothing(member: str, batches: list, error: int) -> None:
    sp = sp_new()
    sp.initialize()
    sp.acquire(A, [(100, 104)], 500, 0)
    sp.acquire(A, [(105, 109), (110, 110)], 500, 0)
    ack(sp, A, 105, 106, REL)
    ack(sp, A, 110, 110, ACC)
    before = (sp.start_offset, sp.end_offset, sp.in_flight(), sp.next_deadline(), sp.delta_seq)
    assert sp.acknowledge(member, batches, 1) == (error, [], {})
    assert (sp.start_offset, sp.end_offset, sp.in_flight(), sp.next_deadline(), sp.delta_seq) == before
    assert sp.acknowledgements == {"release": 2, "accept": 1}


def test_acknowledgements_below_spso_are_skipped() -> None:
    """As Kafka: a batch wholly below SPSO is skipped, the part of one below SPSO ignored."""
    sp = sp_new()
    sp.initialize()
    sp.acquire(A, [(100, 109)], 500, 0)
    ack(sp, A, 100, 104, ACC)
    assert sp.start_offset == 105
    err, _, counts = sp.acknowledge(A, [(90, 99, [ACC]), (100, 106, [ACC])], 0)
    assert (err, counts) == (E.NONE, {ACC: 2})
    assert sp.start_offset == 107
    assert sp.acknowledge(A, [(100, 104, [REJ])], 0) == (E.NONE, [], {})


# --- acquisition limits, gaps --------------------------------------------------------------------
def test_max_records_is_a_soft_limit_on_whole_batches() -> None:
    sp = sp_new()
    sp.initialize()
    batches = [(100, 104), (105, 109), (110, 114)]
    assert sp.acquire(A, batches, 7, 0).acquired == [(100, 109, 1)]
    assert sp.acquire(B, [(110, 114)], 1, 0).acquired == [(110, 114, 1)]
    assert sp.acquire(B, [(115, 119)], 0, 0).acquired == []


def test_max_record_locks_bounds_acquisition() -> None:
    sp = sp_new(max_record_locks=12)
    sp.initialize()
    batches = [(100, 104), (105, 109), (110, 114), (115, 119)]
    assert sp.acquire(A, batches, 500, 0).acquired == [(100, 111, 1)]  # cut inside a batch
    assert not sp.can_acquire()
    assert sp.acquire(A, [(110, 114), (115, 119)], 500, 0).acquired == []
    ack(sp, A, 100, 104, REL)
    assert sp.can_acquire() and sp.next_fetch_offset() == 100
    # Records inside the window can still be acquired, new ones cannot.
    assert sp.acquire(B, batches, 500, 0).acquired == [(100, 104, 2)]
    ack(sp, A, 105, 109, ACC)
    assert sp.acquire(B, [(110, 114), (115, 119)], 500, 0).acquired == []
    ack(sp, B, 100, 104, ACC)
    assert sp.start_offset == 110
    assert sp.acquire(B, [(110, 114), (115, 119)], 500, 0).acquired == [(112, 119, 1)]


def test_gaps_between_log_batches_are_never_handed_out() -> None:
    sp = sp_new()
    log = sp.initialize()
    acquired, records = sp.acquire(A, [(100, 102), (106, 108), (109, 109)], 500, 0)
    assert acquired == [(100, 102, 1), (106, 109, 1)] and records == []
    assert sp.state_of(104).state == RecordState.ARCHIVED
    # An acknowledgement may span the gap: the gap is ignored, not counted.
    err, records, counts = sp.acknowledge(A, [(100, 109, [ACC])], 0)
    assert (err, counts) == (E.NONE, {ACC: 7})
    log += records
    assert (sp.start_offset, sp.end_offset) == (110, 110)
    stepped(sp, log)


def test_a_leading_gap_moves_spso_durably() -> None:
    sp = sp_new(checkpoint_when_smaller=False)
    log = sp.initialize()
    acquired, records = sp.acquire(A, [(105, 109)], 500, 0)
    assert acquired == [(105, 109, 1)]
    assert records == [delta(1, (100, 104, ARC, 0))]
    log += records
    assert sp.start_offset == 105
    stepped(sp, log)


def test_released_records_compacted_away_are_archived() -> None:
    """Kafka's maybeArchiveStaleBatches: an Available record the log no longer has (the fetch
    from the next fetch offset returns a later batch) is archived, not delivered."""
    sp = sp_new()
    log = sp.initialize()
    sp.acquire(A, [(100, 104), (105, 109)], 500, 0)
    log += ack(sp, A, 100, 109, REL, REL, ACC, REL, ACC, ACC, ACC, ACC, ACC, REL)
    assert sp.next_fetch_offset() == 100
    acquired, records = sp.acquire(B, [(103, 103), (109, 109)], 500, 1)  # 100-101 compacted
    assert acquired == [(103, 103, 2), (109, 109, 2)]
    log += records
    assert sp.start_offset == 103
    stepped(sp, log)


def test_acquiring_many_batches_together_is_one_range() -> None:
    sp = sp_new(start=0)
    sp.initialize()
    acquired, _ = sp.acquire(A, [(o, o) for o in range(500)], 500, 0)
    assert acquired == [(0, 499, 1)]
    assert len(sp.in_flight()) == 1
    err, _, _ = sp.acknowledge(A, [(0, 499, [ACC] * 500)], 0)
    assert err == E.NONE and sp.start_offset == 500 and sp.in_flight() == []


# --- start offset --------------------------------------------------------------------------------
def test_move_start_drops_everything_below_the_log_start() -> None:
    sp = sp_new()
    log = sp.initialize()
    sp.acquire(A, [(100, 109)], 500, 0)
    log += ack(sp, A, 107, 107, ACC)
    assert sp.move_start(90) == []
    log += sp.move_start(105)
    assert (sp.start_offset, sp.end_offset) == (105, 110)
    assert sp.next_deadline() == LOCK  # 105-106, 108-109 still held
    err, records, counts = sp.acknowledge(A, [(100, 106, [ACC])], 1)  # 100-104: skipped
    assert (err, counts) == (E.NONE, {ACC: 2})
    log += records
    assert sp.start_offset == 108
    stepped(sp, log + sp.on_timer(LOCK))
    log += sp.move_start(200)
    assert (sp.start_offset, sp.end_offset, sp.in_flight(), sp.next_deadline()) == (200, 200, [], None)
    stepped(sp, log)


def test_reset_start_writes_a_checkpoint() -> None:
    sp = sp_new(checkpoint_when_smaller=False)
    log = sp.initialize()
    sp.acquire(A, [(100, 109)], 500, 0)
    log += ack(sp, A, 101, 101, ACC)
    log += ack(sp, A, 103, 103, ACC)
    records = sp.reset_start(50)
    assert records == [checkpoint(2, 50, 50)] + [(R.ShareDeltaKey(G, TID, 0, 1, s), None) for s in (1, 2)]
    assert (sp.start_offset, sp.end_offset, sp.in_flight(), sp.next_deadline()) == (50, 50, [], None)
    stepped(sp, log + records)


# --- records and replay --------------------------------------------------------------------------
def test_fresh_partition_without_initialize_checkpoints_first() -> None:
    sp = sp_new()
    _, records = sp.acquire(A, [(100, 109)], 500, 0)
    assert records == [checkpoint(1, 100, 100)]
    assert sp.initialize() == []


def test_applying_its_own_records_changes_nothing() -> None:
    sp = sp_new()
    log = sp.initialize()
    sp.acquire(A, [(100, 109)], 500, 0)
    log += ack(sp, A, 103, 103, REL)
    before = sp.in_flight()
    for k, v in log:
        sp.apply(k, v)
    assert sp.in_flight() == before


def test_replayed_partition_carries_on() -> None:
    """After a restart: Acquired records are Available again (minus the lost delivery), and the
    delta sequence continues, so no delta key is written twice."""
    sp = sp_new(checkpoint_when_smaller=False)
    log = sp.initialize()
    sp.acquire(A, [(100, 109)], 500, 0)
    log += ack(sp, A, 103, 103, ACC)
    again = replay(log, checkpoint_when_smaller=False)
    assert (again.checkpoint_epoch, again.delta_seq) == (1, 1)
    assert again.next_fetch_offset() == 100
    assert again.acquire(B, [(100, 109)], 500, 0).acquired == [(100, 102, 1), (104, 109, 1)]
    records = ack(again, B, 100, 100, ACC)
    assert records[0][0] == R.ShareDeltaKey(G, TID, 0, 1, 2)
    stepped(again, log + records)


def test_delete_records_tombstones_everything() -> None:
    sp = sp_new(checkpoint_when_smaller=False)
    log = sp.initialize()
    sp.acquire(A, [(100, 109)], 500, 0)
    log += ack(sp, A, 103, 103, ACC)
    tombstones = sp.delete_records()
    assert tombstones == [(R.ShareCheckpointKey(G, TID, 0), None), (R.ShareDeltaKey(G, TID, 0, 1, 1), None)]
    assert SharePartition.from_records(G, TID, 0, SharePartitionConfig(), log + tombstones) is None
    assert compact(log + tombstones) == [(R.ShareCheckpointKey(G, TID, 0), None)]


# --- stateful property test -------------------------------------------------------------------------
MEMBERS = ("m1", "m2", "m3")
ACQ = RecordState.ACQUIRED


def check_structure(sp: SharePartition) -> None:
    runs = sp.in_flight()
    pos = sp.start_offset
    for i, r in enumerate(runs):
        assert r.first_offset == pos and r.last_offset >= r.first_offset
        if i:
            p = runs[i - 1]
            assert (p.state, p.delivery_count, p.member_id, p.deadline) != (
                r.state,
                r.delivery_count,
                r.member_id,
                r.deadline,
            ), "adjacent equal runs are merged"
        assert (r.state == ACQ) == (r.member_id is not None) == (r.deadline is not None)
        pos = r.last_offset + 1
    assert pos == sp.end_offset
    assert not runs or runs[0].state not in (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)
    deadlines = [r.deadline for r in runs if r.state == ACQ]
    assert sp.next_deadline() == (min(deadlines) if deadlines else None)


class SharePartitionMachine(RuleBasedStateMachine):
    """Random operations against a per-offset model; after every step the records written
    (encoded and decoded) replay, as written and compacted, to the live durable view."""

    def __init__(self) -> None:
        super().__init__()
        self.sp: SharePartition
        self.dir = Path(tempfile.mkdtemp(prefix="kcoord-share-replay-"))

    def teardown(self) -> None:
        if hasattr(self, "h"):
            self.h.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    @initialize(
        limit=st.integers(1, 5),
        locks=st.integers(3, 40),
        every=st.integers(1, 8),
        smaller=st.booleans(),
        layout=st.lists(st.tuples(st.integers(0, 3), st.integers(1, 6)), min_size=1, max_size=30),
    )
    def setup(self, limit: int, locks: int, every: int, smaller: bool, layout: list[tuple[int, int]]) -> None:
        self.cfg = SharePartitionConfig(
            record_lock_duration_ms=LOCK,
            delivery_count_limit=limit,
            max_record_locks=locks,
            checkpoint_every_deltas=every,
            checkpoint_when_smaller=smaller,
        )
        self.batches: list[tuple[int, int]] = []
        pos = 0
        for gap, size in layout:
            pos += gap
            self.batches.append((pos, pos + size - 1))
            pos += size
        self.log_offsets = {o for a, b in self.batches for o in range(a, b + 1)}
        self.log_start = 0
        self.now = 0
        self.sp = SharePartition(G, TID, 0, self.cfg, 0)
        self.log: list[tuple[bytes, bytes | None]] = []
        self.m: dict[int, list] = {}  # offset -> [state, delivery count, member, deadline]
        self.spso = self.speo = 0
        self.h = Harness(self.dir / "log", segment_bytes=2048, new_state=lambda: share_store(self.cfg))
        self.last_state_offset = -1  # log offset of the partition's last state record (BackOffset)

        def install(store: object, now: int) -> Outcome:
            group = self.h.state.kind(ShareGroups).get_or_create(G)
            assert group is not None
            group.partitions[(TID, 0)] = self.sp
            return Outcome()

        self.h.run_op(install)
        self.persist(self.sp.initialize())

    # --- helpers ------------------------------------------------------------------------------
    def persist(self, records: list[R.ShareRecord]) -> None:
        """The records of one operation, as the runtime takes them: applied through the store's
        replay (to the live share-partition, which changes nothing) and appended as one batch."""
        for k, v in records:
            kb, vb = R.encode_key(k), R.encode_value(v)
            assert R.decode_share_record(kb, vb) == (k, v)
            self.log.append((kb, vb))
        if not records:
            return
        end = self.h.log.log_end_offset
        self.h.run_op(lambda _store, _now: Outcome(records=list(records)))
        for offset, _key, value in self.h.records():
            if offset < end:
                continue
            if isinstance(value, R.ShareDeltaValue):  # the seed's chain: back to the previous record
                assert value.back_offset == self.last_state_offset, (offset, value)
            if value is not None:  # tombstones of superseded deltas are not state records
                self.last_state_offset = offset

    def replayed(self) -> SharePartition:
        """The share-partition as a broker restarted now would load it from the log."""
        group = self.h.replay().kind(ShareGroups).get(G)
        assert group is not None and (TID, 0) in group.partitions
        return group.partitions[(TID, 0)]

    def decoded(self) -> list[R.ShareRecord]:
        return [R.decode_share_record(k, v) for k, v in self.log]

    def advance(self) -> None:
        while self.spso < self.speo and self.m[self.spso][0] in (
            RecordState.ACKNOWLEDGED,
            RecordState.ARCHIVED,
        ):
            del self.m[self.spso]
            self.spso += 1
        self.speo = max(self.speo, self.spso)

    def release(self, o: int) -> None:
        st_ = self.m[o]
        st_[0] = RecordState.ARCHIVED if st_[1] >= self.cfg.delivery_count_limit else RecordState.AVAILABLE
        st_[2] = st_[3] = None

    def held(self, member: str) -> list[int]:
        return [o for o, s in self.m.items() if s[0] == ACQ and s[2] == member]

    # --- rules --------------------------------------------------------------------------------
    @rule(member=st.sampled_from(MEMBERS), max_records=st.integers(0, 12), n=st.integers(1, 6))
    def fetch(self, member: str, max_records: int, n: int) -> None:
        sp = self.sp
        nfo = sp.next_fetch_offset()
        batches = [b for b in self.batches if b[0] >= self.log_start and b[1] >= nfo][:n]
        given = {o for a, b in batches for o in range(a, b + 1)}
        old_speo, cap = self.speo, self.spso + self.cfg.max_record_locks
        acquired, records = sp.acquire(member, batches, max_records, self.now)
        self.persist(records)
        if max_records > 0 and batches and sp.end_offset < cap:
            pass  # something may or may not be acquirable; the model below checks what was
        got = set()
        for a, b, dc in acquired:
            assert 1 <= dc <= self.cfg.delivery_count_limit
            for o in range(a, b + 1):
                assert o in given, "only offsets of the fetched batches are handed out"
                if o < old_speo:
                    assert self.m[o][0] == RecordState.AVAILABLE and self.m[o][1] == dc - 1
                else:
                    assert dc == 1 and o < cap
                self.m[o] = [ACQ, dc, member, self.now + LOCK]
                got.add(o)
        for o in range(old_speo, sp.end_offset):
            if o not in got:
                assert o not in self.log_offsets or o < self.log_start
                self.m[o] = [RecordState.ARCHIVED, 0, None, None]
        self.speo = max(self.speo, sp.end_offset)
        for o in range(max(self.spso, sp.start_offset), old_speo):
            live = sp.state_of(o)
            if (
                self.m[o][0] == RecordState.AVAILABLE
                and live is not None
                and live.state == RecordState.ARCHIVED
            ):
                assert o not in given  # compacted away since its last delivery
                self.m[o][0] = RecordState.ARCHIVED
        self.advance()

    @rule(member=st.sampled_from(MEMBERS), data=st.data())
    def acknowledge(self, member: str, data: st.DataObject) -> None:
        held = self.held(member)
        if held and data.draw(st.booleans()):
            a = data.draw(st.sampled_from(sorted(held)))
            b = a
            while b + 1 in self.m and (
                (self.m[b + 1][0] == ACQ and self.m[b + 1][2] == member)
                or (self.m[b + 1][0] == RecordState.ARCHIVED and self.m[b + 1][1] == 0)
            ):
                b += 1
            b = data.draw(st.integers(a, b))
        else:
            a = data.draw(st.integers(max(self.spso - 3, 0), self.speo + 2))
            b = data.draw(st.integers(a, a + 6))
        types = data.draw(
            st.one_of(
                st.lists(st.integers(0, 4), min_size=1, max_size=1),
                st.lists(st.integers(0, 4), min_size=b - a + 1, max_size=b - a + 1),
            )
        )
        expected = self.expected_ack_error(member, a, b)
        before = (self.sp.start_offset, self.sp.end_offset, self.sp.in_flight())
        err, records, counts = self.sp.acknowledge(member, [(a, b, types)], self.now)
        assert err == expected, (a, b, types)
        self.persist(records)
        if err:
            assert records == [] and counts == {}
            assert (self.sp.start_offset, self.sp.end_offset, self.sp.in_flight()) == before
            return
        n = 0
        for o in range(max(a, self.spso), b + 1):
            s = self.m[o]
            if s[0] == RecordState.ARCHIVED and s[1] == 0:
                continue
            n += 1
            t = types[0] if len(types) == 1 else types[o - a]
            if t == ACC:
                self.m[o] = [RecordState.ACKNOWLEDGED, s[1], None, None]
            elif t == REL:
                self.release(o)
            elif t == RENEW:
                s[3] = self.now + LOCK
            else:
                self.m[o] = [RecordState.ARCHIVED, s[1], None, None]
        assert sum(counts.values()) == n
        self.advance()

    def expected_ack_error(self, member: str, a: int, b: int) -> int:
        if b < self.spso:
            return E.NONE
        if b >= self.speo:
            return E.INVALID_REQUEST
        for o in range(max(a, self.spso), b + 1):
            s = self.m[o]
            if not (s[0] == ACQ and s[2] == member) and not (s[0] == RecordState.ARCHIVED and s[1] == 0):
                return E.INVALID_RECORD_STATE
        return E.NONE

    @rule(dt=st.sampled_from([1, 1_000, LOCK // 2, LOCK]))
    def tick(self, dt: int) -> None:
        self.now += dt
        self.h.clock.advance(dt)
        self.persist(self.sp.on_timer(self.now))
        for o, s in list(self.m.items()):
            if s[0] == ACQ and s[3] <= self.now:
                self.release(o)
        self.advance()

    @rule(member=st.sampled_from(MEMBERS))
    def member_leaves(self, member: str) -> None:
        self.persist(self.sp.release_member(member, self.now))
        for o in self.held(member):
            s = self.m[o]
            self.m[o] = [RecordState.AVAILABLE, s[1] - 1, None, None]

    @rule(k=st.integers(1, 4))
    def retention(self, k: int) -> None:
        later = [a for a, _ in self.batches if a > self.log_start]
        if not later:
            return
        self.log_start = later[min(k, len(later)) - 1]
        self.persist(self.sp.move_start(self.log_start))
        if self.log_start > self.spso:
            for o in range(self.spso, self.log_start):
                self.m.pop(o, None)
            self.spso = self.log_start
            self.speo = max(self.speo, self.spso)
            self.advance()

    @rule(delete_retention=st.sampled_from([0, 86_400_000]))
    def compact(self, delete_retention: int) -> None:
        """The real log cleaner over the real log (the model's records stay as written)."""
        self.h.compact(delete_retention)

    @rule()
    def restart(self) -> None:
        again = SharePartition.from_records(G, TID, 0, self.cfg, self.decoded())
        assert again is not None
        assert again.durable_view() == self.sp.durable_view()
        group = self.h.restart().kind(ShareGroups).get(G)
        assert group is not None
        again = group.partitions[(TID, 0)]
        assert again.durable_view() == self.sp.durable_view()
        self.sp = again
        for o in list(self.m):
            s = self.m[o]
            if s[0] == ACQ:
                self.m[o] = [RecordState.AVAILABLE, s[1] - 1, None, None]
            if o >= again.end_offset:
                assert self.m[o][1] == 0 and self.m[o][0] != RecordState.ACKNOWLEDGED
                del self.m[o]
        self.speo = again.end_offset

    @rule(offset=st.integers(0, 60))
    def alter_offsets(self, offset: int) -> None:
        self.persist(self.sp.reset_start(offset))
        self.m = {}
        self.spso = self.speo = offset

    # --- invariants ---------------------------------------------------------------------------
    @invariant()
    def matches_model_and_replays(self) -> None:
        sp = self.sp
        check_structure(sp)
        assert (sp.start_offset, sp.end_offset) == (self.spso, self.speo)
        live = {}
        for r in sp.in_flight():
            for o in range(r.first_offset, r.last_offset + 1):
                live[o] = [r.state, r.delivery_count, r.member_id, r.deadline]
        assert live == self.m
        view = sp.durable_view()
        records = self.decoded()
        for again in [
            *(SharePartition.from_records(G, TID, 0, self.cfg, log) for log in (records, compact(records))),
            self.replayed(),
        ]:
            assert again is not None
            assert again.durable_view() == view
            assert (again.checkpoint_epoch, again.delta_seq) == (sp.checkpoint_epoch, sp.delta_seq)
            assert again._durable_end == sp._durable_end


TestSharePartitionMachine = SharePartitionMachine.TestCase
TestSharePartitionMachine.settings = settings(
    max_examples=100, stateful_step_count=40, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


def test_record_limit_mode_acquires_exactly_max_records() -> None:
    """ShareFetch v2 ShareAcquireMode=record_limit: a hard limit that splits batches."""
    sp = SharePartition("g", uuid.uuid4(), 0, SharePartitionConfig(), 0)
    got = sp.acquire("m", [(0, 9), (10, 19)], 4, 0, strict=True)
    assert [(a.first_offset, a.last_offset) for a in got.acquired] == [(0, 3)]
    assert sp.next_fetch_offset() == 4  # the rest of the batch was never handed out
    soft = sp.acquire("m", [(0, 9), (10, 19)], 4, 0)
    assert [(a.first_offset, a.last_offset) for a in soft.acquired] == [(4, 9)]  # whole batch: soft limit
    sp.acknowledge("m", [(0, 9, [2])], 0)  # release all
    again = sp.acquire("n", [(0, 9), (10, 19)], 3, 0, strict=True)
    assert [(a.first_offset, a.last_offset, a.delivery_count) for a in again.acquired] == [(0, 2, 2)]
