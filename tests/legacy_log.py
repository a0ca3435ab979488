"""The coordinator state a client sees, read over the wire only, for the legacy log fixture.

``tests/data/make_legacy_coordinator_log.py`` writes ``tests/data/legacy-coordinator-log/`` (a
broker data directory) and ``legacy-coordinator-log.expected.json`` (what :func:`observe` saw
right before that broker stopped); ``tests/integration/test_legacy_log.py`` starts a broker on a
copy and compares. Both sides use the functions here, so they look at the state the same way.

Only the wire protocol (kcoord.protocol, tests/wire.py) and file reading are used: nothing of
kcoord.broker, whose modules move between versions while the log bytes must not.
"""

from __future__ import annotations

import struct
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

from kcoord.protocol import records
from kcoord.protocol.messages import request_class
from tests.unit.logutil import written_headers
from tests.wire import ApiKey, Conn, api

DATA = Path(__file__).resolve().parent / "data"
FIXTURE_DIR = DATA / "legacy-coordinator-log"
EXPECTED_JSON = DATA / "legacy-coordinator-log.expected.json"
OFFSETS_DIR = "__consumer_offsets-0"

# Flags of every broker started on the fixture, the writer's included. Nothing may expire or be
# compacted however old the fixture gets: offsets live 100 years, topic data is never deleted,
# the cleaner waits a day. Small segments so the fixture stays small and replay crosses
# segment boundaries.
BROKER_ARGS = [
    "--offsets-topic-num-partitions", "1",
    "--offsets-topic-segment-bytes", "4096",
    "--log-segment-bytes", "2048",
    "--offsets-retention-minutes", str(100 * 365 * 24 * 60),
    "--log-retention-ms", "-1",
    "--log-cleaner-backoff-ms", str(24 * 3_600_000),
    "--group-initial-rebalance-delay-ms", "500",
]  # fmt: skip

# The groups the fixture holds (all in __consumer_offsets-0).
STABLE = "legacy-stable"  # classic, Stable, a static and a dynamic member
EMPTY = "legacy-empty"  # classic, its only member left
STANDALONE = "legacy-standalone"  # commits with generation -1, no group record
DELETED = "legacy-deleted"  # classic, deleted with DeleteGroups
SHARE = "legacy-share"  # share group
CLASSIC_GROUPS = [STABLE, EMPTY, STANDALONE, DELETED]
ALL_GROUPS = [*CLASSIC_GROUPS, SHARE]
ORDERS, PAYMENTS, SHARE_TOPIC = "legacy-orders", "legacy-payments", "legacy-share-topic"

RESOURCE_GROUP = 32
CONFIG_SOURCE_GROUP = 8
ACCEPT, RELEASE, REJECT = 1, 2, 3


def call(c: Conn, key: int, version: int, client_id: str = "kcoord-tests", **fields: Any) -> Any:
    corr = c.send(key, version, client_id=client_id, **fields)
    return c.recv(key, version, corr)


# --- observing the state -------------------------------------------------------------------------
def offsets(c: Conn, groups: list[str]) -> dict[str, Any]:
    """OffsetFetch v8 of every topic: {group: {topic: {partition: [offset, leader epoch, metadata]}}}."""
    req = request_class(ApiKey.OffsetFetch)
    resp = c.request(
        ApiKey.OffsetFetch,
        8,
        groups=[req.OffsetFetchRequestGroup(group_id=g, topics=None) for g in groups],
        require_stable=False,
    )
    out: dict[str, Any] = {}
    for g in resp.groups:
        assert g.error_code == 0, g
        got: dict[str, Any] = {}
        for t in g.topics:
            for p in t.partitions:
                assert p.error_code == 0, (g.group_id, t.name, p)
                got.setdefault(t.name, {})[str(p.partition_index)] = [
                    p.committed_offset,
                    p.committed_leader_epoch,
                    p.metadata,
                ]
        out[g.group_id] = {t: dict(sorted(ps.items())) for t, ps in sorted(got.items())}
    return out


