"""Logs that cannot be written (a full disk; here the broker process's file-size limit,
RLIMIT_FSIZE, which fails a write past it with EFBIG as a full disk fails it with ENOSPC). A topic
partition answers Produce with KAFKA_STORAGE_ERROR, loses nothing it acknowledged, and takes
records again once its writes succeed; the broker's other partitions are served meanwhile. A
coordinator's log stops the broker with a failure status, and its restart has every offset commit
acknowledged.
"""

from __future__ import annotations

import errno
import os
import threading
import time
from typing import Any

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.errors import CorruptRecordError, KafkaStorageError
from kafka.structs import OffsetAndMetadata

from kcoord.testing.broker import BrokerThread
from tests.harness import BrokerProcess, read_to_end
from tests.integration.test_share_confluent import run_worker, set_earliest, spawn_worker
from tests.legacy_log import ShareMember, call
from tests.wire import ApiKey, Conn, api, build_batch, fetch_request

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType  # noqa: E402

# Bytes any one file of the broker may hold: the coordinators' logs stay far below it, a
# partition taking 64 KiB records reaches it after ~30 of them.
FILE_LIMIT = 2 << 20
RECORD = 64 << 10


def _value(i: int, size: int = RECORD) -> bytes:
    return i.to_bytes(4, "big") * (size // 4)


def _read_partition(bootstrap: str, topic: str, partition: int) -> list[tuple[int, bytes]]:
    records = read_to_end(bootstrap, [(topic, partition)], "read_uncommitted", idle_s=0)
    return sorted((r.offset, r.value) for r in records)


def _ten_records_each(broker: BrokerThread, topic: str, partitions: int) -> None:
    """Create ``topic``; values ``p<partition>-<i>`` for i in 0..9 in each partition."""
    with Conn(broker.host, broker.port) as conn:
        conn.create_topic(topic, partitions=partitions)
        for p in range(partitions):
            recs = [(None, f"p{p}-{i}".encode(), 1_700_000_000_000 + i) for i in range(10)]
            assert conn.produce(topic, p, build_batch(recs)).error_code == 0


def _assert_partition_1_answers(broker: BrokerThread, topic: str, code: int) -> None:
    """A raw Fetch v12 of both partitions of ``topic`` answers partition 1 ``code`` and partition 0
    its records, in one answer without a top-level error; ListOffsets by timestamp the same."""
    with Conn(broker.host, broker.port) as conn:
        resp = conn.request(ApiKey.Fetch, 12, **fetch_request(topic, [(0, 0), (1, 0)]))
        parts = {p.partition_index: p for p in resp.responses[0].partitions}
        assert resp.error_code == 0
        assert parts[0].error_code == 0 and parts[0].records
        assert parts[1].error_code == code
        assert conn.list_offsets(topic, 1, timestamp=0).error_code == code
        found = conn.list_offsets(topic, 0, timestamp=0)
        assert (found.error_code, found.offset) == (0, 0)


def _fail_reads(monkeypatch: pytest.MonkeyPatch, partition_dir: str) -> None:
    """Reads of ``partition_dir``'s files fail with EIO, as on a failing disk, in this process (an
    in-process broker's): its os.pread, looked up at each call by the compiled modules too."""
    pread = os.pread

    def failing_pread(fd: int, n: int, offset: int) -> bytes:
        if f"{os.sep}{partition_dir}{os.sep}" in os.readlink(f"/proc/self/fd/{fd}"):
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        return pread(fd, n, offset)

    monkeypatch.setattr(os, "pread", failing_pread)


def test_a_partition_that_cannot_be_written_answers_kafka_storage_error_and_loses_nothing(
    broker_factory,
) -> None:
    broker: BrokerProcess = broker_factory(start=False)
    broker.file_size_limit = FILE_LIMIT  # CPython ignores SIGXFSZ: writes past it fail (EFBIG)
    broker.start()
    broker.create_topic("full", partitions=2)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all", retries=0, linger_ms=0)
    acked: list[tuple[int, bytes]] = []
    failure: KafkaStorageError | None = None
    for i in range(2 * FILE_LIMIT // RECORD):
        value = _value(i)
        try:
            metadata = producer.send("full", value, partition=0).get(timeout=30)
        except KafkaStorageError as e:
            failure = e
            break
        acked.append((metadata.offset, value))
    assert failure is not None, "the partition's file grew past the limit"
    assert len(acked) >= 16
    assert [offset for offset, _ in acked] == list(range(len(acked)))
    # The failure stays with the partition's own file: the broker's other partitions take records.
    assert producer.send("full", b"beside", partition=1).get(timeout=30).offset == 0
    # A refused batch counts for nothing: a record small enough for the space left gets the next
    # offset, written over whatever part of the refused one reached the file.
    small = b"small"
    assert producer.send("full", small, partition=0).get(timeout=30).offset == len(acked)
    acked.append((len(acked), small))
    with pytest.raises(KafkaStorageError):
        producer.send("full", _value(999), partition=0).get(timeout=30)
    producer.close()
    assert "append failed: the partition's files could not be written" in broker.log_text()
    assert _read_partition(broker.bootstrap, "full", 0) == acked
    assert broker.running

    # Once its files can grow again, the partition goes on from where it stood.
    broker.stop()
    broker.file_size_limit = None
    broker.start()
    assert _read_partition(broker.bootstrap, "full", 0) == acked
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all", retries=0, linger_ms=0)
    later = _value(1000)
    assert producer.send("full", later, partition=0).get(timeout=30).offset == len(acked)
    producer.close()
    assert _read_partition(broker.bootstrap, "full", 0) == [*acked, (len(acked), later)]


def test_librdkafka_retries_kafka_storage_error_until_the_partition_takes_its_records(
    broker_factory,
) -> None:
    """librdkafka takes KAFKA_STORAGE_ERROR as retriable, as the Java producer does: an idempotent
    producer keeps its records through the failures and delivers each once, in order, when the
    broker can write them (here: restarted without the limit, on the same port)."""
    broker: BrokerProcess = broker_factory(start=False)
    broker.file_size_limit = FILE_LIMIT  # CPython ignores SIGXFSZ: writes past it fail (EFBIG)
    broker.start()
    broker.create_topic("retried", partitions=1)
    producer = confluent_kafka.Producer(
        {
            "bootstrap.servers": broker.bootstrap,
            "enable.idempotence": True,
            "linger.ms": 0,
            "message.timeout.ms": 60_000,
            "retry.backoff.ms": 100,
        }
    )
    reports: list[tuple[int, int, bytes]] = []  # (error code or 0, offset, value)
    delivered = threading.Event()
    count = FILE_LIMIT // RECORD + 8  # more than the file can hold

    def report(err: confluent_kafka.KafkaError | None, msg: confluent_kafka.Message) -> None:
        reports.append((err.code() if err else 0, msg.offset(), msg.value()))
        if len(reports) == count:
            delivered.set()

    for i in range(count):
        producer.produce("retried", _value(i), partition=0, on_delivery=report)
        producer.poll(0)
    # Until the records past the limit have been refused a few times.
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and broker.log_text().count("append failed") < 3:
        producer.poll(0.1)
    assert broker.log_text().count("append failed") >= 3, "no append was refused"
    assert len(reports) < count, "every record delivered although the file could not hold them"

    broker.stop()
    broker.file_size_limit = None
    broker.start()
    while not delivered.is_set() and time.monotonic() < deadline + 60:
        producer.poll(0.1)
    assert producer.flush(30) == 0
    assert all(code == 0 for code, _, _ in reports), reports[:3]
    assert sorted(offset for _, offset, _ in reports) == list(range(count))
    by_offset = {offset: value for _, offset, value in reports}
    assert _read_partition(broker.bootstrap, "retried", 0) == [(i, _value(i)) for i in range(count)]
    assert [by_offset[i] for i in range(count)] == [_value(i) for i in range(count)]


def test_a_coordinator_log_that_cannot_be_written_stops_the_broker_with_status_1_and_loses_no_offset(
    broker_factory,
) -> None:
    """A failed write to ``__consumer_offsets`` leaves the group coordinator's memory ahead of its
    log: the broker stops (Kafka halts when its log directory fails) with a failure status, so that
    a supervisor restarts it, and the restart has every offset commit it acknowledged."""
    broker: BrokerProcess = broker_factory(start=False)
    broker.file_size_limit = 256 << 10
    broker.start()
    broker.create_topic("t", partitions=1)
    tp = TopicPartition("t", 0)
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id="g", enable_auto_commit=False)
    acknowledged = None
    with pytest.raises(Exception):  # noqa: B017 - whatever the client makes of a broker that stopped
        for offset in range(100_000):  # ~300 bytes a record: the log is full after ~900 commits
            consumer.commit({tp: OffsetAndMetadata(offset, "m" * 200, -1)})
            acknowledged = offset
    consumer.close()
    assert acknowledged is not None and acknowledged > 100
    assert broker.proc is not None
    assert broker.proc.wait(timeout=30) == 1
    assert "coordinator write failed; shutting down" in broker.log_text()

    broker.file_size_limit = None
    broker.start()
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id="g", enable_auto_commit=False)
    assert consumer.committed(tp) == acknowledged
    consumer.close()


