"""Write tests/data/legacy-coordinator-log/ and legacy-coordinator-log.expected.json.

    PYTHONPATH=. python tests/data/make_legacy_coordinator_log.py [--force]

Starts a real broker (``python -m kcoord.cli serve``, tests/harness.py) on a fresh data
directory and drives it over the wire (tests/wire.py, tests/legacy_log.py) until
``__consumer_offsets-0`` holds every record kcoord writes:

- offset commit value v3 (OffsetCommit v8) and v1 (OffsetCommit v2 with a RetentionTimeMs),
  one offset overwritten each way between the two versions, one removed by OffsetDelete;
- group metadata v3: ``legacy-stable`` is Stable with a static member (group.instance.id,
  replaced once by a rejoin of the same instance id) and a dynamic one; ``legacy-empty`` is
  Empty after its member left; ``legacy-deleted`` was deleted (DeleteGroups: group and offset
  tombstones); ``legacy-standalone`` has commits with generation -1 and no group record;
- the share group ``legacy-share``: group epoch (102), config overrides (103, two
  IncrementalAlterConfigs, one removing a key), SHARE_CHECKPOINT (100) and SHARE_DELTA (101):
  on partition 0 records accepted, released twice, rejected, never delivered, and five left
  acquired (in flight) when the broker stops; partition 1 accepted to its end.

Then it observes the state over the wire (tests/legacy_log.observe), stops the broker with
SIGTERM and copies its data directory into the fixture. Last, it checks the fixture as the test
does: a broker started on a scratch copy must show the same state; what a new share member is
given there (tests/legacy_log.redeliveries) goes into the expected JSON too.

Regenerating replaces the fixture with a new one (random member ids, topic ids, timestamps):
do it only to add coverage, never to make the replay test pass.
"""

from __future__ import annotations

import json
import shutil
import struct
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from kcoord.protocol.messages import request_class  # noqa: E402
from tests.harness import BrokerProcess  # noqa: E402
from tests.legacy_log import (  # noqa: E402
    ACCEPT,
    BROKER_ARGS,
    DELETED,
    EMPTY,
    EXPECTED_JSON,
    FIXTURE_DIR,
    ORDERS,
    PAYMENTS,
    REJECT,
    RELEASE,
    RESOURCE_GROUP,
    SHARE,
    SHARE_TOPIC,
    STABLE,
    STANDALONE,
    ShareMember,
    call,
    census,
    missing_kinds,
    observe,
    redeliveries,
)
from tests.wire import ApiKey, Conn, build_batch  # noqa: E402

SESSION_TIMEOUT_MS = 300_000  # members reloaded after a restart stay well past a test's end
REBALANCE_TIMEOUT_MS = 30_000
RETENTION_100_YEARS_MS = 100 * 365 * 24 * 3_600_000
STATIC_INSTANCE = "legacy-static-1"
MEMBER_ID_REQUIRED = 79


# --- consumer protocol bytes -----------------------------------------------------------------------
def _str(s: str) -> bytes:
    return struct.pack(">h", len(s)) + s.encode()


def subscription(topics: list[str], user_data: bytes) -> bytes:
    """ConsumerProtocolSubscription v0: topics, user data."""
    return (
        struct.pack(">hi", 0, len(topics))
        + b"".join(_str(t) for t in topics)
        + struct.pack(">i", len(user_data))
        + user_data
    )


def assignment(parts: dict[str, list[int]]) -> bytes:
    """ConsumerProtocolAssignment v0: (topic, partitions) pairs, no user data."""
    out = struct.pack(">hi", 0, len(parts))
    for t, ps in parts.items():
        out += _str(t) + struct.pack(f">i{len(ps)}i", len(ps), *ps)
    return out + struct.pack(">i", -1)


# --- classic groups over the wire ---------------------------------------------------------------
def send_join(c: Conn, group: str, client_id: str, member_id: str, instance: str | None, meta: bytes) -> int:
    req = request_class(ApiKey.JoinGroup)
    return c.send(
        ApiKey.JoinGroup,
        5,
        client_id=client_id,
        group_id=group,
        session_timeout_ms=SESSION_TIMEOUT_MS,
        rebalance_timeout_ms=REBALANCE_TIMEOUT_MS,
        member_id=member_id,
        group_instance_id=instance,
        protocol_type="consumer",
        protocols=[req.JoinGroupRequestProtocol(name="range", metadata=meta)],
    )