def describe_groups(c: Conn, groups: list[str]) -> dict[str, Any]:
    """DescribeGroups v5: state, protocol type and protocol, members (sorted by member id)."""
    resp = c.request(ApiKey.DescribeGroups, 5, groups=groups, include_authorized_operations=False)
    out = {}
    for d in resp.groups:
        members = [
            {
                "member_id": m.member_id,
                "group_instance_id": m.group_instance_id,
                "client_id": m.client_id,
                "client_host": m.client_host,
                "metadata": bytes(m.member_metadata).hex(),
                "assignment": bytes(m.member_assignment).hex(),
            }
            for m in d.members
        ]
        out[d.group_id] = {
            "error_code": d.error_code,
            "state": d.group_state,
            "protocol_type": d.protocol_type,
            "protocol": d.protocol_data,
            "members": sorted(members, key=lambda m: m["member_id"]),
        }
    return out


def list_groups(c: Conn) -> list[list[str]]:
    """ListGroups v5: [group id, group type], sorted (states differ for share groups: their
    members are not persisted)."""
    resp = c.request(ApiKey.ListGroups, 5, states_filter=[], types_filter=[])
    assert resp.error_code == 0, resp
    return sorted([g.group_id, g.group_type] for g in resp.groups)


def share_offsets(c: Conn, group: str) -> dict[str, Any]:
    """DescribeShareGroupOffsets v1: {topic: {"topic_id", partitions: {p: [start offset, lag]}}}."""
    cls = api(90, "DescribeShareGroupOffsets")
    resp = c.request(
        ApiKey(90), 1, groups=[cls.DescribeShareGroupOffsetsRequestGroup(group_id=group, topics=None)]
    )
    (g,) = resp.groups
    assert g.error_code == 0, g
    out = {}
    for t in g.topics:
        parts = {}
        for p in t.partitions:
            assert p.error_code == 0, p
            parts[str(p.partition_index)] = [p.start_offset, p.lag]
        out[t.topic_name] = {"topic_id": str(t.topic_id), "partitions": dict(sorted(parts.items()))}
    return dict(sorted(out.items()))


def group_config_overrides(c: Conn, group: str) -> dict[str, str]:
    """DescribeConfigs v4 of a GROUP resource: the configs the group overrides (source GROUP_CONFIG)."""
    req = request_class(ApiKey.DescribeConfigs)
    resp = c.request(
        ApiKey.DescribeConfigs,
        4,
        resources=[
            req.DescribeConfigsResource(
                resource_type=RESOURCE_GROUP, resource_name=group, configuration_keys=None
            )
        ],
        include_synonyms=False,
        include_documentation=False,
    )
    (r,) = resp.results
    assert r.error_code == 0, r
    return {
        e.name: e.value
        for e in sorted(r.configs, key=lambda e: e.name)
        if e.config_source == CONFIG_SOURCE_GROUP
    }


def observe(c: Conn) -> dict[str, Any]:
    """Everything the fixture's expected JSON holds, as a client sees it now."""
    return {
        "list_groups": list_groups(c),
        "offsets": offsets(c, ALL_GROUPS[:-1]),
        "describe_groups": describe_groups(c, CLASSIC_GROUPS),
        "share_offsets": {SHARE: share_offsets(c, SHARE)},
        "group_configs": {SHARE: group_config_overrides(c, SHARE)},
    }


