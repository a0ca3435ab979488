"""Durability of the group coordinator across kill -9 and restart.

- every acknowledged OffsetCommit (several groups committing concurrently) is there after the
  broker is killed with SIGKILL and restarted, and each commit request is all-or-nothing;
- KIP-211 expiry timers survive a restart: a group that became Empty before the restart loses
  its offsets at Empty-time + offsets.retention.minutes (current_state_timestamp is persisted),
  not at restart-time + retention; a standalone group's offsets expire from their commit time.

The retention is 1 minute, the smallest Kafka's setting allows. So that the test does not wait
that minute, the restarted broker runs with its clock shifted forward by libfaketime (Debian
package ``faketime``); without libfaketime the expiry test is skipped, with that reason.
"""

from __future__ import annotations

import glob
import struct
import threading
import time
from collections.abc import Iterator

import pytest
from kafka.protocol.consumer.group import JoinGroupRequest, SyncGroupRequest

from tests import coordinator_log
from tests.coordinator_log import (
    group_key,
    offset_key,
    offsets_partition,
    parse_group_value,
    parse_offset_value,
)
from tests.group_client import FGroup, commit, fetch_all
from tests.harness import BrokerFactory, BrokerProcess
from tests.wire import ApiKey, Conn, build_batch

pytestmark = pytest.mark.slow


# --- acknowledged commits survive kill -9 ----------------------------------------------------------
def test_acknowledged_commits_survive_kill_9(broker_factory: BrokerFactory, unique_topic: str) -> None:
    b = broker_factory(["--group-initial-rebalance-delay-ms", "0"])
    partitions = 3
    b.create_topic(unique_topic, partitions)
    groups = [f"{unique_topic}-g{i}" for i in range(4)]
    acked = dict.fromkeys(groups, 0)
    sent = dict.fromkeys(groups, 0)
    stop = threading.Event()

    def committer(group: str) -> None:
        try:
            with b.connect() as c:
                for offset in range(1, 100_000):
                    if stop.is_set():
                        return
                    sent[group] = offset
                    commit(c, group, unique_topic, partitions, offset)
                    acked[group] = offset
        except (OSError, ConnectionError):
            return  # the broker died under us

    threads = [threading.Thread(target=committer, args=(g,), daemon=True) for g in groups]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 30
    while min(acked.values()) < 50 and time.monotonic() < deadline:
        time.sleep(0.01)
    b.kill()  # while every committer still has a commit in flight
    stop.set()
    for t in threads:
        t.join(10)
    assert min(acked.values()) >= 50, acked

    b.start()
    with b.connect() as c:
        after = fetch_all(c, groups)
    for g in groups:
        offsets = set(after[g].values())
        assert sorted(after[g]) == [(unique_topic, p) for p in range(partitions)], g
        assert len(offsets) == 1, f"{g}: a commit request was applied in part: {after[g]}"
        (offset,) = offsets
        # Acknowledged means durable; an unacknowledged one may or may not have made it.
        assert acked[g] <= offset <= sent[g], (g, acked[g], offset, sent[g])


# --- KIP-211 expiry across a restart ----------------------------------------------------------------
RETENTION_MS = 60_000  # offsets.retention.minutes = 1
OFFSETS_PARTITIONS = 5


def faketime_library() -> str | None:
    for pattern in ("/usr/lib/*/faketime/libfaketime.so.1", "/usr/lib/faketime/libfaketime.so.1"):
        found = sorted(glob.glob(pattern))
        if found:
            return found[0]
    return None


@pytest.fixture
def shifted_start(monkeypatch: pytest.MonkeyPatch) -> Iterator[object]:
    """``start(broker, shift_ms)``: start a broker whose clock runs ``shift_ms`` ahead.

    The broker process gets libfaketime (LD_PRELOAD + FAKETIME). Without libfaketime the test
    using this fixture is skipped before it starts anything. Returns the shift applied.
    """
    lib = faketime_library()
    if lib is None:
        pytest.skip("libfaketime not installed (Debian package faketime): cannot shift the clock")

    def start(broker: BrokerProcess, shift_ms: int) -> int:
        if shift_ms <= 0:
            broker.start()
            return 0
        shift_s = shift_ms // 1000
        with monkeypatch.context() as m:  # the environment of the child only
            m.setenv("LD_PRELOAD", lib)
            m.setenv("FAKETIME", f"+{shift_s}s")
            m.setenv("FAKETIME_DONT_FAKE_MONOTONIC", "1")
            m.setenv("FAKETIME_DONT_RESET", "1")
            broker.start()
        return shift_s * 1000

    yield start


