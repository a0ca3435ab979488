"""What coverage-guided fuzzing (fuzz/) found, kept as regressions: each input is the fuzzer's own
artifact in tests/data/fuzz/ (fuzz/README.md says how they are made)."""

from __future__ import annotations

import os
import struct
import subprocess
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import crc32c
import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder

from kcoord.apis.produce import append_records
from kcoord.clock import ManualClock
from kcoord.config import BrokerConfig
from kcoord.dataplane.partitions import PartitionManager
from kcoord.groups.records import OffsetCommitKey, encode_offset_key
from kcoord.protocol.errors import ErrorCode, KafkaError
from kcoord.protocol.fields import RecordFormatError
from kcoord.protocol.records import build_batch
from kcoord.runtime.runtime import CoordinatorRuntime
from kcoord.server.coordinators import group_runtime, metadata_runtime, transaction_runtime
from kcoord.storage.flush import Flusher
from kcoord.storage.segment import segment_name
from tests.harness import REPO, BrokerFactory, BrokerProcess, api_versions_ok

NOW = 1_700_000_000_000
READS_RECORDS = {"message.timestamp.before.max.ms": "1000"}  # the timestamp check reads each record
FINDINGS = Path(__file__).resolve().parent.parent / "data" / "fuzz"


def test_a_null_item_in_a_string_array_closes_the_connection(broker: BrokerProcess) -> None:
    """ShareGroupDescribe v1 with a null group id among its group ids: the handler hashed None
    and failed (UNKNOWN_SERVER_ERROR); Kafka's parser refuses a null item of a non-nullable
    string array, and the broker closes the connection, as for a null field."""
    frame = (FINDINGS / "dispatcher-share-group-describe-null-item").read_bytes()
    with broker.connect() as c:
        c.send_raw(struct.pack(">i", len(frame)) + frame)
        assert c.is_closed_by_peer()
    assert "ShareGroupDescribeRequest.group_ids[0]" in broker.log_text()
    assert api_versions_ok(broker)


def truncated_batch() -> bytes:
    """One record whose varints run past the batch (all but its first 3 bytes cut), length and CRC made
    right again."""
    b = DefaultRecordBatchBuilder(
        magic=2, compression_type=0, is_transactional=False, producer_id=-1, producer_epoch=-1,
        base_sequence=-1, batch_size=1 << 20,
    )  # fmt: skip
    b.append(0, timestamp=NOW, key=b"key", value=b"value", headers=[])
    data = bytearray(bytes(b.build())[:-12])
    struct.pack_into(">i", data, 8, len(data) - 12)
    struct.pack_into(">I", data, 17, crc32c.crc32c(bytes(data[21:])))
    return bytes(data)


def refused_append(tmp_path: Path, configs: dict[str, str | None], batch: bytes) -> int:
    """The error code Produce's append path answers for ``batch`` on a new topic with ``configs``;
    checks that nothing was appended."""
    pm = PartitionManager(BrokerConfig(log_dirs=str(tmp_path)), Flusher("os"), ManualClock(NOW))
    pm.open()
    try:
        pm.create_topic("t", 1, configs)
        part = pm.partition("t", 0)
        assert part is not None
        with pytest.raises(KafkaError) as e:
            append_records(pm.config, part, batch, NOW, None, 9)
        assert part.high_watermark == 0
        return e.value.code
    finally:
        pm.close()


def test_a_record_running_past_its_batch_is_an_invalid_record(tmp_path: Path) -> None:
    """Found by fuzz/record_batches.py: a batch with a valid CRC whose record runs past its end
    failed with IndexError (UNKNOWN_SERVER_ERROR) where the timestamps are read; now
    INVALID_RECORD, and nothing is appended. Kafka's DefaultRecord.readFrom refuses it with
    InvalidRecordException (INVALID_RECORD, which the Java producer does not retry; it retries
    CORRUPT_MESSAGE until its delivery timeout)."""
    assert refused_append(tmp_path, READS_RECORDS, truncated_batch()) == ErrorCode.INVALID_RECORD


def test_a_record_length_beyond_64_bits_is_an_invalid_record(tmp_path: Path) -> None:
    """Found by review of the compiled record loop: a key length of ten varint bytes (2**64) put
    the read position past what a C integer holds, and compiled code raised ValueError, not
    IndexError (UNKNOWN_SERVER_ERROR); INVALID_RECORD, compiled or not, and nothing appended
    (Kafka's ByteUtils reads no varint over five bytes)."""
    rest = b"\x00\x00\x00" + b"\x80" * 9 + b"\x04"  # attributes, timestamp and offset delta, key length
    record = bytes([len(rest) << 1]) + rest
    data = bytearray(truncated_batch()[:61] + record)
    struct.pack_into(">i", data, 8, len(data) - 12)
    struct.pack_into(">I", data, 17, crc32c.crc32c(bytes(data[21:])))
    for name, configs in (("timestamps", READS_RECORDS), ("keys", {"cleanup.policy": "compact"})):
        (tmp_path / name).mkdir()
        assert refused_append(tmp_path / name, configs, bytes(data)) == ErrorCode.INVALID_RECORD