# --- a raw share consumer (ShareGroupHeartbeat v1, ShareFetch v1, ShareAcknowledge v1) -----------------
class ShareMember:
    """One share group member on one connection; ``epoch`` is the share session epoch."""

    def __init__(
        self, c: Conn, group: str, topics: list[str], client_id: str = "legacy-share-client"
    ) -> None:
        self.c, self.group, self.topics, self.client_id = c, group, topics, client_id
        self.member_id = str(uuid.uuid4())
        self.member_epoch = 0
        self.assignment: dict[uuid.UUID, list[int]] = {}
        self.epoch = 0

    def heartbeat(self) -> Any:
        api(76, "ShareGroupHeartbeat")
        resp = call(
            self.c,
            76,
            1,
            client_id=self.client_id,
            group_id=self.group,
            member_id=self.member_id,
            member_epoch=self.member_epoch,
            rack_id=None,
            subscribed_topic_names=self.topics if self.member_epoch == 0 else None,
        )
        assert resp.error_code == 0, resp
        self.member_epoch = resp.member_epoch
        if resp.assignment is not None:
            self.assignment = {t.topic_id: sorted(t.partitions) for t in resp.assignment.topic_partitions}
        return resp

    def join(self, partitions: int, timeout: float = 20.0) -> None:
        """Heartbeat until ``partitions`` partitions are assigned."""
        deadline = time.monotonic() + timeout
        while sum(len(ps) for ps in self.assignment.values()) < partitions:
            assert time.monotonic() < deadline, f"no assignment of {partitions} partitions: {self.assignment}"
            self.heartbeat()
            if sum(len(ps) for ps in self.assignment.values()) < partitions:
                time.sleep(0.2)

    def _acks(
        self, acks: dict[tuple[uuid.UUID, int], list[tuple[int, int, int]]]
    ) -> dict[uuid.UUID, dict[int, list]]:
        out: dict[uuid.UUID, dict[int, list]] = {}
        for (tid, p), batches in acks.items():
            out.setdefault(tid, {})[p] = batches
        return out

    def fetch(
        self,
        max_records: int,
        acks: dict[tuple[uuid.UUID, int], list[tuple[int, int, int]]] | None = None,
        max_wait_ms: int = 500,
    ) -> list[tuple[uuid.UUID, int, int, int]]:
        """ShareFetch of every assigned partition (acknowledging ``acks``: (first, last, type)
        per partition); returns the acquired (topic id, partition, offset, delivery count)."""
        req = api(78, "ShareFetch")
        by_topic = self._acks(acks or {})
        topics = [
            req.FetchTopic(
                topic_id=tid,
                partitions=[
                    req.FetchTopic.FetchPartition(
                        partition_index=p,
                        partition_max_bytes=0,
                        acknowledgement_batches=[
                            req.FetchTopic.FetchPartition.AcknowledgementBatch(
                                first_offset=a, last_offset=b, acknowledge_types=[t]
                            )
                            for a, b, t in by_topic.get(tid, {}).get(p, [])
                        ],
                    )
                    for p in ps
                ],
            )
            for tid, ps in sorted(self.assignment.items(), key=lambda kv: str(kv[0]))
        ]
        resp = call(
            self.c,
            78,
            1,
            client_id=self.client_id,
            group_id=self.group,
            member_id=self.member_id,
            share_session_epoch=self.epoch,
            max_wait_ms=max_wait_ms,
            min_bytes=1,
            max_bytes=1 << 20,
            max_records=max_records,
            batch_size=max_records,
            topics=topics,
            forgotten_topics_data=[],
        )
        assert resp.error_code == 0, resp
        self.epoch += 1
        got = []
        for t in resp.responses:
            for p in t.partitions:
                assert p.error_code == 0 and p.acknowledge_error_code == 0, p
                for a in p.acquired_records:
                    for o in range(a.first_offset, a.last_offset + 1):
                        got.append((t.topic_id, p.partition_index, o, a.delivery_count))
        return sorted(got, key=lambda x: (str(x[0]), x[1], x[2]))

    def acknowledge(self, acks: dict[tuple[uuid.UUID, int], list[tuple[int, int, int]]]) -> None:
        req = api(79, "ShareAcknowledge")
        topics = [
            req.AcknowledgeTopic(
                topic_id=tid,
                partitions=[
                    req.AcknowledgeTopic.AcknowledgePartition(
                        partition_index=p,
                        acknowledgement_batches=[
                            req.AcknowledgeTopic.AcknowledgePartition.AcknowledgementBatch(
                                first_offset=a, last_offset=b, acknowledge_types=[t]
                            )
                            for a, b, t in batches
                        ],
                    )
                    for p, batches in sorted(parts.items())
                ],
            )
            for tid, parts in self._acks(acks).items()
        ]
        resp = call(
            self.c,
            79,
            1,
            client_id=self.client_id,
            group_id=self.group,
            member_id=self.member_id,
            share_session_epoch=self.epoch,
            topics=topics,
        )
        assert resp.error_code == 0, resp
        for t in resp.responses:
            for p in t.partitions:
                assert p.error_code == 0, p
        self.epoch += 1


