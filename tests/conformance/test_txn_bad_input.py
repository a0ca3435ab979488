"""Bad transactional input over the wire gets Kafka's error and changes nothing.

Every case checks the state afterwards (DescribeTransactions, ListOffsets, OffsetFetch). The
expected codes are Kafka's: LogValidator (control batches from clients), ReplicaManager's
verification with AddPartitionsToTxnManager (a partition not in the transaction), ProducerStateManager
(a stale epoch), TransactionCoordinator (InitProducerId, AddPartitions, EndTxn),
OffsetMetadataManager/GroupMetadataManager (TxnOffsetCommit, OffsetFetch RequireStable),
TransactionStateManager (DescribeTransactions, ListTransactions).
"""

from __future__ import annotations

import time
from typing import Any

from kcoord.protocol import records as batches
from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.messages import ApiKey, request_class
from tests.harness import BrokerProcess
from tests.wire import Conn, build_batch

E = ErrorCode
LATEST = -1


# --- helpers ----------------------------------------------------------------------------------------
def init_pid(c: Conn, tid: str | None, timeout_ms: int = 60_000, version: int = 4) -> Any:
    return c.request(
        ApiKey.InitProducerId,
        version,
        transactional_id=tid,
        transaction_timeout_ms=timeout_ms,
        producer_id=-1,
        producer_epoch=-1,
    )


def add_partitions(c: Conn, tid: str, pid: int, epoch: int, parts: list[tuple[str, int]]) -> list[int]:
    req = request_class(ApiKey.AddPartitionsToTxn)
    topics: dict[str, list[int]] = {}
    for t, p in parts:
        topics.setdefault(t, []).append(p)
    resp = c.request(
        ApiKey.AddPartitionsToTxn,
        3,
        v3_and_below_transactional_id=tid,
        v3_and_below_producer_id=pid,
        v3_and_below_producer_epoch=epoch,
        v3_and_below_topics=[req.AddPartitionsToTxnTopic(name=t, partitions=ps) for t, ps in topics.items()],
    )
    return [
        p.partition_error_code for t in resp.results_by_topic_v3_and_below for p in t.results_by_partition
    ]


def add_offsets(c: Conn, tid: str, pid: int, epoch: int, group: str) -> int:
    return int(
        c.request(
            ApiKey.AddOffsetsToTxn,
            3,
            transactional_id=tid,
            producer_id=pid,
            producer_epoch=epoch,
            group_id=group,
        ).error_code
    )


def end_txn(c: Conn, tid: str, pid: int, epoch: int, commit: bool) -> int:
    return int(
        c.request(
            ApiKey.EndTxn, 3, transactional_id=tid, producer_id=pid, producer_epoch=epoch, committed=commit
        ).error_code
    )


def txn_produce(c: Conn, tid: str, topic: str, part: int, batch: bytes, version: int = 9) -> Any:
    req = request_class(ApiKey.Produce)
    td = req.TopicProduceData(
        name=topic, partition_data=[req.TopicProduceData.PartitionProduceData(index=part, records=batch)]
    )
    resp = c.request(
        ApiKey.Produce, version, transactional_id=tid, acks=-1, timeout_ms=10_000, topic_data=[td]
    )
    return resp.responses[0].partition_responses[0]


def txn_batch(pid: int, epoch: int, seq: int, value: bytes = b"v") -> bytes:
    return build_batch(
        [(None, value, 1_700_000_000_000)],
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        transactional=True,
    )


def txn_offset_commit(
    c: Conn,
    tid: str,
    group: str,
    pid: int,
    epoch: int,
    topic: str,
    offset: int,
    generation: int = -1,
    member: str = "",
    instance: str | None = None,
) -> int:
    req = request_class(ApiKey.TxnOffsetCommit)
    resp = c.request(
        ApiKey.TxnOffsetCommit,
        3,
        transactional_id=tid,
        group_id=group,
        producer_id=pid,
        producer_epoch=epoch,
        generation_id=generation,
        member_id=member,
        group_instance_id=instance,
        topics=[
            req.TxnOffsetCommitRequestTopic(
                name=topic,
                partitions=[
                    req.TxnOffsetCommitRequestTopic.TxnOffsetCommitRequestPartition(
                        partition_index=0,
                        committed_offset=offset,
                        committed_leader_epoch=-1,
                        committed_metadata="",
                    )
                ],
            )
        ],
    )
    return int(resp.topics[0].partitions[0].error_code)


