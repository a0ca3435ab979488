"""Every API asks the authorizer before it acts, and answers Kafka's error where Kafka does.

One principal (PLAINTEXT: User:ANONYMOUS) sets things up as a super user, grants itself a few
ACLs, and is then held to them after a restart without super users:

- topic ``t``: Read; topic ``w``: Write; topic ``u``: nothing;
- group ``g-ok``: Read; group ``g-no``: nothing;
- transactional id ``tx-ok``: Write; ``tx-no``: nothing.

Each request below names an allowed and a denied resource where the API answers per resource,
so the test sees both sides; afterwards, as a super user again, nothing denied has changed.
"""

from __future__ import annotations

import uuid

import pytest

import kcoord.server.api_table  # noqa: F401  (registers kcoord's own schemas: the share APIs)
from kcoord.metadata.acls import AclOperation as Op
from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.messages import ApiKey, request_class
from tests.conformance.test_txn_bad_input import (
    add_offsets,
    add_partitions,
    end_txn,
    init_pid,
    txn_batch,
    txn_offset_commit,
    txn_produce,
)
from tests.harness import BrokerFactory, BrokerProcess
from tests.wire import Conn, build_batch

E = ErrorCode
AUTHORIZER = ["--authorizer-class-name", "org.apache.kafka.metadata.authorizer.StandardAuthorizer"]
SUPER = ["--super-users", "User:ANONYMOUS"]
GRANTS = [(2, "t", Op.READ), (2, "w", Op.WRITE), (3, "g-ok", Op.READ), (5, "tx-ok", Op.WRITE)]


def ops(*operations: Op) -> set[int]:
    """An authorized-operations bitfield as kafka-python decodes it: the operations' codes."""
    return {int(op) for op in operations}


