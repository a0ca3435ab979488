"""compression.type on the append path (Kafka's LogValidator): ``producer`` stores the bytes the
producer sent; a codec recompresses every batch with another codec, keeping each record and the
batch's producer metadata; AlterConfigs-style validation refuses what Kafka refuses."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from kcoord.apis.produce import append_records
from kcoord.clock import ManualClock
from kcoord.config import BrokerConfig
from kcoord.dataplane.partition import Partition
from kcoord.dataplane.partitions import PartitionManager
from kcoord.dataplane.topic_config import InvalidTopicConfig, validate_topic_configs
from kcoord.protocol import records
from kcoord.protocol.errors import ErrorCode, KafkaError
from kcoord.storage.flush import Flusher

T0 = 1_700_000_000_000
PRODUCE_VERSION = 11
CODEC_NAMES = ["uncompressed", "gzip", "snappy", "lz4", "zstd"]  # index = attribute codec id


def batch(
    rows: list[tuple[bytes | None, bytes | None]],
    codec: int = 0,
    pid: int = -1,
    epoch: int = -1,
    seq: int = -1,
    transactional: bool = False,
) -> bytes:
    b = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=codec,
        is_transactional=transactional,
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        batch_size=1 << 30,
    )
    for i, (key, value) in enumerate(rows):
        b.append(i, timestamp=T0 + i, key=key, value=value, headers=[("h", b"%d" % i)])
    return bytes(b.build())


@pytest.fixture
def pm(tmp_path: Path) -> Iterator[PartitionManager]:
    manager = PartitionManager(BrokerConfig(log_dirs=str(tmp_path)), Flusher("os"), ManualClock(T0))
    manager.open()
    yield manager
    manager.close()


def topic(pm: PartitionManager, name: str, configs: dict[str, str | None]) -> Partition:
    pm.create_topic(name, 1, configs)
    part = pm.partition(name, 0)
    assert part is not None
    return part


def append(
    pm: PartitionManager, part: Partition, raw: bytes, tid: str | None = None
) -> tuple[int, int, bool]:
    return append_records(pm.config, part, raw, T0, tid, PRODUCE_VERSION)


def stored(part: Partition) -> list[tuple[records.BatchHeader, bytes]]:
    out = []
    for seg in part.log.segments:
        data = seg.path.read_bytes()[: seg.size]  # without the preallocated zeros
        out.extend((h, data[h.position : h.position + h.size]) for h in records.iter_headers(data))
    return out


def decoded(raw: bytes) -> list[tuple[int, int, bytes | None, bytes | None, list[tuple[str, bytes]]]]:
    """Records as kafka-python's consumer decodes them (CRC checked)."""
    b = DefaultRecordBatch(raw)
    assert b.validate_crc()
    return [(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in b]


ROWS = [(b"k%d" % i, b"value %d " % i * 20) for i in range(5)] + [(b"gone", None)]


def test_producer_keeps_the_sent_bytes(pm: PartitionManager) -> None:
    """The default stores each batch byte for byte as sent: nothing but the offset and leader
    epoch (outside the CRC) differs, so no codec ran on the produce path."""
    part = topic(pm, "as-sent", {})
    sent = [batch(ROWS, codec) for codec in range(5)]
    for raw in sent:
        append(pm, part, raw)
    kept = stored(part)
    assert len(kept) == 5
    offset = 0
    for raw, (h, data) in zip(sent, kept, strict=True):
        assert h.base_offset == offset
        assert data[8:12] == raw[8:12] and data[16:] == raw[16:]
        offset += len(ROWS)


@pytest.mark.parametrize("target", CODEC_NAMES)
def test_a_codec_recompresses_other_codecs(pm: PartitionManager, target: str) -> None:
    part = topic(pm, f"t-{target}", {"compression.type": target})
    want = CODEC_NAMES.index(target)
    offset = 0
    seqs = {4000: 0, 4001: 0}
    for source, (pid, transactional) in itertools.product(
        range(5), [(-1, False), (4000, False), (4001, True)]
    ):
        seq = seqs[pid] if pid >= 0 else -1
        if pid >= 0:
            seqs[pid] += len(ROWS)
        raw = batch(ROWS, source, pid=pid, epoch=3 if pid >= 0 else -1, seq=seq, transactional=transactional)
        first, _, appended = append(pm, part, raw, "tx" if transactional else None)
        assert (first, appended) == (offset, True)
        h, data = stored(part)[-1]
        assert h.compression == want
        if source == want:
            assert data[16:] == raw[16:]  # already in the topic's codec: stored as sent
        assert (h.producer_id, h.producer_epoch, h.base_sequence, h.is_transactional) == (
            pid,
            3 if pid >= 0 else -1,
            seq,
            transactional,
        )
        assert h.last_offset_delta == len(ROWS) - 1
        expected = [(o + offset, ts, k, v, hs) for o, ts, k, v, hs in decoded(raw)]
        assert decoded(data) == expected
        offset += len(ROWS)
    # The log reads back whole (indexes and CRCs agree after the re-encoding).
    assert part.log.log_end_offset == offset


def test_an_idempotent_retry_is_still_a_duplicate(pm: PartitionManager) -> None:
    part = topic(pm, "dup", {"compression.type": "zstd"})
    raw = batch(ROWS, 1, pid=77, epoch=0, seq=0)
    assert append(pm, part, raw) == (0, -1, True)
    assert append(pm, part, raw) == (0, -1, False)
    assert part.log.log_end_offset == len(ROWS)


def test_levels_apply(pm: PartitionManager) -> None:
    sizes = []
    for level in ("1", "9"):
        part = topic(pm, f"gz-{level}", {"compression.type": "gzip", "compression.gzip.level": level})
        append(pm, part, batch([(b"k", bytes(range(256)) * 40 + b"x" * 5000)]))
        sizes.append(stored(part)[-1][0].size)
    assert sizes[1] < sizes[0]


def test_max_message_bytes_counts_the_recompressed_batch(pm: PartitionManager) -> None:
    """A batch that fits compressed but not once decompressed is MESSAGE_TOO_LARGE, as Kafka
    checks the sizes again after recompression; nothing is appended."""
    rows = [(b"k", b"z" * 4000)]
    small = batch(rows, 4)
    assert len(small) < 1000
    part = topic(pm, "big", {"compression.type": "uncompressed", "max.message.bytes": "1000"})
    with pytest.raises(KafkaError) as e:
        append(pm, part, small)
    assert e.value.code == ErrorCode.MESSAGE_TOO_LARGE
    assert part.log.log_end_offset == 0


@pytest.mark.parametrize(
    ("configs", "message"),
    [
        (
            {"compression.type": "brotli"},
            "Invalid value brotli for configuration compression.type: String must be one of: "
            "uncompressed, zstd, lz4, snappy, gzip, producer",
        ),
        (
            {"compression.gzip.level": "10"},
            "Invalid value 10 for configuration compression.gzip.level: Value must be between 1 and 9 "
            "or equal to -1",
        ),
        (
            {"compression.lz4.level": "0"},
            "Invalid value 0 for configuration compression.lz4.level: Value must be at least 1",
        ),
        (
            {"compression.zstd.level": "23"},
            "Invalid value 23 for configuration compression.zstd.level: Value must be no more than 22",
        ),
    ],
)
def test_bad_values_are_refused(configs: dict[str, str | None], message: str) -> None:
    with pytest.raises(InvalidTopicConfig) as e:
        validate_topic_configs(configs, BrokerConfig())
    assert str(e.value) == message


def test_good_values_are_kept() -> None:
    configs: dict[str, str | None] = {
        "compression.type": "lz4",
        "compression.gzip.level": "-1",
        "compression.lz4.level": "17",
        "compression.zstd.level": "-5",
    }
    assert validate_topic_configs(configs, BrokerConfig()) == configs


def test_one_batch_per_partition_and_no_zstd_before_produce_v7(pm: PartitionManager) -> None:
    """Kafka's ProduceRequest.validateRecords: INVALID_RECORD for two batches of one partition,
    UNSUPPORTED_COMPRESSION_TYPE for a zstd batch in Produce v3-v6; nothing is appended."""
    part = topic(pm, "validate", {})
    two = batch([(b"a", b"1")]) + batch([(b"b", b"2")])
    with pytest.raises(KafkaError) as e:
        append_records(pm.config, part, two, T0, None, PRODUCE_VERSION)
    assert e.value.code == ErrorCode.INVALID_RECORD
    assert "exactly one record batch" in str(e.value.message)
    zstd = batch([(b"a", b"x" * 1000)], codec=4)
    assert records.read_header(zstd, 0).compression == 4
    with pytest.raises(KafkaError) as e:
        append_records(pm.config, part, zstd, T0, None, 6)
    assert e.value.code == ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
    assert part.high_watermark == 0
    assert append_records(pm.config, part, zstd, T0, None, 7)[0] == 0