def member_id_for(c: Conn, group: str, client_id: str, meta: bytes) -> str:
    """JoinGroup v5 of a new dynamic member: MEMBER_ID_REQUIRED hands out its id (KIP-394)."""
    corr = send_join(c, group, client_id, "", None, meta)
    resp = c.recv(ApiKey.JoinGroup, 5, corr)
    assert resp.error_code == MEMBER_ID_REQUIRED, resp
    return resp.member_id


def sync(c: Conn, group: str, client_id: str, generation: int, member_id: str, instance: str | None,
         assignments: dict[str, bytes]) -> int:  # fmt: skip
    req = request_class(ApiKey.SyncGroup)
    return c.send(
        ApiKey.SyncGroup,
        3,
        client_id=client_id,
        group_id=group,
        generation_id=generation,
        member_id=member_id,
        group_instance_id=instance,
        assignments=[
            req.SyncGroupRequestAssignment(member_id=m, assignment=a) for m, a in assignments.items()
        ],
    )


def commit(
    c: Conn,
    group: str,
    offsets: dict[tuple[str, int], tuple[int, int, str]],
    generation: int = -1,
    member_id: str = "",
    instance: str | None = None,
    client_id: str = "kcoord-tests",
) -> None:
    """OffsetCommit v8 ((topic, partition) -> (offset, leader epoch, metadata)): value v3."""
    req = request_class(ApiKey.OffsetCommit)
    topics: dict[str, list[Any]] = {}
    for (t, p), (off, epoch, meta) in offsets.items():
        topics.setdefault(t, []).append(
            req.OffsetCommitRequestTopic.OffsetCommitRequestPartition(
                partition_index=p, committed_offset=off, committed_leader_epoch=epoch, committed_metadata=meta
            )
        )
    resp = call(
        c,
        ApiKey.OffsetCommit,
        8,
        client_id=client_id,
        group_id=group,
        generation_id_or_member_epoch=generation,
        member_id=member_id,
        group_instance_id=instance,
        topics=[req.OffsetCommitRequestTopic(name=t, partitions=ps) for t, ps in topics.items()],
    )
    codes = [p.error_code for t in resp.topics for p in t.partitions]
    assert codes == [0] * len(offsets), resp


def commit_with_retention(c: Conn, group: str, offsets: dict[tuple[str, int], tuple[int, str]]) -> None:
    """OffsetCommit v2 with RetentionTimeMs (100 years): value v1, with its own expire timestamp."""
    req = request_class(ApiKey.OffsetCommit)
    topics: dict[str, list[Any]] = {}
    for (t, p), (off, meta) in offsets.items():
        topics.setdefault(t, []).append(
            req.OffsetCommitRequestTopic.OffsetCommitRequestPartition(
                partition_index=p, committed_offset=off, committed_metadata=meta
            )
        )
    resp = c.request(
        ApiKey.OffsetCommit,
        2,
        group_id=group,
        generation_id_or_member_epoch=-1,
        member_id="",
        retention_time_ms=RETENTION_100_YEARS_MS,
        topics=[req.OffsetCommitRequestTopic(name=t, partitions=ps) for t, ps in topics.items()],
    )
    codes = [p.error_code for t in resp.topics for p in t.partitions]
    assert codes == [0] * len(offsets), resp


def leave(c: Conn, group: str, member_id: str) -> None:
    req = request_class(ApiKey.LeaveGroup)
    resp = c.request(
        ApiKey.LeaveGroup,
        3,
        group_id=group,
        members=[req.MemberIdentity(member_id=member_id, group_instance_id=None)],
    )
    assert resp.error_code == 0 and [m.error_code for m in resp.members] == [0], resp


