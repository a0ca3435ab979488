"""Idempotent-producer checks (Kafka's ProducerStateManager / ProducerAppendInfo rules)."""

from __future__ import annotations

import pytest

from kcoord.dataplane.producer_state import CACHED_BATCHES, INT32_MAX, ProducerStateTable
from kcoord.protocol import records
from kcoord.protocol.errors import ErrorCode, KafkaError
from tests.wire import build_batch

PID = 4242


class Partition:
    """A producer-state table plus a log-end counter, the way Produce drives them."""

    def __init__(self) -> None:
        self.table = ProducerStateTable()
        self.next_offset = 0

    def produce(self, seq: int, count: int = 1, epoch: int = 0, pid: int = PID, ts: int = 1000) -> int:
        """Returns the batch's first offset (the original's for a duplicate); raises KafkaError."""
        h = records.read_header(
            build_batch(count=count, producer_id=pid, producer_epoch=epoch, base_sequence=seq, timestamp=ts)
        )
        dup = self.table.validate([h])
        if dup is not None:
            return dup.first_offset
        h.base_offset = self.next_offset
        self.next_offset = h.next_offset
        self.table.update(h, h.max_timestamp)
        return h.base_offset


def code_of(excinfo: pytest.ExceptionInfo[KafkaError]) -> int:
    return excinfo.value.code


def test_in_sequence_batches_are_appended() -> None:
    p = Partition()
    assert p.produce(0, count=3) == 0
    assert p.produce(3, count=2) == 3
    assert p.produce(5) == 5


def test_duplicates_get_the_original_offsets() -> None:
    p = Partition()
    offsets = [p.produce(seq, count=2) for seq in range(0, 12, 2)]
    assert offsets == [0, 2, 4, 6, 8, 10]
    # The last five batches are remembered (Kafka's NUM_BATCHES_TO_RETAIN).
    assert CACHED_BATCHES == 5
    for seq, off in zip(range(2, 12, 2), offsets[1:], strict=True):
        assert p.produce(seq, count=2) == off
    assert p.next_offset == 12
    # Older than the last five: not recognisable, hence out of order.
    with pytest.raises(KafkaError) as e:
        p.produce(0, count=2)
    assert code_of(e) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


def test_a_partial_overlap_is_not_a_duplicate() -> None:
    p = Partition()
    p.produce(0, count=3)
    with pytest.raises(KafkaError) as e:
        p.produce(0, count=2)
    assert code_of(e) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


@pytest.mark.parametrize("seq", [3, 4, 100])
def test_gap_is_out_of_order(seq: int) -> None:
    p = Partition()
    p.produce(0, count=2)
    with pytest.raises(KafkaError) as e:
        p.produce(seq)
    assert code_of(e) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert p.produce(2) == 2  # state untouched by the refused batch


def test_old_epoch_is_fenced() -> None:
    p = Partition()
    p.produce(0, epoch=3)
    with pytest.raises(KafkaError) as e:
        p.produce(1, epoch=2)
    assert code_of(e) == ErrorCode.INVALID_PRODUCER_EPOCH
    with pytest.raises(KafkaError) as e:
        p.produce(0, epoch=2)  # also a "duplicate" of nothing at that epoch
    assert code_of(e) == ErrorCode.INVALID_PRODUCER_EPOCH


def test_new_epoch_must_start_at_sequence_zero() -> None:
    p = Partition()
    p.produce(0, count=5, epoch=0)
    with pytest.raises(KafkaError) as e:
        p.produce(5, epoch=1)
    assert code_of(e) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert p.produce(0, epoch=1) == 5
    assert p.produce(1, epoch=1) == 6
    # A duplicate must match the epoch too: the same sequence at the old epoch is fenced.
    with pytest.raises(KafkaError) as e:
        p.produce(0, count=5, epoch=0)
    assert code_of(e) == ErrorCode.INVALID_PRODUCER_EPOCH


