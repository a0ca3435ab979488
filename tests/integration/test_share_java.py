"""The official Java client (kafka-clients 4.3) in share groups (KIP-932): KafkaShareConsumer and
the Admin's share group APIs, against one broker with short share timers (FAST_SHARE_FLAGS).

- two explicit-mode consumers share one partition: every record is delivered and accepted
  exactly once overall; describeShareGroups shows both members on the partition;
- RELEASE redelivers with a higher delivery count, REJECT never redelivers, and a record
  released every time is archived at share.delivery.count.limit (then the SPSO passes it);
- share.record.lock.duration.ms set by incrementalAlterConfigs on the GROUP resource: records a
  consumer holds without acknowledging go to the other consumer, with a higher delivery count;
- implicit acknowledgement (the default mode) with two members; Admin describeShareGroups
  (state, members, assignment), listShareGroupOffsets (start offsets, lag), alterShareGroupOffsets
  and deleteShareGroupOffsets (refused while members are active, then applied to the empty
  group: a new consumer starts at the altered offset), deleteShareGroups.

Every group sets share.auto.offset.reset=earliest first, so records produced before the
consumers start are seen.
"""

from __future__ import annotations

import pytest

from tests.harness import BrokerProcess, shared_broker
from tests.integration import share_probe
from tests.integration.share_probe import (
    FAST_SHARE_FLAGS,
    admin_until,
    close,
    commit_failures,
    delivered,
    deliveries,
    wait_until,
)
from tests.wire import build_batch

pytestmark = pytest.mark.java

# The share probe's fixtures, shared with the other share test module.
share_classpath = share_probe.share_classpath
java = share_probe.java

EXPLICIT = "share.acknowledgement.mode=explicit"


_sbroker_started, sbroker = shared_broker("sbroker", FAST_SHARE_FLAGS)


def produce(
    broker: BrokerProcess, topic: str, partition: int, count: int, start: int = 0, per_batch: int = 0
) -> None:
    """Records with values "v<n>" for n from ``start``, ``per_batch`` to a batch (0: one batch)."""
    per_batch = per_batch or count
    with broker.connect() as c:
        for b in range(start, start + count, per_batch):
            n = min(per_batch, start + count - b)
            recs = [(None, f"v{i}".encode(), 1_700_000_000_000 + i) for i in range(b, b + n)]
            assert c.produce(topic, partition, build_batch(recs)).error_code == 0


def test_two_consumers_accept_each_record_once(sbroker: BrokerProcess, java, unique_topic: str) -> None:  # type: ignore[no-untyped-def]
    group, n = unique_topic + "-g", 300
    sbroker.create_topic(unique_topic, 1)
    produce(sbroker, unique_topic, 0, n, per_batch=10)
    admin = java("admin", sbroker.bootstrap)
    assert admin.admin(f"set-config {group} share.auto.offset.reset=earliest") == []

    opts = (EXPLICIT, "max.poll.records=10", "pollDelayMs=10")
    a = java("consumer", sbroker.bootstrap, group, unique_topic, *opts, "client.id=c1")
    b = java("consumer", sbroker.bootstrap, group, unique_topic, *opts, "client.id=c2")

    def total() -> set[tuple[int, int]]:
        return set(delivered(a.snapshot())) | set(delivered(b.snapshot()))

    everything = {(0, o) for o in range(n)}
    a.wait_for(lambda _: total() >= everything, what=f"all {n} records between the two consumers")
    # Both members share the single partition.
    admin_until(
        admin,
        f"describe {group}",
        [
            f"DESC {group} Stable 2",
            f"MEMBER {group} c1 {unique_topic}-0",
            f"MEMBER {group} c2 {unique_topic}-0",
        ],
    )
    admin_until(admin, f"offsets {group}", [f"OFFSET {unique_topic} 0 {n} 0"])
    close(a, b)

    both = delivered(a.snapshot()) + delivered(b.snapshot())
    assert set(both) == everything
    assert [k for k, times in both.items() if times != 1] == []
    assert {dc for _, _, dc, _ in deliveries(a.snapshot()) + deliveries(b.snapshot())} == {1}
    assert commit_failures(a.snapshot()) == commit_failures(b.snapshot()) == []
    assert admin.admin(f"describe {group}") == [f"DESC {group} Empty 0"]


