"""Share groups across broker crashes (kill -9) and restarts, seen by the Java client
(kafka-clients 4.3 KafkaShareConsumer and Admin):

- records a consumer accepted (commitSync answered) are never delivered again after kill -9 and
  a restart; records it had acquired but not acknowledged are delivered again, as first
  deliveries (Acquired is transient: the seed's SHARE_CHECKPOINT examples);
- a consumer that stays up across the crash rejoins by itself and goes on consuming, without
  seeing any record it had accepted before;
- the group's share.* configs (incrementalAlterConfigs on the GROUP resource) and its
  share-partition start offsets, whether moved by acknowledgements or by
  alterShareGroupOffsets, survive kill -9.
"""

from __future__ import annotations

import pytest

from tests.harness import BrokerFactory, BrokerProcess
from tests.integration import share_probe
from tests.integration.share_probe import (
    FAST_SHARE_FLAGS,
    admin_until,
    close,
    commit_failures,
    delivered,
    deliveries,
)
from tests.wire import build_batch

pytestmark = [pytest.mark.java, pytest.mark.slow]

# The share probe's fixtures, shared with the other share test module.
share_classpath = share_probe.share_classpath
java = share_probe.java

EXPLICIT = "share.acknowledgement.mode=explicit"


def produce(broker: BrokerProcess, topic: str, start: int, count: int, per_batch: int = 10) -> None:
    with broker.connect() as c:
        for b in range(start, start + count, per_batch):
            recs = [(None, f"v{i}".encode(), 1_700_000_000_000 + i) for i in range(b, b + per_batch)]
            assert c.produce(topic, 0, build_batch(recs)).error_code == 0


def crash_and_restart(broker: BrokerProcess) -> None:
    broker.kill()
    broker.start()


def test_share_state_survives_kill_9(broker_factory: BrokerFactory, java, unique_topic: str) -> None:  # type: ignore[no-untyped-def]
    b = broker_factory(FAST_SHARE_FLAGS)
    group, t = unique_topic + "-g", unique_topic
    b.create_topic(t, 1)
    produce(b, t, 0, 100)
    admin = java("admin", b.bootstrap)
    settings = {
        "share.auto.offset.reset": "earliest",
        "share.delivery.count.limit": "4",
        "share.record.lock.duration.ms": "20000",
    }
    assert admin.admin(f"set-config {group} " + " ".join(f"{k}={v}" for k, v in settings.items())) == []
    expected_configs = [f"CONFIG {k} {v} DYNAMIC_GROUP_CONFIG" for k, v in sorted(settings.items())]

    def configs() -> list[str]:
        return [x for x in admin.admin(f"get-config {group}") if x.split()[1] in settings]

    # A accepts 0-49 (commitSync answered), then holds what it acquired from 50 on.
    a = java("consumer", b.bootstrap, group, t, EXPLICIT, "max.poll.records=10", "holdFrom=50")
    a.wait_line("HELD")
    assert commit_failures(a.snapshot()) == []
    held = {o for _, o in delivered(a.snapshot()) if o >= 50}
    assert held
    admin_until(admin, f"offsets {group}", [f"OFFSET {t} 0 50 50"])

    crash_and_restart(b)
    a.send("halt")  # A dies after the broker: its records were Acquired when the broker died
    a.wait_exit()
    assert configs() == expected_configs
    admin_until(admin, f"offsets {group}", [f"OFFSET {t} 0 50 50"])

    # B gets exactly what A had not accepted, A's acquisitions included, as first deliveries
    # (and at once, although the group's lock duration is 20 s: acquisitions are not durable).
    b_ = java("consumer", b.bootstrap, group, t, EXPLICIT, "max.poll.records=10")
    b_.wait_for(lambda lines: set(delivered(lines)) >= {(0, o) for o in range(50, 100)}, what="50-99 at B")
    admin_until(admin, f"offsets {group}", [f"OFFSET {t} 0 100 0"])
    got = deliveries(b_.snapshot())
    assert sorted(o for _, o, _, _ in got) == list(range(50, 100))
    assert {dc for _, _, dc, _ in got} == {1}

    # B stays up through a second crash: it rejoins and consumes what comes next, never anything
    # it had accepted before.
    crash_and_restart(b)
    admin_until(admin, f"offsets {group}", [f"OFFSET {t} 0 100 0"])
    produce(b, t, 100, 20)
    b_.wait_for(lambda lines: (0, 119) in delivered(lines), what="the records produced after the restart")
    admin_until(admin, f"offsets {group}", [f"OFFSET {t} 0 120 0"])
    close(b_)
    assert delivered(b_.snapshot()) == dict.fromkeys(((0, o) for o in range(50, 120)), 1)

    # alterShareGroupOffsets on the empty group, then kill -9: the start offset and configs stay.
    assert admin.admin(f"describe {group}") == [f"DESC {group} Empty 0"]
    assert admin.admin(f"alter {group} {t}:0:60") == []
    crash_and_restart(b)
    admin_until(admin, f"offsets {group}", [f"OFFSET {t} 0 60 60"])
    assert configs() == expected_configs
    assert admin.admin(f"describe {group}") == [f"DESC {group} Empty 0"]