def test_a_partition_whose_log_cannot_be_read_answers_kafka_storage_error_and_the_others_are_read(
    tmp_path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A segment the disk cannot read (EIO) fails Fetch and ListOffsets for its partition alone,
    with KAFKA_STORAGE_ERROR, which consumers retry; the request's other partitions are answered
    as usual, and the partition is read again once its reads succeed. (The in-process broker's
    reads fail where its os.pread does: a failing disk cannot be had in a test.)"""
    broker = BrokerThread(tmp_path / "data").start()
    try:
        with Conn(broker.host, broker.port) as conn:
            conn.create_topic("t", partitions=2)
        producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all")
        for i in range(5):
            for p in (0, 1):
                producer.send("t", f"p{p}-{i}".encode(), partition=p)
        producer.flush()
        producer.close()

        _fail_reads(monkeypatch, "t-1")
        _assert_partition_1_answers(broker, "t", KafkaStorageError.errno)

        consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False)
        consumer.assign([TopicPartition("t", 0), TopicPartition("t", 1)])
        consumer.seek_to_beginning()
        got: dict[int, list[bytes]] = {0: [], 1: []}
        deadline = time.monotonic() + 20
        while len(got[0]) < 5 and time.monotonic() < deadline:
            for tp, records in consumer.poll(timeout_ms=200).items():
                got[tp.partition].extend(r.value for r in records)
        assert got == {0: [f"p0-{i}".encode() for i in range(5)], 1: []}

        monkeypatch.undo()  # the disk reads again: the consumer's retries get the partition
        deadline = time.monotonic() + 20
        while len(got[1]) < 5 and time.monotonic() < deadline:
            for tp, records in consumer.poll(timeout_ms=200).items():
                got[tp.partition].extend(r.value for r in records)
        assert got[1] == [f"p1-{i}".encode() for i in range(5)]
        consumer.close()
    finally:
        broker.stop()


def test_a_share_partition_whose_log_cannot_be_read_leaves_the_broker_and_its_other_partitions_serving(
    tmp_path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    """ShareFetch reads the log inside the share group's operation: a read error raised there
    stopped the whole broker as a failed coordinator write does. Now the partition answers
    KAFKA_STORAGE_ERROR and acquires nothing, the others are delivered, and its records are
    delivered once its reads succeed (librdkafka's ShareConsumer, in a child process)."""
    broker = BrokerThread(tmp_path / "data").start()
    try:
        _ten_records_each(broker, "s", partitions=2)
        set_earliest(broker, "sg")  # type: ignore[arg-type]

        _fail_reads(monkeypatch, "s-1")
        events = run_worker(broker, "sg", "s", 10, "implicit")  # type: ignore[arg-type]
        delivered = sorted((p, o) for p, o, _, _ in (e["rec"] for e in events if "rec" in e))
        assert delivered == [(0, o) for o in range(10)]
        assert broker._thread is not None and broker._thread.is_alive()
        logged = capfd.readouterr().out
        assert "share fetch failed: the partition's log could not be read" in logged
        assert "partition=1" in logged

        monkeypatch.undo()
        events = run_worker(broker, "sg", "s", 10, "implicit")  # type: ignore[arg-type]
        delivered = sorted((p, o) for p, o, _, _ in (e["rec"] for e in events if "rec" in e))
        assert delivered == [(1, o) for o in range(10)]
    finally:
        broker.stop()


def test_a_corrupt_batch_is_corrupt_message_for_its_partition_and_stops_nothing(
    tmp_path, capfd: pytest.CaptureFixture[str]
) -> None:
    """Bytes of a segment that change on disk after start-up's recovery checked them (bit rot, a
    stray write): Fetch and ListOffsets answer CORRUPT_MESSAGE for that partition alone, as Kafka
    does for a corrupt log, and a share group's read of it leaves the broker serving (raised in
    the group's operation, the InvalidBatch stopped the broker)."""
    broker = BrokerThread(tmp_path / "data").start()
    try:
        _ten_records_each(broker, "c", partitions=2)
        # The first batch's batchLength (bytes 8-11 of its header) says 5: shorter than a header.
        fd = os.open(tmp_path / "data" / "c-1" / "00000000000000000000.log", os.O_WRONLY)
        try:
            os.pwrite(fd, (5).to_bytes(4, "big"), 8)
        finally:
            os.close(fd)

        _assert_partition_1_answers(broker, "c", CorruptRecordError.errno)

        set_earliest(broker, "cg")  # type: ignore[arg-type]
        # librdkafka's share consumer raises CORRUPT_MESSAGE to the application from poll(), as
        # the Java consumer throws on a corrupt record: the worker fails, naming the partition.
        worker = spawn_worker(broker.bootstrap, "cg", "c", 10, "implicit")
        assert "Encountered corrupt message when fetching topic-partition c-1" in worker.stderr
        assert (worker.returncode, worker.stdout.splitlines()[-1:]) == (1, ['{"closed": true}'])
        assert "share fetch failed: the partition's log holds a corrupt batch" in capfd.readouterr().out
        assert broker._thread is not None and broker._thread.is_alive()
        with Conn(broker.host, broker.port) as conn:  # and serving
            assert conn.fetch("c", 0, 0).error_code == 0
    finally:
        broker.stop()


def test_a_share_fetch_whose_partition_cannot_be_read_is_answered_at_once_with_kafka_storage_error(
    tmp_path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The ShareFetch answer names the partition with KAFKA_STORAGE_ERROR, and comes at once, as
    Kafka completes a share fetch whose read failed, not after MaxWaitMs (raw ShareFetch v1)."""
    broker = BrokerThread(tmp_path / "data").start()
    try:
        _ten_records_each(broker, "e", partitions=1)
        set_earliest(broker, "eg")  # type: ignore[arg-type]
        _fail_reads(monkeypatch, "e-0")
        with Conn(broker.host, broker.port) as conn:
            member = ShareMember(conn, "eg", ["e"])
            member.join(1)
            (topic_id,) = member.assignment
            req = api(78, "ShareFetch")
            started = time.monotonic()
            resp = call(
                conn,
                78,
                1,
                group_id="eg",
                member_id=member.member_id,
                share_session_epoch=0,
                max_wait_ms=5000,
                min_bytes=1,
                max_bytes=1 << 20,
                max_records=100,
                batch_size=100,
                topics=[
                    req.FetchTopic(
                        topic_id=topic_id,
                        partitions=[
                            req.FetchTopic.FetchPartition(
                                partition_index=0, partition_max_bytes=0, acknowledgement_batches=[]
                            )
                        ],
                    )
                ],
                forgotten_topics_data=[],
            )
            assert time.monotonic() - started < 2.5
            assert resp.error_code == 0
            ((part,),) = [t.partitions for t in resp.responses]
            assert part.error_code == KafkaStorageError.errno
            assert part.acquired_records == []

            monkeypatch.undo()
            assert len(member.fetch(100)) == 10  # the next fetch of the session acquires them
    finally:
        broker.stop()


def _overwrite(tmp_path, partition_dir: str, position: int, data: bytes) -> None:
    """Bytes of a running broker's first segment of ``partition_dir`` changed on disk."""
    fd = os.open(tmp_path / "data" / partition_dir / "00000000000000000000.log", os.O_WRONLY)
    try:
        os.pwrite(fd, data, position)
    finally:
        os.close(fd)


def test_a_batch_length_that_points_outside_the_segment_is_corrupt_message_not_a_hung_broker(
    tmp_path,
) -> None:
    """Finding a fetch offset past the first batch walks the batches from the index entry: a
    length changed on disk to a negative one made that walk stand still for ever (the event loop
    with it), one past the segment's end made a read that long. Both are CORRUPT_MESSAGE."""
    broker = BrokerThread(tmp_path / "data").start()
    try:
        with Conn(broker.host, broker.port) as conn:
            conn.create_topic("n", partitions=2)
            for p in (0, 1):
                for first in (0, 10):  # two batches: offsets 0-9 and 10-19
                    recs = [
                        (None, f"p{p}-{i}".encode(), 1_700_000_000_000 + i) for i in range(first, first + 10)
                    ]
                    assert conn.produce("n", p, build_batch(recs)).error_code == 0
        _overwrite(tmp_path, "n-1", 8, (-12).to_bytes(4, "big", signed=True))  # batch 0's batchLength
        with Conn(broker.host, broker.port, timeout=10) as conn:
            resp = conn.request(ApiKey.Fetch, 12, **fetch_request("n", [(0, 15), (1, 15)]))
            parts = {p.partition_index: p for p in resp.responses[0].partitions}
            assert (parts[0].error_code, parts[1].error_code) == (0, CorruptRecordError.errno)
            assert parts[0].records
        _overwrite(tmp_path, "n-1", 8, (1 << 30).to_bytes(4, "big"))
        with Conn(broker.host, broker.port, timeout=10) as conn:
            assert conn.fetch("n", 1, 15).error_code == CorruptRecordError.errno
            assert conn.fetch("n", 1, 0).error_code == CorruptRecordError.errno
    finally:
        broker.stop()


def test_a_corrupt_record_body_is_corrupt_message_and_a_share_group_reading_it_stops_nothing(
    tmp_path, capfd: pytest.CaptureFixture[str]
) -> None:
    """A timestamp lookup decodes the records of a batch: a body changed on disk (its header
    intact) failed there as kafka-python's CorruptRecordError, UNKNOWN_SERVER_ERROR for the whole
    ListOffsets, and in a share group's by_duration start offset it stopped the broker."""
    broker = BrokerThread(tmp_path / "data").start()
    try:
        _ten_records_each(broker, "b", partitions=1)
        _overwrite(tmp_path, "b-0", 61, b"\xff")  # the first record's length, right after the header
        with Conn(broker.host, broker.port) as conn:
            assert conn.list_offsets("b", 0, timestamp=0).error_code == CorruptRecordError.errno
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        reset = ConfigEntry(
            "share.auto.offset.reset", "by_duration:P30000D", incremental_operation=AlterConfigOpType.SET
        )
        for fut in admin.incremental_alter_configs(
            [ConfigResource(ResourceType.GROUP, "bg", incremental_configs=[reset])]
        ).values():
            fut.result(timeout=30)
        worker = spawn_worker(broker.bootstrap, "bg", "b", 1, "implicit")
        assert "Encountered corrupt message when fetching topic-partition b-0" in worker.stderr
        assert (worker.returncode, worker.stdout.splitlines()[-1:]) == (1, ['{"closed": true}'])
        assert "share fetch failed: the partition's log holds a corrupt batch" in capfd.readouterr().out
        assert broker._thread is not None and broker._thread.is_alive()
        with Conn(broker.host, broker.port) as conn:  # and serving
            assert conn.list_offsets("b", 0, timestamp=-1).offset == 10
    finally:
        broker.stop()


def test_a_delete_topics_whose_deletion_cannot_be_recorded_answers_kafka_storage_error_and_deletes_nothing(
    tmp_path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """topics.json is written before a deleted topic's files go: when it cannot be (a full disk),
    DeleteTopics answers KAFKA_STORAGE_ERROR for the topic, whose records are all still there, and
    deletes it once the disk takes the write (kafka-python's admin client)."""
    from kafka.admin import KafkaAdminClient

    broker = BrokerThread(tmp_path / "data").start()
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        _ten_records_each(broker, "d", partitions=2)
        replace = os.replace

        def full_disk(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
            if os.fspath(dst).endswith("topics.json"):
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            replace(src, dst)

        monkeypatch.setattr(os, "replace", full_disk)
        with pytest.raises(KafkaStorageError):
            admin.delete_topics(["d"], timeout_ms=10_000)
        assert "d" in admin.list_topics()
        values = [v for _, v in _read_partition(broker.bootstrap, "d", 1)]
        assert values == [f"p1-{i}".encode() for i in range(10)]

        monkeypatch.setattr(os, "replace", replace)
        admin.delete_topics(["d"], timeout_ms=10_000)
        assert "d" not in admin.list_topics()
        assert not (tmp_path / "data" / "d-0").exists()
    finally:
        admin.close()
        broker.stop()


def test_a_coordinator_log_that_cannot_be_closed_whole_stops_nothing_else_closing_and_loses_no_offset(
    tmp_path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """At shutdown a coordinator segment is trimmed back to its data (it was preallocated); when
    the disk refuses that (EIO), the broker still closes its other logs and the data plane (whose
    partitions write their producer snapshots then), and the restart finds every committed offset
    and record, and appends after them. The closing used to stop at the first such error, and the
    data plane's logs were left for a recovery at the next start."""
    from kcoord.storage import preallocation

    data = tmp_path / "data"
    broker = BrokerThread(data).start()
    tp = TopicPartition("t", 0)
    try:
        with Conn(broker.host, broker.port) as conn:
            conn.create_topic("t", partitions=1)
        producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all", enable_idempotence=True)
        for i in range(5):
            producer.send("t", _value(i, 10), partition=0)
        producer.flush()
        producer.close()
        consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id="g", enable_auto_commit=False)
        consumer.commit({tp: OffsetAndMetadata(5, "", -1)})
        consumer.close()
        trims = []
        trim = preallocation.trim

        def refuse(fd: int, size: int) -> None:
            path = os.readlink(f"/proc/self/fd/{fd}")
            if "/__consumer_offsets-" not in path:
                return trim(fd, size)
            trims.append(path)
            raise OSError(errno.EIO, os.strerror(errno.EIO))

        monkeypatch.setattr(preallocation, "trim", refuse)
    finally:
        broker.stop()
    assert trims, "no coordinator segment was trimmed at shutdown"
    assert broker._error is None
    assert list((data / "t-0").glob("*.snapshot")), "the data plane was not closed"

    monkeypatch.undo()
    broker = BrokerThread(data).start()
    try:
        consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id="g", enable_auto_commit=False)
        assert consumer.committed(tp) == 5
        # The clean start found the end of the segment left untrimmed: a commit goes after it.
        consumer.commit({tp: OffsetAndMetadata(7, "", -1)})
        consumer.close()
        assert [v for _o, v in _read_partition(broker.bootstrap, "t", 0)] == [_value(i, 10) for i in range(5)]
    finally:
        broker.stop()
    broker = BrokerThread(data).start()
    try:
        consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id="g", enable_auto_commit=False)
        assert consumer.committed(tp) == 7
        consumer.close()
    finally:
        broker.stop()


def test_a_commit_marker_the_partition_refuses_is_written_again_and_read_committed_then_sees_the_records(
    tmp_path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """kafka-python's transactional producer commits while its partition's files cannot be
    written (ENOSPC from every write into ``t-0``): the commit is acknowledged (EndTxn answers once
    PrepareCommit is durable), the marker's append fails and is written again after a backoff, and
    a read_committed consumer sees none of the transaction's records until the disk takes the
    marker, then all of them, once, with the records written after them."""
    broker = BrokerThread(tmp_path / "data").start()
    try:
        with Conn(broker.host, broker.port) as conn:
            conn.create_topic("t", partitions=1)
        producer = KafkaProducer(
            bootstrap_servers=broker.bootstrap, transactional_id="tx", request_timeout_ms=5000
        )
        producer.init_transactions()
        producer.begin_transaction()
        for i in range(3):
            producer.send("t", b"txn-%d" % i, partition=0)
        producer.flush()

        refused = []
        pwrite, pwritev = os.pwrite, os.pwritev

        def full(fd: int) -> bool:
            if "/t-0/" in os.readlink(f"/proc/self/fd/{fd}"):
                refused.append(fd)
                return True
            return False

        def failing_pwrite(fd: int, data: Any, offset: int) -> int:
            if full(fd):
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            return pwrite(fd, data, offset)

        def failing_pwritev(fd: int, buffers: Any, offset: int) -> int:
            if full(fd):
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            return pwritev(fd, buffers, offset)

        monkeypatch.setattr(os, "pwrite", failing_pwrite)
        monkeypatch.setattr(os, "pwritev", failing_pwritev)
        producer.commit_transaction()
        deadline = time.monotonic() + 10
        while len(refused) < 3:  # the marker's first write and two retries (after 100, 200 ms)
            assert time.monotonic() < deadline, refused
            time.sleep(0.05)
        assert _read_partition_committed(broker.bootstrap) == []

        monkeypatch.undo()  # the disk takes writes again: the next retry writes the marker
        deadline = time.monotonic() + 10
        while _read_partition_committed(broker.bootstrap) != [b"txn-0", b"txn-1", b"txn-2"]:
            assert time.monotonic() < deadline, "the marker was not written after the disk recovered"
            time.sleep(0.2)
        # The producer's next transaction goes on from there, and the marker was written once.
        producer.begin_transaction()
        producer.send("t", b"after", partition=0)
        producer.commit_transaction()
        producer.close()
        deadline = time.monotonic() + 10
        while len(_read_partition_committed(broker.bootstrap)) < 4:
            assert time.monotonic() < deadline
            time.sleep(0.2)
        assert _read_partition_committed(broker.bootstrap) == [b"txn-0", b"txn-1", b"txn-2", b"after"]
        offsets = [o for o, _v in _read_partition(broker.bootstrap, "t", 0)]
        assert offsets == [0, 1, 2, 4]  # offset 3 is the one COMMIT marker, 5 the next
    finally:
        broker.stop()


def _read_partition_committed(bootstrap: str) -> list[bytes]:
    records = read_to_end(bootstrap, [("t", 0)], "read_committed", idle_s=0.3, timeout_s=10)
    return [r.value for r in sorted(records, key=lambda r: r.offset)]
