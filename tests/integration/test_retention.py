"""Retention in the running broker: the periodic check deletes expired data and moves the log
start offset; consumers see it through ListOffsets and OFFSET_OUT_OF_RANGE."""

from __future__ import annotations

import time

from kcoord.protocol.errors import ErrorCode
from tests.harness import BrokerProcess
from tests.wire import build_batch


def wait_until(cond, timeout_s: float = 30.0) -> bool:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.05)
    return False


def test_expired_records_are_deleted_and_the_log_start_moves(broker_factory) -> None:  # type: ignore[no-untyped-def]
    broker: BrokerProcess = broker_factory(["--log-retention-check-interval-ms", "100"])
    now = int(time.time() * 1000)
    with broker.connect() as c:
        c.create_topic("old", configs={"retention.ms": "60000"})
        c.create_topic("fresh", configs={"retention.ms": "60000"})
        old = [(b"k", b"v", now - 3_600_000 + i) for i in range(5)]  # an hour old: past retention
        assert c.produce("old", 0, build_batch(old)).base_offset == 0
        assert c.produce("fresh", 0, build_batch(count=5, timestamp=now)).base_offset == 0
        assert wait_until(lambda: c.list_offsets("old", 0, -2).offset == 5), "retention never ran"
        assert c.list_offsets("old", 0, -1).offset == 5
        assert c.fetch("old", 0, 0).error_code == ErrorCode.OFFSET_OUT_OF_RANGE
        part = c.fetch("old", 0, 5)
        assert (part.error_code, part.log_start_offset, part.high_watermark) == (0, 5, 5)
        # New data goes on at the old end; the fresh topic was not touched.
        assert c.produce("old", 0, build_batch(count=1, timestamp=now)).base_offset == 5
        assert c.list_offsets("fresh", 0, -2).offset == 0
    broker.restart()
    with broker.connect() as c:
        assert (c.list_offsets("old", 0, -2).offset, c.list_offsets("old", 0, -1).offset) == (5, 6)


def test_a_topic_stored_as_compact_is_never_retention_deleted(broker_factory) -> None:  # type: ignore[no-untyped-def]
    """Retention must not delete a compact-only topic's records (Kafka deletes by time or size only
    under cleanup.policy=delete); the policy is set in topics.json, as a topic stored earlier."""
    import json

    broker: BrokerProcess = broker_factory(["--log-retention-check-interval-ms", "100"])
    now = int(time.time() * 1000)
    with broker.connect() as c:
        c.create_topic("kept", configs={"retention.ms": "60000"})
        c.create_topic("dropped", configs={"retention.ms": "60000"})
    broker.stop()
    topics_file = broker.data_dir / "topics.json"
    stored = json.loads(topics_file.read_text())
    stored["topics"]["kept"]["configs"]["cleanup.policy"] = "compact"
    topics_file.write_text(json.dumps(stored))
    broker.start()
    with broker.connect() as c:
        old = [(b"k", b"v", now - 3_600_000 + i) for i in range(5)]
        assert c.produce("kept", 0, build_batch(old)).base_offset == 0
        assert c.produce("dropped", 0, build_batch(old)).base_offset == 0
        assert wait_until(lambda: c.list_offsets("dropped", 0, -2).offset == 5), "retention never ran"
        assert c.list_offsets("kept", 0, -2).offset == 0
        assert c.fetch("kept", 0, 0).error_code == 0