def offset_fetch(c: Conn, group: str, topic: str, require_stable: bool) -> tuple[int, int]:
    """(partition error, committed offset) of partition 0, OffsetFetch v7."""
    req = request_class(ApiKey.OffsetFetch)
    resp = c.request(
        ApiKey.OffsetFetch,
        7,
        group_id=group,
        topics=[req.OffsetFetchRequestTopic(name=topic, partition_indexes=[0])],
        require_stable=require_stable,
    )
    p = resp.topics[0].partitions[0]
    return int(p.error_code or resp.error_code), int(p.committed_offset)


def describe(c: Conn, tid: str) -> Any:
    return c.request(ApiKey.DescribeTransactions, 0, transactional_ids=[tid]).transaction_states[0]


def latest(c: Conn, topic: str, isolation: int = 0) -> int:
    return int(c.list_offsets(topic, 0, LATEST, isolation=isolation).offset)


def settled(c: Conn, tid: str) -> str:
    """The id's state once its markers are written (Prepare* while they are: Kafka's clients
    retry on CONCURRENT_TRANSACTIONS meanwhile)."""
    deadline = time.monotonic() + 10
    while (state := describe(c, tid).transaction_state) in ("PrepareCommit", "PrepareAbort"):
        assert time.monotonic() < deadline, state
        time.sleep(0.01)
    return str(state)


def begin(c: Conn, tid: str, topic: str) -> tuple[int, int]:
    """A transactional id with an ongoing transaction on ``topic``-0 holding one record."""
    r = init_pid(c, tid)
    assert r.error_code == 0, r
    assert add_partitions(c, tid, r.producer_id, r.producer_epoch, [(topic, 0)]) == [0]
    resp = txn_produce(c, tid, topic, 0, txn_batch(r.producer_id, r.producer_epoch, 0))
    assert resp.error_code == 0, resp
    return r.producer_id, r.producer_epoch


# --- the data plane ---------------------------------------------------------------------------------
def test_control_batch_from_a_client_is_refused(broker: BrokerProcess, unique_topic: str) -> None:
    broker.create_topic(unique_topic)
    with broker.connect() as c:
        pid, epoch = begin(c, unique_topic, unique_topic)
        before = (latest(c, unique_topic), latest(c, unique_topic, 1))
        marker = bytes(batches.build_end_txn_marker(pid, epoch, 0, True, 1_700_000_000_000))
        for tid in (None, unique_topic):
            resp = txn_produce(c, tid, unique_topic, 0, marker)  # type: ignore[arg-type]
            assert resp.error_code == E.INVALID_RECORD, resp
        # Nothing appended, and the transaction is still open (the LSO did not move).
        assert (latest(c, unique_topic), latest(c, unique_topic, 1)) == before
        assert before[1] < before[0]
        assert describe(c, unique_topic).transaction_state == "Ongoing"


def test_produce_to_a_partition_outside_the_transaction(broker: BrokerProcess, unique_topic: str) -> None:
    broker.create_topic(unique_topic)
    other = f"{unique_topic}-x"
    broker.create_topic(other)
    with broker.connect() as c:
        pid, epoch = begin(c, unique_topic, unique_topic)
        for version, code in (
            (9, E.INVALID_TXN_STATE),
            (10, E.INVALID_TXN_STATE),
            (11, E.TRANSACTION_ABORTABLE),
        ):
            resp = txn_produce(c, unique_topic, other, 0, txn_batch(pid, epoch, 0), version=version)
            assert resp.error_code == code, (version, resp)
        assert latest(c, other) == 0
        d = describe(c, unique_topic)
        assert d.transaction_state == "Ongoing" and [t.topic for t in d.topics] == [unique_topic]


def test_stale_epoch(broker: BrokerProcess, unique_topic: str) -> None:
    broker.create_topic(unique_topic)
    with broker.connect() as c:
        pid, epoch = begin(c, unique_topic, unique_topic)
        assert end_txn(c, unique_topic, pid, epoch, True) == 0
        assert settled(c, unique_topic) == "CompleteCommit"
        r = init_pid(c, unique_topic)  # a new producer fences the old epoch
        assert r.error_code == 0 and r.producer_id == pid and r.producer_epoch == epoch + 1
        end = latest(c, unique_topic)
        resp = txn_produce(c, unique_topic, unique_topic, 0, txn_batch(pid, epoch, 1))
        assert resp.error_code == E.INVALID_PRODUCER_EPOCH, resp
        assert add_partitions(c, unique_topic, pid, epoch, [(unique_topic, 0)]) == [E.PRODUCER_FENCED]
        assert add_offsets(c, unique_topic, pid, epoch, "g") == E.PRODUCER_FENCED
        assert end_txn(c, unique_topic, pid, epoch, True) == E.PRODUCER_FENCED
        assert end_txn(c, unique_topic, pid + 1, r.producer_epoch, True) == E.INVALID_PRODUCER_ID_MAPPING
        assert latest(c, unique_topic) == end
        d = describe(c, unique_topic)
        assert (d.transaction_state, d.producer_epoch, d.topics) == ("Empty", epoch + 1, [])


