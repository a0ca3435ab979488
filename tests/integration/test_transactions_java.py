"""The official Java client's transactions (kafka-clients 4.3, and 3.9 for the basic flow),
through tests/java/TxnProbe.java:

- flow: commit, abort, back-to-back transactions, read_committed / read_uncommitted consumers,
  Admin describeTransactions / listTransactions / describeProducers on an open and a completed
  transaction, fencing by a second producer with the same transactional.id, a transaction aborted
  by the broker past its transaction.timeout.ms (the probe checks each; see its header);
- consume-transform-produce with sendOffsetsToTransaction, in a classic group and in a
  group.protocol=consumer group: the JVM is killed (SIGKILL) inside an open transaction after a few
  commits and started again; the output topic read at read_committed then holds every input
  exactly once, the aborted attempt is visible at read_uncommitted only, and the group's committed
  offsets are the input's end (every input was transformed exactly once and its offset committed
  with it).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from kafka.protocol.consumer.group import OffsetFetchRequest

from tests.harness import BrokerProcess, read_to_end, shared_broker
from tests.integration.consumer_groups import consumer_group_flags
from tests.integration.group_probe import JavaProbe
from tests.integration.test_java import classpath, compile_probe, run_probe
from tests.wire import ApiKey, Conn, build_batch

pytestmark = pytest.mark.java

# Fast group rebalances and session expiry (a killed member must leave the group quickly), and a
# short cleanup interval so that the broker aborts timed-out transactions within a second.
TXN_FLAGS = [*consumer_group_flags(), "--transaction-abort-timed-out-transaction-cleanup-interval-ms", "300"]
_tbroker_started, tbroker = shared_broker("tbroker", TXN_FLAGS)


@pytest.fixture(scope="module")
def txn_classpath() -> str:
    """TxnProbe compiled once against kafka-clients 4.3 (a JVM start in source mode compiles
    it again, which the kill-and-restart test would pay twice); test_transaction_flow[4.3.0]
    runs the same build."""
    cp = classpath("4.3.0")
    try:
        out = compile_probe(cp, "TxnProbe.java")
    except (FileNotFoundError, AssertionError) as e:
        pytest.skip(f"Java transaction probe unavailable: {e}")
    return f"{cp}:{out}"


@pytest.fixture
def txn_probe(txn_classpath: str, tmp_path: Path) -> Iterator[Callable[..., JavaProbe]]:
    started: list[JavaProbe] = []

    def start(*args: str) -> JavaProbe:
        p = JavaProbe(txn_classpath, list(args), tmp_path / f"txn{len(started)}.log", main="TxnProbe")
        started.append(p)
        return p

    try:
        yield start
    finally:
        for p in started:
            p.close()


@pytest.mark.timeout(600)
@pytest.mark.parametrize("version", ["4.3.0", "3.9.0"])
def test_transaction_flow(tbroker: BrokerProcess, unique_topic: str, version: str) -> None:
    out = run_probe(
        "java", classpath(version), "TxnProbe.java", "flow", tbroker.bootstrap, unique_topic, unique_topic
    )
    assert "@@ FENCED" in out and "@@ TIMED OUT CompleteAbort" in out


# --- consume-transform-produce ----------------------------------------------------------------------
INPUTS_PER_PARTITION = 150


def read_values(bootstrap: str, topic: str, isolation: str) -> list[str]:
    return [m.value.decode() for m in read_to_end(bootstrap, [(topic, 0), (topic, 1)], isolation, idle_s=3.0)]


def committed(c: Conn, group: str, topic: str, partitions: int) -> dict[int, int]:
    """The group's offsets; RequireStable: UNSTABLE_OFFSET_COMMIT until the last transaction's
    markers are written (they follow EndTxn's answer)."""
    req = OffsetFetchRequest.OffsetFetchRequestTopic(name=topic, partition_indexes=list(range(partitions)))
    deadline = time.monotonic() + 10
    while True:
        resp = c.request(ApiKey.OffsetFetch, 7, group_id=group, topics=[req], require_stable=True)
        errors = {resp.error_code} | {p.error_code for p in resp.topics[0].partitions}
        if errors == {0} or time.monotonic() > deadline:
            assert errors == {0}, resp
            return {p.partition_index: p.committed_offset for p in resp.topics[0].partitions}
        time.sleep(0.1)


@pytest.mark.timeout(300)
@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_consume_transform_produce_killed(
    tbroker: BrokerProcess, unique_topic: str, txn_probe: Callable[..., JavaProbe], protocol: str
) -> None:
    src, dst, group, txid = unique_topic + "-in", unique_topic + "-out", unique_topic + "-g", unique_topic
    inputs = []
    with tbroker.connect() as c:
        c.create_topic(src, partitions=2)
        c.create_topic(dst, partitions=2)
        for p in range(2):
            values = [f"p{p}-{i}" for i in range(INPUTS_PER_PARTITION)]
            recs = [(v.encode(), v.encode(), 1_700_000_000_000 + i) for i, v in enumerate(values)]
            assert c.produce(src, p, build_batch(recs)).error_code == 0
            inputs += values
    consumer_configs = [
        f"group.protocol={protocol}",
        "max.poll.records=20",
        *(["session.timeout.ms=6000", "heartbeat.interval.ms=500"] if protocol == "classic" else []),
    ]
    first = txn_probe("ctp", tbroker.bootstrap, src, dst, group, txid, "openMs=300", *consumer_configs)
    # Killed inside the fourth transaction: its records are in the log, its offsets pending.
    first.wait_line("OPEN 4", timeout=90)
    first.proc.kill()
    first.proc.wait()
    first_done = [int(x.split()[2]) for x in first.snapshot() if x.startswith("COMMITTED ")]
    assert len(first_done) == 3

    second = txn_probe("ctp", tbroker.bootstrap, src, dst, group, txid, "idleMs=2000", *consumer_configs)
    line = second.wait_line("CAUGHTUP", timeout=150)
    assert second.wait_exit(30) == 0
    # The second run did the rest: what the first committed was not read again.
    assert int(line.split()[1]) == len(inputs) - sum(first_done)

    out = read_values(tbroker.bootstrap, dst, "read_committed")
    counts = Counter(out)
    assert sorted(counts) == sorted(f"out-{v}" for v in inputs), "every input transformed"
    assert [v for v, n in counts.items() if n > 1] == [], "and exactly once"
    # The killed transaction's records are in the log, aborted: visible only at read_uncommitted.
    uncommitted = read_values(tbroker.bootstrap, dst, "read_uncommitted")
    assert len(uncommitted) > len(out)
    with tbroker.connect() as c:
        assert committed(c, group, src, 2) == {0: INPUTS_PER_PARTITION, 1: INPUTS_PER_PARTITION}