def commit(c: Conn, group: str, topic: str, offset: int) -> int:
    req = request_class(ApiKey.OffsetCommit)
    resp = c.request(
        ApiKey.OffsetCommit,
        8,
        group_id=group,
        generation_id_or_member_epoch=-1,
        member_id="",
        group_instance_id=None,
        topics=[
            req.OffsetCommitRequestTopic(
                name=topic,
                partitions=[
                    req.OffsetCommitRequestTopic.OffsetCommitRequestPartition(
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


def committed(c: Conn, group: str, topic: str) -> int:
    req = request_class(ApiKey.OffsetFetch)
    resp = c.request(
        ApiKey.OffsetFetch,
        7,
        group_id=group,
        topics=[req.OffsetFetchRequestTopic(name=topic, partition_indexes=[0])],
        require_stable=False,
    )
    return int(resp.topics[0].partitions[0].committed_offset)


def produce(c: Conn, topic: str) -> int:
    return int(c.produce(topic, 0, build_batch(count=1)).error_code)


@pytest.fixture
def held(broker_factory: BrokerFactory) -> BrokerProcess:
    b = broker_factory(AUTHORIZER + SUPER)
    creation = request_class(ApiKey.CreateAcls).AclCreation
    with b.connect() as c:
        for topic in ("t", "w", "u"):
            c.create_topic(topic)
            assert produce(c, topic) == 0
        assert commit(c, "g-ok", "t", 1) == 0
        assert commit(c, "g-no", "u", 1) == 0
        assert init_pid(c, "tx-ok").error_code == 0
        assert init_pid(c, "tx-no").error_code == 0
        resp = c.request(
            ApiKey.CreateAcls,
            3,
            creations=[
                creation(
                    resource_type=rt,
                    resource_name=name,
                    resource_pattern_type=3,
                    principal="User:ANONYMOUS",
                    host="*",
                    operation=int(op),
                    permission_type=3,
                )
                for rt, name, op in GRANTS
            ],
        )
        assert [r.error_code for r in resp.results] == [0] * len(GRANTS)
    b.extra_args = list(AUTHORIZER)
    b.restart()
    return b


def test_transaction_apis(held: BrokerProcess) -> None:
    with held.connect() as c:
        assert init_pid(c, "tx-no").error_code == E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        # Idempotent: no IdempotentWrite on the cluster, but Write on the topic w.
        assert init_pid(c, None).error_code == 0
        ok = init_pid(c, "tx-ok")
        assert ok.error_code == 0
        pid, epoch = ok.producer_id, ok.producer_epoch
        assert add_partitions(c, "tx-no", pid, epoch, [("w", 0)]) == [E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED]
        assert add_partitions(c, "tx-ok", pid, epoch, [("w", 0), ("t", 0)]) == [
            E.OPERATION_NOT_ATTEMPTED,
            E.TOPIC_AUTHORIZATION_FAILED,
        ]
        denied = txn_produce(c, "tx-no", "w", 0, txn_batch(pid, epoch, 0))
        assert denied.error_code == E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        assert add_offsets(c, "tx-ok", pid, epoch, "g-no") == E.GROUP_AUTHORIZATION_FAILED
        assert add_offsets(c, "tx-no", pid, epoch, "g-ok") == E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        assert add_offsets(c, "tx-ok", pid, epoch, "g-ok") == 0
        assert (
            txn_offset_commit(c, "tx-no", "g-ok", pid, epoch, "t", 1)
            == E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        )
        assert txn_offset_commit(c, "tx-ok", "g-no", pid, epoch, "t", 1) == E.GROUP_AUTHORIZATION_FAILED
        assert txn_offset_commit(c, "tx-ok", "g-ok", pid, epoch, "u", 1) == E.TOPIC_AUTHORIZATION_FAILED
        assert end_txn(c, "tx-no", pid, epoch, True) == E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        assert end_txn(c, "tx-ok", pid, epoch, False) == 0
        states = c.request(
            ApiKey.DescribeTransactions, 0, transactional_ids=["tx-ok", "tx-no"]
        ).transaction_states
        assert [(s.transactional_id, s.error_code) for s in states] == [
            ("tx-ok", 0),
            ("tx-no", E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
        ]
        listed = c.request(
            ApiKey.ListTransactions, 1, state_filters=[], producer_id_filters=[], duration_filter=-1
        )
        assert [s.transactional_id for s in listed.transaction_states] == ["tx-ok"]


def test_group_apis(held: BrokerProcess) -> None:
    with held.connect() as c:
        assert commit(c, "g-no", "t", 5) == E.GROUP_AUTHORIZATION_FAILED
        assert commit(c, "g-ok", "u", 5) == E.TOPIC_AUTHORIZATION_FAILED
        assert commit(c, "g-ok", "t", 1) == 0
        fetched = c.request(
            ApiKey.OffsetFetch,
            7,
            group_id="g-no",
            topics=None,
            require_stable=False,
        )
        assert fetched.error_code == E.GROUP_AUTHORIZATION_FAILED
        # v1 has no top-level error code: the partitions asked for carry it.
        asked = request_class(ApiKey.OffsetFetch).OffsetFetchRequestTopic(name="t", partition_indexes=[0, 1])
        fetched = c.request(ApiKey.OffsetFetch, 1, group_id="g-no", topics=[asked])
        assert [(t.name, p.partition_index, p.error_code) for t in fetched.topics for p in t.partitions] == [
            ("t", 0, E.GROUP_AUTHORIZATION_FAILED),
            ("t", 1, E.GROUP_AUTHORIZATION_FAILED),
        ]
        groups = c.request(
            ApiKey.DescribeGroups, 5, groups=["g-ok", "g-no"], include_authorized_operations=True
        )
        assert [(g.group_id, g.error_code) for g in groups.groups] == [
            ("g-ok", 0),
            ("g-no", E.GROUP_AUTHORIZATION_FAILED),
        ]
        assert groups.groups[0].authorized_operations == ops(Op.READ, Op.DESCRIBE)
        listed = c.request(ApiKey.ListGroups, 4, states_filter=[])
        assert [g.group_id for g in listed.groups] == ["g-ok"]
        coordinators = c.request(ApiKey.FindCoordinator, 4, key_type=0, coordinator_keys=["g-ok", "g-no"])
        assert [(k.key, k.error_code) for k in coordinators.coordinators] == [
            ("g-ok", 0),
            ("g-no", E.GROUP_AUTHORIZATION_FAILED),
        ]
        deleted = c.request(ApiKey.DeleteGroups, 2, groups_names=["g-ok"])
        assert deleted.results[0].error_code == E.GROUP_AUTHORIZATION_FAILED  # Read is not Delete
        req = request_class(ApiKey.OffsetDelete)
        od = c.request(
            ApiKey.OffsetDelete,
            0,
            group_id="g-ok",
            topics=[
                req.OffsetDeleteRequestTopic(
                    name="t",
                    partitions=[req.OffsetDeleteRequestTopic.OffsetDeleteRequestPartition(partition_index=0)],
                )
            ],
        )
        assert od.error_code == E.GROUP_AUTHORIZATION_FAILED
        hb = c.request(
            ApiKey.ConsumerGroupHeartbeat,
            0,
            group_id="g-no",
            member_id=str(uuid.uuid4()),
            member_epoch=0,
            instance_id=None,
            rack_id=None,
            rebalance_timeout_ms=30_000,
            subscribed_topic_names=["t"],
            server_assignor=None,
            topic_partitions=[],
        )
        assert hb.error_code == E.GROUP_AUTHORIZATION_FAILED
        hb = c.request(
            ApiKey.ConsumerGroupHeartbeat,
            0,
            group_id="g-ok",
            member_id=str(uuid.uuid4()),
            member_epoch=0,
            instance_id=None,
            rack_id=None,
            rebalance_timeout_ms=30_000,
            subscribed_topic_names=["t", "u"],
            server_assignor=None,
            topic_partitions=[],
        )
        assert hb.error_code == E.TOPIC_AUTHORIZATION_FAILED
        share = c.request(
            ApiKey.ShareGroupHeartbeat,
            1,
            group_id="s-no",
            member_id=str(uuid.uuid4()),
            member_epoch=0,
            rack_id=None,
            subscribed_topic_names=["t"],
        )
        assert share.error_code == E.GROUP_AUTHORIZATION_FAILED


def test_data_plane_and_admin_apis(held: BrokerProcess) -> None:
    with held.connect() as c:
        assert produce(c, "w") == 0
        assert produce(c, "t") == E.TOPIC_AUTHORIZATION_FAILED
        assert c.fetch("t", 0, 0).error_code == 0
        assert c.fetch("u", 0, 0).error_code == E.TOPIC_AUTHORIZATION_FAILED
        assert c.list_offsets("u", 0, -1).error_code == E.TOPIC_AUTHORIZATION_FAILED
        topic = request_class(ApiKey.Metadata).MetadataRequestTopic
        md = c.request(
            ApiKey.Metadata,
            12,
            topics=[topic(topic_id=uuid.UUID(int=0), name=n) for n in ("t", "u", "nope")],
            allow_auto_topic_creation=True,
            include_topic_authorized_operations=True,
        )
        assert [(t.name, t.error_code) for t in md.topics] == [
            ("t", 0),
            ("u", E.TOPIC_AUTHORIZATION_FAILED),
            ("nope", E.TOPIC_AUTHORIZATION_FAILED),
        ]
        assert md.topics[0].authorized_operations == ops(Op.READ, Op.DESCRIBE)
        every = c.request(
            ApiKey.Metadata,
            12,
            topics=None,
            allow_auto_topic_creation=False,
            include_topic_authorized_operations=False,
        )
        assert sorted(t.name for t in every.topics) == ["t", "w"]  # w: Describe implied by Write
        cluster = c.request(
            ApiKey.DescribeCluster, 1, include_cluster_authorized_operations=True, endpoint_type=1
        )
        assert cluster.error_code == 0 and not cluster.authorized_operations
        producers = request_class(ApiKey.DescribeProducers).TopicRequest
        dp = c.request(
            ApiKey.DescribeProducers,
            0,
            topics=[producers(name="t", partition_indexes=[0]), producers(name="u", partition_indexes=[0])],
        )
        assert [t.partitions[0].error_code for t in dp.topics] == [0, E.TOPIC_AUTHORIZATION_FAILED]
        dr = request_class(ApiKey.DeleteRecords).DeleteRecordsTopic
        resp = c.request(
            ApiKey.DeleteRecords,
            2,
            topics=[dr(name="t", partitions=[dr.DeleteRecordsPartition(partition_index=0, offset=1)])],
            timeout_ms=1000,
        )
        assert resp.topics[0].partitions[0].error_code == E.TOPIC_AUTHORIZATION_FAILED
        deleted = c.request(ApiKey.DeleteTopics, 5, topic_names=["t", "u", "nope"], timeout_ms=1000)
        assert [(r.name, r.error_code) for r in deleted.responses] == [
            ("t", E.TOPIC_AUTHORIZATION_FAILED),  # Read implies Describe, not Delete
            ("u", E.TOPIC_AUTHORIZATION_FAILED),
            ("nope", E.TOPIC_AUTHORIZATION_FAILED),  # existence is not revealed
        ]
        cp = request_class(ApiKey.CreatePartitions).CreatePartitionsTopic
        resp = c.request(
            ApiKey.CreatePartitions,
            3,
            topics=[cp(name="t", count=3, assignments=None)],
            timeout_ms=1000,
            validate_only=False,
        )
        assert resp.results[0].error_code == E.TOPIC_AUTHORIZATION_FAILED
        res = request_class(ApiKey.IncrementalAlterConfigs).AlterConfigsResource
        resp = c.request(
            ApiKey.IncrementalAlterConfigs,
            1,
            resources=[
                res(
                    resource_type=2,
                    resource_name="t",
                    configs=[res.AlterableConfig(name="retention.ms", config_operation=0, value="1")],
                ),
                res(resource_type=4, resource_name="1", configs=[]),
            ],
            validate_only=False,
        )
        assert [r.error_code for r in resp.responses] == [
            E.TOPIC_AUTHORIZATION_FAILED,
            E.CLUSTER_AUTHORIZATION_FAILED,
        ]
        assert c.request(ApiKey.DescribeLogDirs, 4, topics=None).error_code == E.CLUSTER_AUTHORIZATION_FAILED
        assert (
            c.request(ApiKey.ListPartitionReassignments, 0, timeout_ms=1000, topics=None).error_code
            == E.CLUSTER_AUTHORIZATION_FAILED
        )
        el = c.request(ApiKey.ElectLeaders, 2, election_type=0, topic_partitions=None, timeout_ms=1000)
        assert el.error_code == E.CLUSTER_AUTHORIZATION_FAILED
        scram = c.request(ApiKey.DescribeUserScramCredentials, 0, users=None)
        assert scram.error_code == E.CLUSTER_AUTHORIZATION_FAILED

    # As a super user again: nothing that was denied happened.
    held.extra_args = AUTHORIZER + SUPER
    held.restart()
    with held.connect() as c:
        assert c.list_offsets("t", 0, -1).offset == 1  # the denied produce wrote nothing
        assert c.list_offsets("t", 0, -2).offset == 0  # nor did DeleteRecords
        topics = c.request(ApiKey.Metadata, 1, topics=None).topics
        assert {t.name: len(t.partitions) for t in topics if not t.name.startswith("__")} == {
            "t": 1,
            "w": 1,
            "u": 1,
        }
        assert committed(c, "g-ok", "t") == 1 and committed(c, "g-no", "u") == 1
