"""What a transactional write that fails KIP-890 verification is answered, per API and version,
as Kafka answers it (kafka-python's protocol classes, a broker in this process's thread):

- Produce of a partition not in the transaction: INVALID_TXN_STATE up to v10,
  TRANSACTION_ABORTABLE from v11 (KafkaApis: ``apiVersion > 10`` is genericError, and
  AddPartitionsToTxnManager turns TRANSACTION_ABORTABLE into INVALID_TXN_STATE otherwise);
- Produce of a stale epoch: INVALID_PRODUCER_EPOCH (AddPartitionsToTxnManager: producers expect
  it, not PRODUCER_FENCED);
- Produce while the transaction's markers are being written: NOT_ENOUGH_REPLICAS (ReplicaManager
  turns the coordinator's CONCURRENT_TRANSACTIONS into it, which every client retries without a
  metadata refresh);
- TxnOffsetCommit of a group whose ``__consumer_offsets`` partition is not in the transaction:
  INVALID_TXN_STATE up to v3, TRANSACTION_ABORTABLE at v4 (CoordinatorPartitionWriter and
  GroupCoordinator: ``apiVersion >= 4`` is genericError);
- EndTxn retries and KIP-360 InitProducerId with the producer id and epoch (their retries too).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.messages import ApiKey, request_class
from kcoord.transaction.metadata import TransactionMetadata, TransactionState
from kcoord.transaction.records import TransactionLogKey
from tests.integration.test_txn_read_committed import InProcessBroker
from tests.wire import Conn, build_batch

TOPIC = "verified"


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessBroker]:
    b = InProcessBroker(Path(tmp_path_factory.mktemp("txn-verify")))
    try:
        with b.connect() as c:
            c.create_topic(TOPIC, partitions=2)
        yield b
    finally:
        b.stop()


def init_request(c: Conn, tid: str) -> Any:
    return c.request(
        ApiKey.InitProducerId,
        4,
        transactional_id=tid,
        transaction_timeout_ms=60_000,
        producer_id=-1,
        producer_epoch=-1,
    )


def init(c: Conn, tid: str) -> tuple[int, int]:
    r = init_request(c, tid)
    assert r.error_code == 0, r
    return r.producer_id, r.producer_epoch


def add_partition(c: Conn, tid: str, pid: int, epoch: int, partition: int) -> None:
    req = request_class(ApiKey.AddPartitionsToTxn)
    r = c.request(
        ApiKey.AddPartitionsToTxn,
        3,
        v3_and_below_transactional_id=tid,
        v3_and_below_producer_id=pid,
        v3_and_below_producer_epoch=epoch,
        v3_and_below_topics=[req.AddPartitionsToTxnTopic(name=TOPIC, partitions=[partition])],
    )
    assert r.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code == 0, r


def produce(c: Conn, tid: str, pid: int, epoch: int, partition: int, version: int, seq: int = 0) -> int:
    batch = build_batch(
        [(None, b"v", int(time.time() * 1000))],
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        transactional=True,
    )
    req = request_class(ApiKey.Produce)
    td = req.TopicProduceData(
        name=TOPIC, partition_data=[req.TopicProduceData.PartitionProduceData(index=partition, records=batch)]
    )
    r = c.request(ApiKey.Produce, version, transactional_id=tid, acks=-1, timeout_ms=10_000, topic_data=[td])
    return int(r.responses[0].partition_responses[0].error_code)


@pytest.mark.parametrize(
    ("version", "expected"), [(10, ErrorCode.INVALID_TXN_STATE), (11, ErrorCode.TRANSACTION_ABORTABLE)]
)
def test_produce_partition_not_in_transaction(broker: InProcessBroker, version: int, expected: int) -> None:
    tid = f"not-added-{version}"
    with broker.connect() as c:
        pid, epoch = init(c, tid)
        add_partition(c, tid, pid, epoch, 0)
        assert produce(c, tid, pid, epoch, 1, version) == expected
        assert produce(c, tid, pid, epoch, 0, version) == 0


def test_produce_stale_epoch(broker: InProcessBroker) -> None:
    with broker.connect() as c:
        pid, epoch = init(c, "stale")
        add_partition(c, "stale", pid, epoch, 0)
        # A second InitProducerId aborts the ongoing transaction under a bumped epoch; its answer
        # (at once, or to the client's retry after CONCURRENT_TRANSACTIONS) bumps it once more.
        deadline = time.monotonic() + 10
        while (r := init_request(c, "stale")).error_code:
            assert r.error_code == ErrorCode.CONCURRENT_TRANSACTIONS and time.monotonic() < deadline
            time.sleep(0.05)
        assert (r.producer_id, r.producer_epoch) == (pid, epoch + 2)
        assert produce(c, "stale", pid, epoch, 0, 11) == ErrorCode.INVALID_PRODUCER_EPOCH


def test_produce_while_markers_are_written(broker: InProcessBroker) -> None:
    tid = "completing"
    with broker.connect() as c:
        pid, epoch = init(c, tid)
        add_partition(c, tid, pid, epoch, 0)
    store = broker.broker.transactions.state_for(tid)

    def prepare_commit() -> None:
        # The PrepareCommit record applied, its markers not yet written (the marker writer is
        # not told: this transaction stays there).
        meta: TransactionMetadata = store.transactions[tid]
        value = dataclasses.replace(meta.to_value(), transaction_status=int(TransactionState.PREPARE_COMMIT))
        store.replay(TransactionLogKey(tid), value, int(time.time() * 1000))

    broker.call(prepare_commit)
    with broker.connect() as c:
        assert produce(c, tid, pid, epoch, 0, 11) == ErrorCode.NOT_ENOUGH_REPLICAS
        assert produce(c, tid, pid, epoch, 0, 9) == ErrorCode.NOT_ENOUGH_REPLICAS


@pytest.mark.parametrize(
    ("version", "expected"), [(3, ErrorCode.INVALID_TXN_STATE), (4, ErrorCode.TRANSACTION_ABORTABLE)]
)
def test_txn_offset_commit_without_add_offsets(broker: InProcessBroker, version: int, expected: int) -> None:
    tid, group = f"offsets-{version}", f"group-{version}"
    req = request_class(ApiKey.TxnOffsetCommit)
    topics = [
        req.TxnOffsetCommitRequestTopic(
            name=TOPIC,
            partitions=[
                req.TxnOffsetCommitRequestTopic.TxnOffsetCommitRequestPartition(
                    partition_index=0, committed_offset=1, committed_leader_epoch=-1, committed_metadata=""
                )
            ],
        )
    ]

    def commit(c: Conn, pid: int, epoch: int) -> int:
        r = c.request(
            ApiKey.TxnOffsetCommit,
            version,
            transactional_id=tid,
            group_id=group,
            producer_id=pid,
            producer_epoch=epoch,
            generation_id=-1,
            member_id="",
            group_instance_id=None,
            topics=topics,
        )
        return int(r.topics[0].partitions[0].error_code)

    with broker.connect() as c:
        pid, epoch = init(c, tid)
        add_partition(c, tid, pid, epoch, 0)  # a transaction, but not the group's offsets partition
        assert commit(c, pid, epoch) == expected
        r = c.request(
            ApiKey.AddOffsetsToTxn,
            3,
            transactional_id=tid,
            producer_id=pid,
            producer_epoch=epoch,
            group_id=group,
        )
        assert r.error_code == 0
        assert commit(c, pid, epoch) == 0


def test_end_txn_retries_and_kip360_init_producer_id(broker: InProcessBroker) -> None:
    """EndTxn retried after it completed is answered as it was, the other outcome is
    INVALID_TXN_STATE (Kafka's endTransaction, TV1); InitProducerId v3+ naming the producer id and
    epoch (KIP-360, what clients send to bump the epoch after an abortable error) bumps it, a
    retry of it gets the same epoch again (lastProducerEpoch), another epoch or producer id is
    PRODUCER_FENCED (prepareIncrementProducerEpoch, isValidProducerId)."""
    tid = "kip360"

    def end(c: Conn, pid: int, epoch: int, commit: bool) -> int:
        r = c.request(
            ApiKey.EndTxn, 3, transactional_id=tid, producer_id=pid, producer_epoch=epoch, committed=commit
        )
        return int(r.error_code)

    def init_with(c: Conn, pid: int, epoch: int) -> Any:
        deadline = time.monotonic() + 10
        while True:
            r = c.request(
                ApiKey.InitProducerId,
                4,
                transactional_id=tid,
                transaction_timeout_ms=60_000,
                producer_id=pid,
                producer_epoch=epoch,
            )
            # CONCURRENT_TRANSACTIONS while the last transaction's markers are written: retry.
            if r.error_code != ErrorCode.CONCURRENT_TRANSACTIONS or time.monotonic() > deadline:
                return r
            time.sleep(0.02)

    with broker.connect() as c:
        pid, epoch = init(c, tid)
        add_partition(c, tid, pid, epoch, 0)
        assert end(c, pid, epoch, commit=True) == 0
        deadline = time.monotonic() + 10
        while (error := end(c, pid, epoch, commit=True)) == ErrorCode.CONCURRENT_TRANSACTIONS:
            assert time.monotonic() < deadline
            time.sleep(0.02)
        assert error == 0, "a retried commit of a completed commit succeeds"
        assert end(c, pid, epoch, commit=False) == ErrorCode.INVALID_TXN_STATE
        assert end(c, pid, epoch + 1, commit=True) == ErrorCode.PRODUCER_FENCED
        assert end(c, pid + 1000, epoch, commit=True) == ErrorCode.INVALID_PRODUCER_ID_MAPPING

        r = init_with(c, pid, epoch)
        assert (r.error_code, r.producer_id, r.producer_epoch) == (0, pid, epoch + 1)
        r = init_with(c, pid, epoch)  # the same request again: its answer was lost
        assert (r.error_code, r.producer_id, r.producer_epoch) == (0, pid, epoch + 1)
        assert init_with(c, pid, epoch + 5).error_code == ErrorCode.PRODUCER_FENCED
        assert init_with(c, pid + 1000, epoch + 1).error_code == ErrorCode.PRODUCER_FENCED
        r = init_with(c, pid, epoch + 1)
        assert (r.error_code, r.producer_id, r.producer_epoch) == (0, pid, epoch + 2)
