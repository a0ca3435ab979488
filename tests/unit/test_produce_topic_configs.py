"""Topic configs the append path checks: message.timestamp.type, message.timestamp.before.max.ms
and after.max.ms (every record's timestamp, as Kafka's LogValidator), max.message.bytes; a
refused batch appends nothing."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from kcoord.apis.produce import RecordErrors, append_records
from kcoord.clock import ManualClock
from kcoord.config import BrokerConfig
from kcoord.dataplane.partition import Partition
from kcoord.dataplane.partitions import PartitionManager
from kcoord.protocol import records
from kcoord.protocol.errors import ErrorCode, KafkaError
from kcoord.storage.flush import Flusher

NOW = 1_700_000_000_000
HOUR = 3_600_000


def batch(timestamps: list[int], codec: int = 0, value: bytes = b"v") -> bytes:
    b = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=codec,
        is_transactional=False,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=1 << 30,
    )
    for i, ts in enumerate(timestamps):
        b.append(i, timestamp=ts, key=b"k", value=value, headers=[])
    return bytes(b.build())


@pytest.fixture
def pm(tmp_path: Path) -> Iterator[PartitionManager]:
    manager = PartitionManager(BrokerConfig(log_dirs=str(tmp_path)), Flusher("os"), ManualClock(NOW))
    manager.open()
    yield manager
    manager.close()


def topic(pm: PartitionManager, name: str, configs: dict[str, str | None]) -> Partition:
    pm.create_topic(name, 1, configs)
    part = pm.partition(name, 0)
    assert part is not None
    return part


def append(pm: PartitionManager, part: Partition, raw: bytes) -> tuple[int, int, bool]:
    return append_records(pm.config, part, raw, NOW, None, 11)


def refused(pm: PartitionManager, part: Partition, raw: bytes) -> KafkaError:
    end = part.log.log_end_offset
    with pytest.raises(KafkaError) as e:
        append(pm, part, raw)
    assert part.log.log_end_offset == end
    return e.value


@pytest.mark.parametrize("codec", [0, 1, 4])
def test_after_max_refuses_records_from_the_future(pm: PartitionManager, codec: int) -> None:
    part = topic(pm, "future", {})
    e = refused(pm, part, batch([NOW, NOW + 2 * HOUR, NOW + 3 * HOUR], codec))
    assert e.code == ErrorCode.INVALID_TIMESTAMP
    assert e.message == "One or more records have been rejected due to invalid timestamp"
    assert isinstance(e, RecordErrors)
    low = NOW - 9223372036854775807  # Kafka prints now - before.max.ms, whatever it is
    assert e.errors == [
        (
            i,
            f"Timestamp {NOW + (i + 1) * HOUR} of message with offset {i} is out of range. The timestamp "
            f"should be within [{low}, {NOW + HOUR}]",
        )
        for i in (1, 2)
    ]
    assert append(pm, part, batch([NOW, NOW + HOUR], codec))[2]  # exactly at the bound: kept
    later = topic(pm, "future-ok", {"message.timestamp.after.max.ms": str(3 * HOUR)})
    assert append(pm, later, batch([NOW, NOW + 2 * HOUR], codec))[2]


@pytest.mark.parametrize("codec", [0, 3])
def test_before_max_looks_at_every_record_not_only_the_first(pm: PartitionManager, codec: int) -> None:
    """The batch's base timestamp is its first record's: a later record may be older."""
    part = topic(pm, "past", {"message.timestamp.before.max.ms": "60000"})
    e = refused(pm, part, batch([NOW, NOW - 120_000, NOW], codec))
    assert isinstance(e, RecordErrors) and e.code == ErrorCode.INVALID_TIMESTAMP
    assert e.errors == [
        (
            1,
            f"Timestamp {NOW - 120_000} of message with offset 1 is out of range. The timestamp should "
            f"be within [{NOW - 60_000}, {NOW + HOUR}]",
        )
    ]
    # At the bound is kept, and a record without a timestamp (-1) is not checked, as Kafka.
    assert append(pm, part, batch([NOW, NOW - 60_000, -1], codec))[2]
    default = topic(pm, "past-default", {})
    assert append(pm, default, batch([NOW, NOW - 365 * 24 * HOUR], codec))[2]


def test_a_lying_max_timestamp_is_refused(pm: PartitionManager) -> None:
    raw = bytearray(batch([NOW]))
    raw[35:43] = (NOW + 2 * HOUR).to_bytes(8, "big")  # maxTimestamp
    h = records.read_header(raw)
    raw[17:21] = records.crc_of(raw, 0, h.size).to_bytes(4, "big")
    part = topic(pm, "liar", {})
    assert refused(pm, part, bytes(raw)).code == ErrorCode.INVALID_TIMESTAMP


def test_log_append_time_takes_any_timestamp_and_stamps_the_broker_time(pm: PartitionManager) -> None:
    part = topic(pm, "append-time", {"message.timestamp.type": "LogAppendTime"})
    _, append_time, appended = append(pm, part, batch([NOW - 400 * 24 * HOUR, NOW + 5 * HOUR]))
    assert (append_time, appended) == (NOW, True)
    seg = part.log.segments[-1]
    data = seg.path.read_bytes()[: seg.size]  # without the preallocated zeros
    got = DefaultRecordBatch(data)
    assert got.timestamp_type == 1
    assert [r.timestamp for r in got] == [NOW, NOW]


def test_max_message_bytes_bounds_each_batch(pm: PartitionManager) -> None:
    part = topic(pm, "small", {"max.message.bytes": "1000"})
    big = batch([NOW], value=b"x" * 1000)
    e = refused(pm, part, big)
    assert e.code == ErrorCode.MESSAGE_TOO_LARGE
    assert append(pm, part, batch([NOW], value=b"x" * 900))[2]
    pm.alter_topic_configs(part.topic, pm.validate_configs({"max.message.bytes": "2000"}))
    assert append(pm, part, big)[2]
