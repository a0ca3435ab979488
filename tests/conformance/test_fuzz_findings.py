"""What coverage-guided fuzzing (fuzz/) found, kept as regressions: each input is the fuzzer's own
artifact in tests/data/fuzz/ (fuzz/README.md says how they are made)."""

from __future__ import annotations

import struct
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
from kcoord.protocol.errors import ErrorCode, KafkaError
from kcoord.storage.flush import Flusher
from tests.harness import BrokerProcess, api_versions_ok

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
        services: Any = SimpleNamespace(config=pm.config)
        with pytest.raises(KafkaError) as e:
            append_records(services, part, batch, NOW, None, 9)
        assert part.high_watermark == 0
        return e.value.code
    finally:
        pm.close()


def test_a_record_running_past_its_batch_is_corrupt(tmp_path: Path) -> None:
    """Found by fuzz/record_batches.py: a batch with a valid CRC whose record runs past its end
    failed with IndexError (UNKNOWN_SERVER_ERROR) where the timestamps are read; now
    CORRUPT_MESSAGE, and nothing is appended."""
    assert refused_append(tmp_path, READS_RECORDS, truncated_batch()) == ErrorCode.CORRUPT_MESSAGE


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