def one_member_group(c: Conn, group: str, client_id: str, topics: dict[str, list[int]]) -> tuple[str, int]:
    """A consumer group of one dynamic member, through JoinGroup and SyncGroup: (member, generation)."""
    meta = subscription(sorted(topics), b"")
    member = member_id_for(c, group, client_id, meta)
    join = c.recv(ApiKey.JoinGroup, 5, send_join(c, group, client_id, member, None, meta))
    assert join.error_code == 0 and join.leader == member, join
    s = c.recv(ApiKey.SyncGroup, 3, sync(c, group, client_id, join.generation_id, member, None,
                                         {member: assignment(topics)}))  # fmt: skip
    assert s.error_code == 0, s
    return member, join.generation_id


# --- the scenario ------------------------------------------------------------------------------
def stable_group(b: BrokerProcess) -> list[Conn]:
    """legacy-stable: a static and a dynamic member join together (within the initial rebalance
    delay), the leader assigns, both commit; then the static member's instance rejoins with a
    new member id (static member replaced: a group record, no rebalance). Returns the open
    connections: the group stays Stable until the broker stops."""
    cs, cd = b.connect(), b.connect()
    s_client, d_client = "legacy-static-client", "legacy-dynamic-client"
    s_meta = subscription([ORDERS, PAYMENTS], b"static")
    d_meta = subscription([ORDERS, PAYMENTS], b"dynamic")
    d_member = member_id_for(cd, STABLE, d_client, d_meta)
    corr_s = send_join(cs, STABLE, s_client, "", STATIC_INSTANCE, s_meta)
    corr_d = send_join(cd, STABLE, d_client, d_member, None, d_meta)
    js, jd = cs.recv(ApiKey.JoinGroup, 5, corr_s), cd.recv(ApiKey.JoinGroup, 5, corr_d)
    assert js.error_code == jd.error_code == 0 and js.generation_id == jd.generation_id, (js, jd)
    s_member, gen = js.member_id, js.generation_id
    assigned = {
        s_member: {ORDERS: [0, 1], PAYMENTS: [0]},
        d_member: {ORDERS: [2], PAYMENTS: [1]},
    }
    leader = js if js.leader == s_member else jd
    assert sorted(m.member_id for m in leader.members) == sorted([s_member, d_member]), leader
    plan = {m: assignment(a) for m, a in assigned.items()}
    corr_s = sync(cs, STABLE, s_client, gen, s_member, STATIC_INSTANCE, plan if leader is js else {})
    corr_d = sync(cd, STABLE, d_client, gen, d_member, None, plan if leader is jd else {})
    ss, sd = cs.recv(ApiKey.SyncGroup, 3, corr_s), cd.recv(ApiKey.SyncGroup, 3, corr_d)
    assert ss.error_code == sd.error_code == 0, (ss, sd)
    commit(cs, STABLE, {(ORDERS, 0): (100, 1, "static-o0"), (ORDERS, 1): (110, 1, "static-o1"),
                        (PAYMENTS, 0): (120, 2, "")}, gen, s_member, STATIC_INSTANCE, s_client)  # fmt: skip
    commit(cd, STABLE, {(ORDERS, 2): (130, 1, "dynamic-o2"), (PAYMENTS, 1): (140, 2, "dynamic-p1")},
           gen, d_member, None, d_client)  # fmt: skip

    # The static consumer restarts: same instance id, no member id.
    cs.close()
    cs2 = b.connect()
    rejoin = cs2.recv(ApiKey.JoinGroup, 5, send_join(cs2, STABLE, s_client, "", STATIC_INSTANCE, s_meta))
    assert rejoin.error_code == 0 and rejoin.member_id != s_member, rejoin
    assert rejoin.generation_id == gen, rejoin
    s2 = cs2.recv(
        ApiKey.SyncGroup, 3, sync(cs2, STABLE, s_client, gen, rejoin.member_id, STATIC_INSTANCE, {})
    )
    assert s2.error_code == 0 and bytes(s2.assignment) == plan[s_member], s2
    commit(cs2, STABLE, {(ORDERS, 0): (101, 1, "static-o0-after-rejoin")}, gen, rejoin.member_id,
           STATIC_INSTANCE, s_client)  # fmt: skip
    return [cs2, cd]