@pytest.mark.parametrize(
    "record, what",
    [
        ("1a00000082808080800061026200", "a key length of six varint bytes"),
        ("0c00000006616263026200", "a key past its record's end"),
        ("0e000000026104626300", "a value past its record's end"),
    ],
)
def test_a_compacted_topic_refuses_a_malformed_record_as_an_invalid_record(
    tmp_path: Path, record: str, what: str
) -> None:
    """Found by review (a record parser checked against kafka-clients' DefaultRecord.readFrom):
    a compacted topic's key check accepted these records, which Kafka refuses with
    InvalidRecordException; now INVALID_RECORD, and nothing is appended."""
    data = bytearray(truncated_batch()[:61] + bytes.fromhex(record))
    struct.pack_into(">i", data, 8, len(data) - 12)
    struct.pack_into(">I", data, 17, crc32c.crc32c(bytes(data[21:])))
    code = refused_append(tmp_path, {"cleanup.policy": "compact"}, bytes(data))
    assert code == ErrorCode.INVALID_RECORD, what


@pytest.mark.parametrize(
    "record, what",
    [
        ("100000000261026201", "a header count of -1"),
        ("1400000002610262020101", "a header key length of -1"),
        ("12000000026102620000", "a byte after the record's fields, inside its length"),
    ],
)
def test_any_topic_refuses_a_record_kafka_cannot_read_as_an_invalid_record(
    tmp_path: Path, record: str, what: str
) -> None:
    """A CRC-valid batch whose record Kafka's DefaultRecord.readFrom refuses was stored on a topic
    that reads no records at Produce (no compaction, no timestamp bounds), and every consumer
    failed on it; Kafka's LogValidator reads each record and answers INVALID_RECORD."""
    data = bytearray(truncated_batch()[:61] + bytes.fromhex(record))
    struct.pack_into(">i", data, 8, len(data) - 12)
    struct.pack_into(">I", data, 17, crc32c.crc32c(bytes(data[21:])))
    assert refused_append(tmp_path, {}, bytes(data)) == ErrorCode.INVALID_RECORD, what


def test_a_compressed_batch_that_does_not_decompress_is_corrupt(tmp_path: Path) -> None:
    """Found by fuzz/record_batches.py: a snappy batch (valid CRC) whose records are not snappy
    data raised snappy's UncompressError (UNKNOWN_SERVER_ERROR); now CORRUPT_MESSAGE."""
    data = bytearray(truncated_batch())
    data[22] = (data[22] & ~0x07) | 2  # attributes: snappy
    data[61:] = b"\xff" * (len(data) - 61)
    struct.pack_into(">I", data, 17, crc32c.crc32c(bytes(data[21:])))
    assert refused_append(tmp_path, READS_RECORDS, bytes(data)) == ErrorCode.CORRUPT_MESSAGE


def test_a_batch_of_an_unknown_codec_on_a_recompressing_topic_is_corrupt(tmp_path: Path) -> None:
    """Found by fuzz/record_batches.py: a batch whose attributes name codec 5 (there is none), on
    a topic with compression.type=lz4, escaped recompression as InvalidBatch
    (UNKNOWN_SERVER_ERROR); now CORRUPT_MESSAGE."""
    data = bytearray(truncated_batch())
    data[22] = (data[22] & ~0x07) | 5
    struct.pack_into(">I", data, 17, crc32c.crc32c(bytes(data[21:])))
    assert refused_append(tmp_path, {"compression.type": "lz4"}, bytes(data)) == ErrorCode.CORRUPT_MESSAGE


# --- fuzz/coordinator_logs.py: segments of the coordinator logs, as the target wrote them to disk ----
def open_coordinator(tmp_path: Path, topic: str, segment: bytes) -> CoordinatorRuntime[Any]:
    """The production runtime of ``topic`` (one partition) opened over ``segment``, as the broker
    opens it after an unclean shutdown."""
    directory = tmp_path / f"{topic}-0"
    directory.mkdir()
    (directory / (segment_name(0) + ".log")).write_bytes(segment)
    config = BrokerConfig(
        log_dirs=str(tmp_path), offsets_topic_num_partitions=1, transaction_state_log_num_partitions=1
    )
    flusher, clock = Flusher("os"), ManualClock(NOW)
    runtime: CoordinatorRuntime[Any]
    if topic == "__consumer_offsets":
        topics: Any = SimpleNamespace(version=0, lookup=lambda _name: None)
        runtime = group_runtime(config, flusher, clock, topics, lambda _t: None)
    elif topic == "__transaction_state":
        runtime = transaction_runtime(config, flusher, clock, lambda: 1000, lambda _job: None)
    else:
        runtime = metadata_runtime(config, flusher, clock)
    try:
        runtime.open(unclean=True)
    finally:
        for shard in runtime.shards:
            shard.log.close()
    return runtime