def test_release_reject_and_delivery_count_limit(sbroker: BrokerProcess, java, unique_topic: str) -> None:  # type: ignore[no-untyped-def]
    group, n = unique_topic + "-g", 20
    sbroker.create_topic(unique_topic, 1)
    produce(sbroker, unique_topic, 0, n)
    admin = java("admin", sbroker.bootstrap)
    settings = "share.auto.offset.reset=earliest share.delivery.count.limit=3"
    assert admin.admin(f"set-config {group} {settings}") == []

    # v3 is released once (then accepted), v5 rejected, v7 released at every delivery (poison).
    policy = ("releaseOnce=v3", "reject=v5", "release=v7")
    c = java("consumer", sbroker.bootstrap, group, unique_topic, EXPLICIT, *policy)
    # The SPSO passes v7 only once it is archived, after its third (last) delivery.
    admin_until(admin, f"offsets {group}", [f"OFFSET {unique_topic} 0 {n} 0"])
    produce(sbroker, unique_topic, 0, 1, start=n)  # one more record: the consumer is still fetching
    c.wait_for(lambda lines: (0, n) in delivered(lines), what="the record after the poison one")
    admin_until(admin, f"offsets {group}", [f"OFFSET {unique_topic} 0 {n + 1} 0"])
    close(c)

    counts: dict[str, list[int]] = {}
    for _, _, dc, v in deliveries(c.snapshot()):
        counts.setdefault(v, []).append(dc)
    assert counts.pop("v3") == [1, 2]  # RELEASE: redelivered with a higher delivery count
    assert counts.pop("v5") == [1]  # REJECT: never again
    assert counts.pop("v7") == [1, 2, 3]  # archived at share.delivery.count.limit=3
    assert counts == {f"v{i}": [1] for i in range(n + 1) if i not in (3, 5, 7)}
    assert commit_failures(c.snapshot()) == []


def test_lock_timeout_redelivers_to_other_consumer(sbroker: BrokerProcess, java, unique_topic: str) -> None:  # type: ignore[no-untyped-def]
    group, n = unique_topic + "-g", 30
    sbroker.create_topic(unique_topic, 1)
    produce(sbroker, unique_topic, 0, n)
    admin = java("admin", sbroker.bootstrap)
    settings = "share.auto.offset.reset=earliest share.record.lock.duration.ms=1000"
    assert admin.admin(f"set-config {group} {settings}") == []
    configs = admin.admin(f"get-config {group}")
    assert "CONFIG share.record.lock.duration.ms 1000 DYNAMIC_GROUP_CONFIG" in configs
    assert "CONFIG share.auto.offset.reset earliest DYNAMIC_GROUP_CONFIG" in configs

    # A acquires records and sits on them (no acknowledgement, no further poll, still a member).
    a = java("consumer", sbroker.bootstrap, group, unique_topic, EXPLICIT, "holdFrom=0", "client.id=a")
    a.wait_line("HELD")
    held = set(delivered(a.snapshot()))
    assert held
    b = java("consumer", sbroker.bootstrap, group, unique_topic, EXPLICIT, "client.id=b")
    b.wait_for(lambda lines: set(delivered(lines)) >= {(0, o) for o in range(n)}, what="every record at B")
    admin_until(admin, f"offsets {group}", [f"OFFSET {unique_topic} 0 {n} 0"])
    assert admin.admin(f"describe {group}")[0] == f"DESC {group} Stable 2"  # A was still a member
    close(a, b)

    # A's application saw each record once; B got them after A's lock lapsed: delivery count 2,
    # or 3 when A's client had fetched ahead in the background (it does, after a poll) and
    # re-acquired them into its buffer once before B's fetch came.
    assert delivered(a.snapshot()) == dict.fromkeys(held, 1)
    got_b = {(p, o): dc for p, o, dc, _ in deliveries(b.snapshot())}
    assert {k: got_b[k] for k in held if got_b[k] not in (2, 3)} == {}
    assert all(dc == 1 for k, dc in got_b.items() if k not in held)
    assert commit_failures(b.snapshot()) == []