@pytest.mark.parametrize("seq", [0, 1, 17, INT32_MAX])
def test_unknown_producer_may_start_at_any_sequence(seq: int) -> None:
    p = Partition()
    assert p.produce(seq, epoch=5) == 0
    nxt = 0 if seq == INT32_MAX else seq + 1
    assert p.produce(nxt, epoch=5) == 1


def test_sequence_wraps_after_int32_max() -> None:
    p = Partition()
    p.produce(INT32_MAX - 2)  # unknown producer: any start
    assert p.produce(INT32_MAX - 1, count=2) == 1  # MAX-1, MAX
    assert p.produce(0, count=2) == 3  # wraps to 0
    assert p.produce(2) == 5
    # A batch straddling the wrap is in sequence too, and its duplicate is recognised.
    q = Partition()
    q.produce(INT32_MAX - 5, count=4)  # MAX-5 .. MAX-2
    assert q.produce(INT32_MAX - 1, count=4) == 4  # MAX-1, MAX, 0, 1
    assert q.produce(2) == 8
    assert q.produce(INT32_MAX - 1, count=4) == 4


def test_batches_without_a_producer_id_are_not_checked() -> None:
    table = ProducerStateTable()
    h = records.read_header(build_batch(count=3))
    assert table.validate([h]) is None
    table.update(h, 0)
    assert table.producers == {}


def test_idempotent_batch_without_a_sequence_is_invalid() -> None:
    table = ProducerStateTable()
    h = records.read_header(build_batch(count=1, producer_id=PID, producer_epoch=0, base_sequence=-1))
    with pytest.raises(KafkaError) as e:
        table.validate([h])
    assert code_of(e) == ErrorCode.INVALID_RECORD


def test_several_batches_of_one_producer_in_one_append() -> None:
    table = ProducerStateTable()
    data = build_batch(count=2, producer_id=PID, producer_epoch=0, base_sequence=0) + build_batch(
        count=2, producer_id=PID, producer_epoch=0, base_sequence=2
    )
    hs = list(records.iter_headers(data))
    assert table.validate(hs) is None
    bad = build_batch(count=2, producer_id=PID, producer_epoch=0, base_sequence=0) + build_batch(
        count=2, producer_id=PID, producer_epoch=0, base_sequence=3
    )
    with pytest.raises(KafkaError) as e:
        table.validate(list(records.iter_headers(bad)))
    assert code_of(e) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


def test_producers_are_independent() -> None:
    p = Partition()
    assert p.produce(0, pid=1) == 0
    assert p.produce(0, pid=2) == 1
    assert p.produce(1, pid=1) == 2
    assert p.produce(0, pid=2) == 1  # duplicate of producer 2's batch


def test_expiry_forgets_idle_producers() -> None:
    p = Partition()
    p.produce(0, pid=1, ts=1_000)
    p.produce(0, pid=2, ts=5_000)
    assert p.table.expire(now_ms=10_000, expiration_ms=6_000) == 1
    assert set(p.table.producers) == {2}
    # Producer 1 is unknown again: any sequence is accepted.
    assert p.produce(57, pid=1, ts=10_000) == 2


def test_state_rebuilt_from_log_headers_detects_duplicates() -> None:
    """Partition.rebuild_producer_state replays batch headers through update()."""
    p = Partition()
    for seq in (0, 2, 4):
        p.produce(seq, count=2)
    replayed = ProducerStateTable()
    for seq, base in ((0, 0), (2, 2), (4, 4)):
        h = records.read_header(build_batch(count=2, producer_id=PID, producer_epoch=0, base_sequence=seq))
        h.base_offset = base
        replayed.update(h, h.max_timestamp)
    dup = replayed.validate(
        [records.read_header(build_batch(count=2, producer_id=PID, producer_epoch=0, base_sequence=2))]
    )
    assert dup is not None and (dup.first_offset, dup.last_offset) == (2, 3)
