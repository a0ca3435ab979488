"""Helpers for the tests of KIP-848 consumer groups (group.protocol=consumer) with real clients:
the broker flags that make them fast, the group as ConsumerGroupDescribe shows it, a producer that
keeps producing while members come and go, and waiting on a condition with a readable failure."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import kcoord.apis.consumer_groups  # noqa: F401 - registers the ConsumerGroup* message classes
from kcoord.groups.consumer_protocol import decode_assignment
from tests.harness import BrokerProcess
from tests.wire import ApiKey, Conn, build_batch

SESSION_TIMEOUT_MS = 6000
HEARTBEAT_INTERVAL_MS = 500


def consumer_group_flags(
    session_timeout_ms: int = SESSION_TIMEOUT_MS, heartbeat_interval_ms: int = HEARTBEAT_INTERVAL_MS
) -> list[str]:
    """Broker flags: no initial rebalance delay, fast heartbeats, a short session timeout."""
    return [
        "--group-initial-rebalance-delay-ms", "0",
        "--group-consumer-heartbeat-interval-ms", str(heartbeat_interval_ms),
        "--group-consumer-session-timeout-ms", str(session_timeout_ms),
    ]  # fmt: skip


# --- the group as the broker sees it ------------------------------------------------------------
@dataclass(frozen=True)
class Member:
    member_id: str
    instance_id: str | None
    client_id: str
    client_host: str
    member_epoch: int
    assigned: frozenset[tuple[str, int]]  # (topic, partition)
    target: frozenset[tuple[str, int]]
    subscribed_topic_names: tuple[str, ...]
    subscribed_topic_regex: str | None
    member_type: int  # ConsumerGroupDescribe v1: 0 classic protocol, 1 consumer protocol (-1 on v0)


@dataclass(frozen=True)
class Group:
    error_code: int
    state: str
    group_epoch: int
    assignment_epoch: int
    assignor: str
    members: tuple[Member, ...]

    def member(self, client_id: str) -> Member:
        found = [m for m in self.members if m.client_id == client_id]
        assert len(found) == 1, f"one member with client id {client_id!r} expected: {self}"
        return found[0]


def _partitions(assignment: Any) -> frozenset[tuple[str, int]]:
    return frozenset((tp.topic_name, p) for tp in assignment.topic_partitions for p in tp.partitions)


def describe_group(broker: BrokerProcess, group: str) -> Group:
    """ConsumerGroupDescribe v1 of one group."""
    with broker.connect() as c:
        resp = c.request(
            ApiKey.ConsumerGroupDescribe, 1, group_ids=[group], include_authorized_operations=False
        )
    g = resp.groups[0]
    members = tuple(
        sorted(
            (
                Member(
                    member_id=m.member_id,
                    instance_id=m.instance_id,
                    client_id=m.client_id,
                    client_host=m.client_host,
                    member_epoch=m.member_epoch,
                    assigned=_partitions(m.assignment),
                    target=_partitions(m.target_assignment),
                    subscribed_topic_names=tuple(sorted(m.subscribed_topic_names)),
                    subscribed_topic_regex=m.subscribed_topic_regex,
                    member_type=m.member_type,
                )
                for m in g.members
            ),
            key=lambda m: m.client_id,
        )
    )
    return Group(g.error_code, g.group_state, g.group_epoch, g.assignment_epoch, g.assignor_name, members)


def is_stable(g: Group, clients: int) -> bool:
    """Stable with ``clients`` members, each reconciled to its target."""
    if g.state != "Stable" or len(g.members) != clients:
        return False
    return all(m.assigned == m.target and m.member_epoch == g.assignment_epoch for m in g.members)


def wait_stable(broker: BrokerProcess, group: str, clients: int, what: str, timeout: float = 30.0) -> Group:
    """Until the group is Stable with ``clients`` reconciled members; the failure shows the group
    as last described."""
    last: list[Group] = []

    def probe() -> Group | None:
        last[:] = [describe_group(broker, group)]
        return last[0] if is_stable(last[0], clients) else None

    try:
        return wait_until(probe, what, timeout)  # type: ignore[no-any-return]
    except AssertionError:
        raise AssertionError(
            f"timed out after {timeout}s waiting for {what}; last described: {last}"
        ) from None


@dataclass(frozen=True)
class ClassicMember:
    member_id: str
    client_id: str
    assigned: frozenset[tuple[str, int]]  # (topic, partition), decoded from the consumer protocol


@dataclass(frozen=True)
class ClassicGroup:
    error_code: int
    state: str
    protocol_type: str
    protocol: str
    members: tuple[ClassicMember, ...]


def describe_classic_group(broker: BrokerProcess, group: str) -> ClassicGroup:
    """DescribeGroups v5 of one group (a consumer group is Dead there: not a classic group)."""
    with broker.connect() as c:
        g = c.request(ApiKey.DescribeGroups, 5, groups=[group], include_authorized_operations=False).groups[0]
    members = tuple(
        sorted(
            (
                ClassicMember(
                    m.member_id,
                    m.client_id,
                    frozenset(
                        (t, p) for t, ps in decode_assignment(bytes(m.member_assignment)).items() for p in ps
                    ),
                )
                for m in g.members
            ),
            key=lambda m: m.client_id,
        )
    )
    return ClassicGroup(g.error_code, g.group_state, g.protocol_type, g.protocol_data, members)


# --- waiting --------------------------------------------------------------------------------------
def wait_until(probe: Callable[[], Any], what: str, timeout: float = 30.0, interval: float = 0.1) -> Any:
    """Until ``probe()`` is truthy; returns it. The failure shows the last value seen."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}; last seen: {value!r}")
        time.sleep(interval)


# --- producing ------------------------------------------------------------------------------------
def produce(
    broker: BrokerProcess, topic: str, partitions: int, per_partition: int, start: int = 0, prefix: str = ""
) -> None:
    """``per_partition`` records on each partition, value "<prefix>p<partition>-<n>" for n from
    ``start`` (so on a new topic a record's offset is n)."""
    with broker.connect() as c:
        for p in range(partitions):
            values = [f"{prefix}p{p}-{start + i}".encode() for i in range(per_partition)]
            recs = [(None, v, 1_700_000_000_000 + i) for i, v in enumerate(values)]
            assert c.produce(topic, p, build_batch(recs)).error_code == 0


class Producer(threading.Thread):
    """Produces one record to each partition of a new topic in turn, every ``interval`` seconds,
    until stopped; ``produced[p]`` counts partition p's records (record n has offset n)."""

    def __init__(self, broker: BrokerProcess, topic: str, partitions: int, interval: float = 0.01) -> None:
        super().__init__(daemon=True)
        self.broker, self.topic, self.partitions, self.interval = broker, topic, partitions, interval
        self.produced = [0] * partitions
        self._done = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            with Conn(self.broker.host, self.broker.port) as c:
                while not self._done.is_set():
                    for p in range(self.partitions):
                        n = self.produced[p]
                        batch = build_batch([(None, f"p{p}-{n}".encode(), 1_700_000_000_000 + n)])
                        assert c.produce(self.topic, p, batch).error_code == 0
                        self.produced[p] += 1
                    time.sleep(self.interval)
        except BaseException as e:  # reported by stop()
            self.error = e

    def total(self) -> int:
        return sum(self.produced)

    def stop(self) -> set[tuple[int, int]]:
        """Stop; every (partition, offset) produced."""
        self._done.set()
        self.join(10)
        assert self.error is None, f"producer failed: {self.error!r}"
        return {(p, o) for p in range(self.partitions) for o in range(self.produced[p])}