def test_implicit_mode_and_admin_operations(sbroker: BrokerProcess, java, unique_topic: str) -> None:  # type: ignore[no-untyped-def]
    group, t, per = unique_topic + "-g", unique_topic, 20
    sbroker.create_topic(t, 2)
    for p in (0, 1):
        produce(sbroker, t, p, per)
    admin = java("admin", sbroker.bootstrap)
    assert admin.admin(f"set-config {group} share.auto.offset.reset=earliest") == []

    m1 = java("consumer", sbroker.bootstrap, group, t, "client.id=m1")  # implicit: the default
    m2 = java("consumer", sbroker.bootstrap, group, t, "client.id=m2")
    everything = {(p, o) for p in (0, 1) for o in range(per)}
    m1.wait_for(
        lambda _: set(delivered(m1.snapshot())) | set(delivered(m2.snapshot())) >= everything,
        what="all records",
    )
    # Implicit acknowledgements ride on the next ShareFetch: the start offsets reach the end.
    admin_until(admin, f"offsets {group}", [f"OFFSET {t} 0 {per} 0", f"OFFSET {t} 1 {per} 0"])

    def split_between_members() -> bool:
        out = admin.admin(f"describe {group}")
        return out in (
            [f"DESC {group} Stable 2", f"MEMBER {group} m1 {t}-0", f"MEMBER {group} m2 {t}-1"],
            [f"DESC {group} Stable 2", f"MEMBER {group} m1 {t}-1", f"MEMBER {group} m2 {t}-0"],
        )

    wait_until(split_between_members, "one partition per member")
    assert ["GROUP", group, "Stable", "Share"] in [x.split() for x in admin.admin("list")]

    # Members are active: the group can be neither deleted nor have its offsets changed.
    assert admin.admin(f"delete {group}") == [f"NOTDELETED {group} GroupNotEmptyException"]
    assert admin.admin(f"alter {group} {t}:0:5")[0].startswith("ERR GroupNotEmptyException")
    assert admin.admin(f"delete-offsets {group} {t}")[0].startswith("ERR GroupNotEmptyException")

    close(m1, m2)
    both = delivered(m1.snapshot()) + delivered(m2.snapshot())
    assert both == dict.fromkeys(everything, 1)
    assert commit_failures(m1.snapshot()) == commit_failures(m2.snapshot()) == []
    assert admin.admin(f"describe {group}") == [f"DESC {group} Empty 0"]

    # The empty group: partition 0 starts over at offset 5, and a new consumer sees 5..19 again.
    assert admin.admin(f"alter {group} {t}:0:5") == []
    assert admin.admin(f"offsets {group}") == [f"OFFSET {t} 0 5 {per - 5}", f"OFFSET {t} 1 {per} 0"]
    m3 = java("consumer", sbroker.bootstrap, group, t, "client.id=m3")
    m3.wait_for(lambda lines: len(delivered(lines)) >= per - 5, what="the records after the altered offset")
    admin_until(admin, f"offsets {group}", [f"OFFSET {t} 0 {per} 0", f"OFFSET {t} 1 {per} 0"])
    close(m3)
    got = sorted((p, o, dc) for p, o, dc, _ in deliveries(m3.snapshot()))
    assert got == [(0, o, 1) for o in range(5, per)]

    assert admin.admin(f"delete-offsets {group} {t}") == []
    assert admin.admin(f"offsets {group}") == []
    assert admin.admin(f"delete {group}") == [f"DELETED {group}"]
    assert admin.admin(f"describe {group}") == [f"DESCERR {group} GroupIdNotFoundException"]
    assert group not in " ".join(admin.admin("list"))