def join_and_sync(c: Conn, group: str, topic: str) -> tuple[str, int]:
    """A one-member consumer group through JoinGroup v3 / SyncGroup v2: (member id, generation)."""
    join = c.request(
        ApiKey.JoinGroup,
        3,
        group_id=group,
        session_timeout_ms=10_000,
        rebalance_timeout_ms=10_000,
        member_id="",
        protocol_type="consumer",
        protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=b"")],
    )
    assert join.error_code == 0
    sync = c.request(
        ApiKey.SyncGroup,
        2,
        group_id=group,
        generation_id=join.generation_id,
        member_id=join.member_id,
        assignments=[SyncGroupRequest.SyncGroupRequestAssignment(member_id=join.member_id, assignment=b"")],
    )
    assert sync.error_code == 0
    return join.member_id, join.generation_id


def records_for(c: Conn, group: str, key: bytes) -> list[tuple[int, int, bytes | None]]:
    return coordinator_log.records_for(c, group, key, OFFSETS_PARTITIONS)


def test_expiry_counts_from_empty_time_across_restart(
    broker_factory: BrokerFactory, unique_topic: str, shifted_start
) -> None:  # type: ignore[no-untyped-def]
    b = broker_factory(
        [
            "--group-initial-rebalance-delay-ms",
            "0",
            "--offsets-topic-num-partitions",
            str(OFFSETS_PARTITIONS),
            "--offsets-retention-minutes",
            "1",
            "--offsets-retention-check-interval-ms",
            "500",
        ]
    )
    b.create_topic(unique_topic, 2)
    group, standalone = unique_topic + "-consumers", unique_topic + "-standalone"
    with b.connect() as c:
        member, generation = join_and_sync(c, group, unique_topic)
        commit(c, group, unique_topic, 2, 17, generation, member)
        commit(c, standalone, unique_topic, 2, 23)
        assert c.request(ApiKey.LeaveGroup, 0, group_id=group, member_id=member).error_code == 0
        # The group is Empty now; its last group record holds when it became so (KIP-211).
        value = parse_group_value(records_for(c, group, group_key(group))[-1][2])  # type: ignore[arg-type]
        assert (value["version"], value["protocol_type"], value["members"]) == (3, "consumer", [])
        empty_at = value["current_state_timestamp"]
        record = records_for(c, standalone, offset_key(standalone, unique_topic, 0))[-1]
        commit_ts = parse_offset_value(record[2])["commit_timestamp"]  # type: ignore[arg-type]

    b.kill()
    # Restart when the group has been Empty for all but ~5 s of its retention: counted from the
    # restart, the offsets would live another minute; counted from Empty-time, 5 more seconds.
    shift = max(0, RETENTION_MS - 5_000 - (int(time.time() * 1000) - empty_at))
    clock_shift = shifted_start(b, shift)
    restarted_at = int(time.time() * 1000) + clock_shift  # on the broker's clock

    with b.connect() as c:
        before = fetch_all(c, [group, standalone])
        # Nothing is lost by the restart itself (unless the retention already ran out).
        if restarted_at < empty_at + RETENTION_MS - 1_000:
            assert before[group] == {(unique_topic, 0): 17, (unique_topic, 1): 17}
            d = c.request(
                ApiKey.DescribeGroups, 5, groups=[group], include_authorized_operations=False
            ).groups[0]
            assert (d.group_state, d.protocol_type, d.members) == ("Empty", "consumer", [])

        # Counted from the restart the deadline would be restarted_at + retention: well after
        # this wait (40 s of real time, at most).
        deadline = time.monotonic() + 40
        while time.monotonic() < deadline:
            left = fetch_all(c, [group, standalone])
            if not left[group] and not left[standalone]:
                break
            time.sleep(0.2)
        else:
            raise AssertionError(f"offsets not expired 40 s after restart: {left}")

        for g, base in ((group, empty_at), (standalone, commit_ts)):
            for p in range(2):
                tombstones = [
                    ts for _, ts, v in records_for(c, g, offset_key(g, unique_topic, p)) if v is None
                ]
                assert len(tombstones) == 1, (g, p)
                # Not before Empty-time (or commit time) + retention, and not counted from restart.
                assert base + RETENTION_MS <= tombstones[0] < restarted_at + RETENTION_MS, (g, p)
            # Both groups are gone, each with a tombstone for its group record.
            assert records_for(c, g, group_key(g))[-1][2] is None
        d = c.request(ApiKey.DescribeGroups, 5, groups=[group], include_authorized_operations=False).groups[0]
        assert d.group_state == "Dead"