@pytest.mark.parametrize(
    ("topic", "finding", "offset", "cause"),
    [
        # A group's member id that is not UTF-8: UnicodeDecodeError out of the group record's reader.
        ("__consumer_offsets", "coordinator-log-group-member-id-not-utf8", 2, "UnicodeDecodeError"),
        # Compression type 7 (there is none): kafka-python's UnsupportedCodecError.
        ("__cluster_metadata", "coordinator-log-unknown-codec", 0, "InvalidBatch"),
        # A batch claiming 50 M records in a few hundred bytes: its reader went round the same
        # bytes for every one of them (a hang of minutes).
        ("__consumer_offsets", "coordinator-log-records-count-past-the-batch", 3, "InvalidBatch"),
        # A zstd batch whose records are not zstd data: zstandard's ZstdError.
        ("__transaction_state", "coordinator-log-zstd-garbage", 0, "InvalidBatch"),
    ],
)
def test_a_coordinator_record_that_does_not_decode_refuses_the_load_and_says_where(
    tmp_path: Path, topic: str, finding: str, offset: int, cause: str
) -> None:
    """Found by fuzz/coordinator_logs.py: CRC-valid batches whose records do not decode escaped
    the load as the decoder's own exception (UnicodeDecodeError, UnsupportedCodecError, ZstdError)
    with no word of where; now RecordFormatError naming the partition, the offset and the cause
    (``kcoord serve`` stops with it, below), and the segment is left as it was."""
    before = (FINDINGS / f"{finding}.log").read_bytes()
    fds = len(os.listdir("/proc/self/fd"))
    with pytest.raises(RecordFormatError) as e:
        open_coordinator(tmp_path, topic, before)
    # The failed partition's log is closed (the fuzz target ran out of descriptors after 10 k).
    assert len(os.listdir("/proc/self/fd")) == fds
    assert str(e.value).startswith(
        f"cannot load {topic}-0: the batch at offset {offset} does not decode ({cause}"
    )
    assert (tmp_path / f"{topic}-0" / (segment_name(0) + ".log")).read_bytes() == before


def test_a_batch_past_the_offset_range_of_its_segment_is_a_torn_tail(tmp_path: Path) -> None:
    """Found by fuzz/coordinator_logs.py: a CRC-valid batch whose last offset is more than 2^31
    past its segment's base (the offset index holds 32-bit relative offsets) made the log's
    recovery fail with struct.error while writing the index; recovery now stops at it, as at any
    batch that cannot belong there, and cuts the tail off (the batch is the segment's first)."""
    segment = (FINDINGS / "coordinator-log-offset-past-segment-range.log").read_bytes()
    runtime = open_coordinator(tmp_path, "__transaction_state", segment)
    assert runtime.shards[0].log.log_end_offset == 0
    assert (tmp_path / "__transaction_state-0" / (segment_name(0) + ".log")).stat().st_size == 0


def test_kcoord_serve_refuses_to_start_on_a_coordinator_log_that_does_not_decode(
    broker_factory: BrokerFactory,
) -> None:
    """The broker stops with the partition, the offset and how to look at it, exit status 1,
    instead of a traceback, and leaves the log as it was."""
    broker = broker_factory(start=False)
    directory = broker.data_dir / "__consumer_offsets-0"
    directory.mkdir(parents=True)
    segment = directory / (segment_name(0) + ".log")
    segment.write_bytes((FINDINGS / "coordinator-log-group-member-id-not-utf8.log").read_bytes())
    before = segment.read_bytes()
    done = subprocess.run(broker.command(), capture_output=True, text=True, timeout=60, cwd=REPO)
    assert done.returncode == 1, done.stderr[-2000:]
    assert "Error: cannot load __consumer_offsets-0: the batch at offset 2 does not decode" in done.stderr
    assert "kcoord log-dump --records" in done.stderr
    assert "Traceback" not in done.stderr
    assert segment.read_bytes() == before


def test_an_offset_commit_that_does_not_decode_names_its_partition(tmp_path: Path) -> None:
    """The refusal of the findings above for the loader that decodes what it held at the end of the
    load (offset commits: no offset to name), from a value of an unknown version."""
    key = encode_offset_key(OffsetCommitKey("g", "t", 0))
    value = b"\x00\x63" + bytes(20)  # version 99
    with pytest.raises(RecordFormatError) as e:
        open_coordinator(tmp_path, "__consumer_offsets", bytes(build_batch([(key, value)], NOW)))
    assert str(e.value) == (
        "cannot load __consumer_offsets-0: one of its records does not decode "
        "(RecordFormatError: unknown offset commit value version 99)"
    )