def classic_groups(b: BrokerProcess) -> list[Conn]:
    conns = stable_group(b)
    with b.connect() as c:
        # legacy-empty: one member commits and leaves (a group record with no member).
        member, gen = one_member_group(c, EMPTY, "legacy-empty-client", {PAYMENTS: [0, 1]})
        commit(c, EMPTY, {(PAYMENTS, 0): (7, 0, "empty-p0"), (PAYMENTS, 1): (8, 0, "empty-p1")}, gen, member)
        leave(c, EMPTY, member)

        # legacy-deleted: the same, then DeleteGroups (offset and group tombstones).
        member, gen = one_member_group(c, DELETED, "legacy-deleted-client", {ORDERS: [0, 1, 2]})
        commit(c, DELETED, {(ORDERS, p): (50 + p, 0, "doomed") for p in range(3)}, gen, member)
        leave(c, DELETED, member)
        resp = c.request(ApiKey.DeleteGroups, 2, groups_names=[DELETED])
        assert [r.error_code for r in resp.results] == [0], resp

        # legacy-standalone: commits with generation -1, in both value versions.
        commit(c, STANDALONE, {(ORDERS, 0): (10, 3, "v3-then-v1"), (ORDERS, 2): (30, 3, "deleted-later")})
        commit_with_retention(c, STANDALONE, {(ORDERS, 0): (11, "v1-last"), (ORDERS, 1): (20, "v1-then-v3"),
                                              (PAYMENTS, 0): (40, "v1-only")})  # fmt: skip
        commit(c, STANDALONE, {(ORDERS, 1): (21, 4, "v3-last")})
        req = request_class(ApiKey.OffsetDelete)
        resp = c.request(
            ApiKey.OffsetDelete,
            0,
            group_id=STANDALONE,
            topics=[
                req.OffsetDeleteRequestTopic(
                    name=ORDERS,
                    partitions=[req.OffsetDeleteRequestTopic.OffsetDeleteRequestPartition(partition_index=2)],
                )
            ],
        )
        assert resp.error_code == 0 and resp.topics[0].partitions[0].error_code == 0, resp
    return conns


def alter_group_configs(c: Conn, group: str, ops: list[tuple[str, int, str | None]]) -> None:
    """IncrementalAlterConfigs v1 of a GROUP resource: (name, operation 0 SET / 1 DELETE, value)."""
    req = request_class(ApiKey.IncrementalAlterConfigs)
    r = req.AlterConfigsResource
    resp = c.request(
        ApiKey.IncrementalAlterConfigs,
        1,
        resources=[
            r(
                resource_type=RESOURCE_GROUP,
                resource_name=group,
                configs=[r.AlterableConfig(name=n, config_operation=op, value=v) for n, op, v in ops],
            )
        ],
        validate_only=False,
    )
    assert [x.error_code for x in resp.responses] == [0], resp