# --- the coordinator ---------------------------------------------------------------------------------
def test_init_producer_id_bad_input(broker: BrokerProcess, unique_topic: str) -> None:
    with broker.connect() as c:
        assert init_pid(c, "").error_code == E.INVALID_REQUEST
        too_long = 15 * 60_000 + 1  # transaction.max.timeout.ms defaults to 15 minutes
        assert init_pid(c, unique_topic, timeout_ms=too_long).error_code == E.INVALID_TRANSACTION_TIMEOUT
        assert init_pid(c, unique_topic, timeout_ms=0).error_code == E.INVALID_TRANSACTION_TIMEOUT
        assert describe(c, unique_topic).error_code == E.TRANSACTIONAL_ID_NOT_FOUND
        assert describe(c, "").error_code == E.INVALID_REQUEST


def test_end_txn_bad_input(broker: BrokerProcess, unique_topic: str) -> None:
    broker.create_topic(unique_topic)
    with broker.connect() as c:
        assert end_txn(c, unique_topic, 1, 0, True) == E.INVALID_PRODUCER_ID_MAPPING
        assert describe(c, unique_topic).error_code == E.TRANSACTIONAL_ID_NOT_FOUND
        r = init_pid(c, unique_topic)
        # EndTxn with no transaction: Kafka's INVALID_TXN_STATE from Empty.
        assert end_txn(c, unique_topic, r.producer_id, r.producer_epoch, True) == E.INVALID_TXN_STATE
        pid, epoch = begin(c, unique_topic, unique_topic)
        assert end_txn(c, unique_topic, pid, epoch, True) == 0
        # An abort after a commit: INVALID_TXN_STATE in PrepareCommit and in CompleteCommit alike;
        # a retried commit: CONCURRENT_TRANSACTIONS while the markers are written, then success.
        assert end_txn(c, unique_topic, pid, epoch, False) == E.INVALID_TXN_STATE
        assert end_txn(c, unique_topic, pid, epoch, True) in (0, E.CONCURRENT_TRANSACTIONS)
        assert settled(c, unique_topic) == "CompleteCommit"
        assert end_txn(c, unique_topic, pid, epoch, True) == 0
        assert end_txn(c, unique_topic, pid, epoch, False) == E.INVALID_TXN_STATE
        assert describe(c, unique_topic).transaction_state == "CompleteCommit"


def test_add_partitions_unknown_topic_is_all_or_nothing(broker: BrokerProcess, unique_topic: str) -> None:
    broker.create_topic(unique_topic)
    with broker.connect() as c:
        r = init_pid(c, unique_topic)
        codes = add_partitions(
            c, unique_topic, r.producer_id, r.producer_epoch, [(unique_topic, 0), ("no-such-topic", 0)]
        )
        assert sorted(codes) == sorted([E.OPERATION_NOT_ATTEMPTED, E.UNKNOWN_TOPIC_OR_PARTITION])
        d = describe(c, unique_topic)
        assert (d.transaction_state, d.topics) == ("Empty", [])


# --- offsets --------------------------------------------------------------------------------------------
def test_txn_offset_commit_pending_until_commit(broker: BrokerProcess, unique_topic: str) -> None:
    broker.create_topic(unique_topic)
    group = f"{unique_topic}-g"
    with broker.connect() as c:
        r = init_pid(c, unique_topic)
        pid, epoch = r.producer_id, r.producer_epoch
        # Not in the transaction yet: the verification refuses it.
        assert txn_offset_commit(c, unique_topic, group, pid, epoch, unique_topic, 7) == E.INVALID_TXN_STATE
        assert offset_fetch(c, group, unique_topic, True) == (0, -1)
        assert add_offsets(c, unique_topic, pid, epoch, group) == 0
        assert txn_offset_commit(
            c, unique_topic, group, pid, epoch - 1 if epoch else epoch + 5, unique_topic, 7
        ) == (E.INVALID_PRODUCER_EPOCH)
        assert txn_offset_commit(c, unique_topic, group, pid, epoch, unique_topic, 7) == 0
        assert offset_fetch(c, group, unique_topic, True) == (E.UNSTABLE_OFFSET_COMMIT, -1)
        assert offset_fetch(c, group, unique_topic, False) == (0, -1)
        assert end_txn(c, unique_topic, pid, epoch, True) == 0
        settled(c, unique_topic)
        for require_stable in (True, False):
            assert offset_fetch(c, group, unique_topic, require_stable) == (0, 7)