def redeliveries(c: Conn, topic_names: dict[uuid.UUID, str], partitions: int) -> list[list[Any]]:
    """What a new member of the share group is given: [topic, partition, offset, delivery count]
    of every record acquired until a fetch brings nothing more (nothing is acknowledged)."""
    m = ShareMember(c, SHARE, [SHARE_TOPIC], client_id="legacy-share-reader")
    m.join(partitions)
    got: list[tuple[uuid.UUID, int, int, int]] = []
    empty = 0
    while empty < 2:  # two empty answers in a row: nothing more to give
        batch = m.fetch(1000, max_wait_ms=300)
        got.extend(batch)
        empty = 0 if batch else empty + 1
    return sorted([topic_names[t], p, o, dc] for t, p, o, dc in got)


# --- the fixture's coordinator log, read from its files ---------------------------------------------
def coordinator_records(data_dir: Path) -> list[tuple[int, bytes, bytes | None]]:
    """(offset, key, value) of every record in ``__consumer_offsets-0``'s segments, in log order."""
    out = []
    for seg in sorted((data_dir / OFFSETS_DIR).glob("*.log")):
        data = seg.read_bytes()
        for h in written_headers(data):  # a running broker's active segment ends in zeros
            batch = data[h.position : h.position + h.size]
            assert records.crc_of(batch, 0, h.size) == h.crc, f"CRC mismatch in {seg.name} at {h.base_offset}"
            for offset, key, value in records.iter_key_values(batch, records.read_header(batch)):
                assert key is not None
                out.append((offset, key, value))
    return out


# What the fixture must hold, each satisfied by any of its census kinds (offset keys may be
# Kafka's legacy type 0 or type 1).
REQUIRED_KINDS = {
    "offset commit (type 0/1)": ("type 0", "type 1"),
    "offset commit value v3": ("type 0 value v3", "type 1 value v3"),
    "offset commit value v1": ("type 0 value v1", "type 1 value v1"),
    "offset tombstone": ("type 0 tombstone", "type 1 tombstone"),
    "group metadata value v3 (type 2)": ("type 2 value v3",),
    "group tombstone": ("type 2 tombstone",),
    "SHARE_CHECKPOINT (type 100)": ("type 100 value v0",),
    "SHARE_DELTA (type 101)": ("type 101 value v0",),
    "share group epoch (type 102)": ("type 102 value v0",),
    "group configs (type 103)": ("type 103 value v0",),
}


def missing_kinds(counts: dict[str, int]) -> list[str]:
    """The REQUIRED_KINDS a census lacks."""
    return [name for name, kinds in REQUIRED_KINDS.items() if not any(counts.get(k) for k in kinds)]


def census(data_dir: Path) -> dict[str, int]:
    """How many records of each kind the coordinator log holds: ``type T`` (record key type),
    ``type T value vV`` (value version), ``type T tombstone``."""
    counts: Counter[str] = Counter()
    for _, key, value in coordinator_records(data_dir):
        (kind,) = struct.unpack_from(">h", key, 0)
        counts[f"type {kind}"] += 1
        if value is None:
            counts[f"type {kind} tombstone"] += 1
        else:
            (version,) = struct.unpack_from(">h", value, 0)
            counts[f"type {kind} value v{version}"] += 1
    return dict(sorted(counts.items()))