def share_group(b: BrokerProcess) -> Conn:
    """legacy-share on SHARE_TOPIC (partition 0: 30 records, partition 1: 10, batches of 5).

    Partition 0 ends with 0-4 and 7-14 accepted, 5 released twice (Available, delivery count
    2), 6 rejected (Archived), 15-19 acquired by the member and never acknowledged, 20-29 never
    delivered; partition 1 is accepted to its end. Returns the member's connection, open until
    the broker stops (its records stay acquired: lock duration 60 s, session timeout 45 s, far
    longer than what is left of the run)."""
    c = b.connect()
    c.create_topic(SHARE_TOPIC, 2)

    def produce(p: int, first: int, end: int) -> None:
        now = int(time.time() * 1000)
        for base in range(first, end, 5):
            batch = build_batch([(None, f"p{p}-{i}".encode(), now) for i in range(base, base + 5)])
            assert c.produce(SHARE_TOPIC, p, batch).error_code == 0

    produce(0, 0, 20)
    produce(1, 0, 10)
    alter_group_configs(c, SHARE, [("share.auto.offset.reset", 0, "earliest"),
                                   ("share.delivery.count.limit", 0, "4")])  # fmt: skip
    alter_group_configs(c, SHARE, [("share.delivery.count.limit", 1, None),
                                   ("share.record.lock.duration.ms", 0, "60000")])  # fmt: skip

    m = ShareMember(c, SHARE, [SHARE_TOPIC])
    m.join(2)
    (tid,) = m.assignment

    def policy(p: int, o: int) -> int | None:
        if p == 1 or o < 5 or 7 <= o < 15:
            return ACCEPT
        if o == 6:
            return REJECT
        return None  # 5: released below; 15-19: kept acquired

    acquired: list[tuple[int, int, int]] = []
    pending: dict[tuple[uuid.UUID, int], list[tuple[int, int, int]]] = {}
    wanted = {(0, o) for o in range(20)} | {(1, o) for o in range(10)}
    deadline = time.monotonic() + 30
    while not wanted <= {(p, o) for p, o, _ in acquired}:
        assert time.monotonic() < deadline, f"not all of {sorted(wanted)} acquired: {acquired}"
        got = m.fetch(5, pending)
        pending = {}
        for _, p, o, dc in got:
            acquired.append((p, o, dc))
            ack = policy(p, o)
            if ack is not None:
                pending.setdefault((tid, p), []).append((o, o, ack))
    if pending:
        m.acknowledge(pending)
    assert sorted(acquired) == [(p, o, 1) for p, o in sorted(wanted)], acquired
    # Record 5: released, delivered again (the only Available record below 20), released again.
    m.acknowledge({(tid, 0): [(5, 5, RELEASE)]})
    assert [(p, o, dc) for _, p, o, dc in m.fetch(1)] == [(0, 5, 2)]
    m.acknowledge({(tid, 0): [(5, 5, RELEASE)]})
    produce(0, 20, 30)  # never delivered
    m.heartbeat()
    return c


def write_fixture() -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix="legacy-log-"))
    b = BrokerProcess(work / "data", work / "broker.log", BROKER_ARGS)
    b.start()
    conns: list[Conn] = []
    try:
        with b.connect() as c:
            c.create_topic(ORDERS, 3)
            c.create_topic(PAYMENTS, 2)
        conns += classic_groups(b)
        conns.append(share_group(b))
        with b.connect() as c:
            state = observe(c)
        assert b.stop() == 0, b.log_text()
    finally:
        for c in conns:
            c.close()
        if b.running:
            b.stop()
    if FIXTURE_DIR.exists():
        shutil.rmtree(FIXTURE_DIR)
    shutil.copytree(work / "data", FIXTURE_DIR)
    shutil.rmtree(work)
    return state


def check_replay(state: dict[str, Any]) -> list[list[Any]]:
    """Start a broker on a scratch copy of the fixture: the same state must come back. Returns
    what a new share member is then given."""
    work = Path(tempfile.mkdtemp(prefix="legacy-log-check-"))
    shutil.copytree(FIXTURE_DIR, work / "data")
    b = BrokerProcess(work / "data", work / "broker.log", BROKER_ARGS)
    b.start()
    try:
        with b.connect() as c:
            replayed = observe(c)
            assert replayed == state, f"replayed state differs:\n{replayed}\n{state}"
            topic_ids = {uuid.UUID(t["topic_id"]): name for name, t in state["share_offsets"][SHARE].items()}
            return redeliveries(c, topic_ids, partitions=2)
    finally:
        b.stop()
        shutil.rmtree(work)


def main() -> None:
    if FIXTURE_DIR.exists() and "--force" not in sys.argv[1:]:
        sys.exit(
            f"{FIXTURE_DIR} exists. It records what an earlier kcoord wrote; replacing it with what "
            "this version writes proves nothing about older logs. Pass --force to replace it anyway."
        )
    state = write_fixture()
    redelivered = check_replay(state)
    counts = census(FIXTURE_DIR)
    assert not missing_kinds(counts), f"the fixture lacks {missing_kinds(counts)}: {counts}"
    expected = {**state, "redeliveries": redelivered, "records": counts}
    EXPECTED_JSON.write_text(json.dumps(expected, indent=1, sort_keys=True) + "\n")
    size = sum(f.stat().st_size for f in FIXTURE_DIR.rglob("*") if f.is_file())
    print(f"{FIXTURE_DIR}: {size} bytes")
    print(json.dumps(expected["records"], indent=1))


if __name__ == "__main__":
    main()