def test_txn_offset_commit_from_a_stale_member_changes_nothing(
    broker: BrokerProcess, unique_topic: str
) -> None:
    from kafka.protocol.consumer.group import JoinGroupRequest

    broker.create_topic(unique_topic)
    group = f"{unique_topic}-g"
    with broker.connect() as c:
        join = c.request(
            JoinGroupRequest.API_KEY,
            5,
            group_id=group,
            session_timeout_ms=30_000,
            rebalance_timeout_ms=30_000,
            member_id="",
            group_instance_id="inst",
            protocol_type="consumer",
            protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=b"")],
        )
        assert join.error_code == 0, join
        member, generation = join.member_id, join.generation_id
        r = init_pid(c, unique_topic)
        pid, epoch = r.producer_id, r.producer_epoch
        assert add_offsets(c, unique_topic, pid, epoch, group) == 0
        cases = [
            (generation + 1, member, "inst", E.ILLEGAL_GENERATION),
            (generation, "someone-else", None, E.UNKNOWN_MEMBER_ID),
            (generation, "someone-else", "inst", E.FENCED_INSTANCE_ID),
        ]
        for gen, mid, inst, code in cases:
            assert (
                txn_offset_commit(c, unique_topic, group, pid, epoch, unique_topic, 9, gen, mid, inst) == code
            )
            assert offset_fetch(c, group, unique_topic, True) == (0, -1)  # nothing pending
        assert (
            txn_offset_commit(c, unique_topic, group, pid, epoch, unique_topic, 9, generation, member, "inst")
            == 0
        )
        assert end_txn(c, unique_topic, pid, epoch, False) == 0
        assert settled(c, unique_topic) == "CompleteAbort"
        assert offset_fetch(c, group, unique_topic, True) == (0, -1)  # aborted


# --- describing and listing ---------------------------------------------------------------------------------
def test_list_transactions_filters(broker: BrokerProcess, unique_topic: str) -> None:
    broker.create_topic(unique_topic)
    tid_open, tid_done = f"{unique_topic}-open", f"{unique_topic}-done"
    with broker.connect() as c:
        pid_open, _ = begin(c, tid_open, unique_topic)
        done = init_pid(c, tid_done)

        def listed(version: int, **filters: Any) -> tuple[set[str], list[str]]:
            fields: dict[str, Any] = {"state_filters": [], "producer_id_filters": []}
            if version >= 1:
                fields["duration_filter"] = -1
            if version >= 2:
                fields["transactional_id_pattern"] = None
            fields.update(filters)
            resp = c.request(ApiKey.ListTransactions, version, **fields)
            assert resp.error_code == 0, resp
            mine = {
                s.transactional_id
                for s in resp.transaction_states
                if s.transactional_id.startswith(unique_topic)
            }
            return mine, list(resp.unknown_state_filters)

        assert listed(0) == ({tid_open, tid_done}, [])
        assert listed(0, state_filters=["Ongoing", "Bogus"]) == ({tid_open}, ["Bogus"])
        assert listed(0, producer_id_filters=[done.producer_id]) == ({tid_done}, [])
        assert listed(0, producer_id_filters=[pid_open], state_filters=["Empty"]) == (set(), [])
        # Started more than an hour ago: not the open one. An Empty id has start -1, so Kafka's
        # ``now - txnStartTimestamp <= filterDurationMs`` lists it whatever the duration.
        assert listed(1, duration_filter=3_600_000)[0] == {tid_done}
        assert listed(1, duration_filter=0)[0] == {tid_open, tid_done}
        assert listed(2, transactional_id_pattern=f"{unique_topic}-d.*") == ({tid_done}, [])
        bad = c.request(
            ApiKey.ListTransactions,
            2,
            state_filters=[],
            producer_id_filters=[],
            duration_filter=-1,
            transactional_id_pattern="(",
        )
        assert bad.error_code == E.INVALID_REGULAR_EXPRESSION
        assert describe(c, f"{unique_topic}-never").error_code == E.TRANSACTIONAL_ID_NOT_FOUND