# --- logs written by older Kafka versions -------------------------------------------------------------
def _s(s: str | None) -> bytes:
    if s is None:
        return struct.pack(">h", -1)
    b = s.encode()
    return struct.pack(">h", len(b)) + b


def _cs(s: str | None) -> bytes:
    """A compact (flexible-version) string: uvarint length + 1, 0 for null."""
    if s is None:
        return b"\x00"
    b = s.encode()
    assert len(b) < 127
    return bytes([len(b) + 1]) + b


def old_offset_value(
    version: int, offset: int, commit_ts: int, expire_ts: int = -1, epoch: int = -1
) -> bytes:
    """OffsetCommitValue as Kafka wrote it: v0 (0.8.2-0.10.0), v1 (+ expire, to 2.0), v2 (2.1),
    v4 (flexible)."""
    if version == 0:
        return struct.pack(">hq", 0, offset) + _s("") + struct.pack(">q", commit_ts)
    if version == 1:
        return struct.pack(">hq", 1, offset) + _s("") + struct.pack(">qq", commit_ts, expire_ts)
    if version == 2:
        return struct.pack(">hq", 2, offset) + _s("") + struct.pack(">q", commit_ts)
    assert version == 4
    return struct.pack(">hqi", 4, offset, epoch) + _cs("") + struct.pack(">q", commit_ts) + b"\x00"


def old_group_value(version: int, generation: int, state_ts: int = -1) -> bytes:
    """An Empty consumer group's GroupMetadataValue: v1 (before KIP-211, no
    current_state_timestamp), v2 (2.1), v4 (flexible)."""
    if version == 4:
        return (
            struct.pack(">h", 4)
            + _cs("consumer")
            + struct.pack(">i", generation)
            + _cs(None)
            + _cs(None)
            + struct.pack(">q", state_ts)
            + b"\x01"  # compact array of 0 members
            + b"\x00"  # tagged fields
        )
    out = struct.pack(">h", version) + _s("consumer") + struct.pack(">i", generation) + _s(None) + _s(None)
    if version >= 2:
        out += struct.pack(">q", state_ts)
    return out + struct.pack(">i", 0)


def test_replays_logs_written_by_older_kafka(broker_factory: BrokerFactory, unique_topic: str) -> None:
    """A __consumer_offsets written by Kafka 0.10 to 3.x (every value version) loads and serves,
    and KIP-211 expiry follows Kafka's rules for each: an Empty group whose record predates
    current_state_timestamp (value v0/v1) expires offsets from their commit timestamps."""
    b = broker_factory(
        [
            "--offsets-topic-num-partitions",
            str(OFFSETS_PARTITIONS),
            "--offsets-retention-minutes",
            "1",
            "--offsets-retention-check-interval-ms",
            "500",
        ],
        start=False,
    )
    now = int(time.time() * 1000)
    t = unique_topic
    g_old, g_v2, g_v4, g_standalone = (f"{t}-{x}" for x in ("old", "v2", "v4", "standalone"))
    records: list[tuple[str, bytes, bytes | None]] = [
        # Kafka 1.x: group value v1, offset value v0; one offset later deleted.
        (g_old, offset_key(g_old, t, 0), old_offset_value(0, 100, now - 120_000)),
        (g_old, offset_key(g_old, t, 1), old_offset_value(0, 101, now - 120_000)),
        (g_old, group_key(g_old), old_group_value(1, 5)),
        (g_old, offset_key(g_old, t, 1), None),
        # Kafka 2.1: value v2 each; Empty for 10 s only, so 50 s of retention are left.
        (g_v2, offset_key(g_v2, t, 0), old_offset_value(2, 200, now - 120_000)),
        (g_v2, group_key(g_v2), old_group_value(2, 7, now - 10_000)),
        # Flexible versions (v4).
        (g_v4, offset_key(g_v4, t, 0), old_offset_value(4, 300, now, epoch=3)),
        (g_v4, group_key(g_v4), old_group_value(4, 9, now)),
        # A retention time from an old client: its expire timestamp wins over the commit time.
        (
            g_standalone,
            offset_key(g_standalone, t, 0),
            old_offset_value(1, 400, now - 7_200_000, now + 3_600_000),
        ),
    ]
    by_partition: dict[int, list[tuple[bytes, bytes | None, int]]] = {}
    for group, key, value in records:
        by_partition.setdefault(offsets_partition(group, OFFSETS_PARTITIONS), []).append((key, value, now))
    # Kafka creates every partition's directory with the topic, and the partition count of an
    # existing topic is read back from them: an empty last partition still has its directory.
    for p in range(OFFSETS_PARTITIONS):
        d = b.data_dir / f"__consumer_offsets-{p}"
        d.mkdir(parents=True)
        if p in by_partition:
            (d / "00000000000000000000.log").write_bytes(build_batch(by_partition[p]))
    b.start()

    def offsets(c: Conn) -> dict[str, dict[tuple[str, int], int]]:
        return fetch_all(c, [g_old, g_v2, g_v4, g_standalone])

    with b.connect() as c:
        deadline = time.monotonic() + 20
        while offsets(c)[g_old]:
            assert time.monotonic() < deadline, f"{g_old} kept offsets committed 2 minutes ago: {offsets(c)}"
            time.sleep(0.2)
        assert offsets(c) == {
            g_old: {},
            g_v2: {(t, 0): 200},
            g_v4: {(t, 0): 300},
            g_standalone: {(t, 0): 400},
        }
        resp = c.request(
            ApiKey.OffsetFetch, 8, groups=[FGroup(group_id=g_v4, topics=None)], require_stable=False
        )
        assert resp.groups[0].topics[0].partitions[0].committed_leader_epoch == 3
        described = c.request(
            ApiKey.DescribeGroups, 5, groups=[g_old, g_v2, g_v4], include_authorized_operations=False
        ).groups
        assert [(d.group_state, d.protocol_type) for d in described] == [
            ("Dead", ""),
            ("Empty", "consumer"),
            ("Empty", "consumer"),
        ]


def test_existing_offsets_topic_keeps_its_partition_count(
    broker_factory: BrokerFactory, unique_topic: str
) -> None:
    """offsets.topic.num.partitions applies when __consumer_offsets is created, as in Kafka: a
    broker restarted with another count (here the default, 1) still finds every group in the
    partition the first count put it in, and serves the topic with its original partitions."""
    b = broker_factory(["--offsets-topic-num-partitions", "7"])
    b.create_topic(unique_topic, 2)
    # unique_topic is random, so add groups until every one of the 7 partitions holds some.
    groups = [f"{unique_topic}-g{i}" for i in range(12)]
    while len({offsets_partition(g, 7) for g in groups}) < 7:
        groups.append(f"{unique_topic}-g{len(groups)}")
    with b.connect() as c:
        for i, g in enumerate(groups):
            commit(c, g, unique_topic, 2, 100 + i)
    b.stop()
    b.extra_args = []
    b.start()
    with b.connect() as c:
        got = fetch_all(c, groups)
        assert got == {
            g: {(unique_topic, 0): 100 + i, (unique_topic, 1): 100 + i} for i, g in enumerate(groups)
        }
        md = c.request(
            ApiKey.Metadata,
            12,
            topics=None,
            allow_auto_topic_creation=False,
            include_topic_authorized_operations=False,
        )
        (offsets,) = [t for t in md.topics if t.name == "__consumer_offsets"]
        assert sorted(p.partition_index for p in offsets.partitions) == list(range(7))
    assert "keeping its partition count" in b.log_text()
