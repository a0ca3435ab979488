"""The group coordinator's log grows by written zeros (``LogConfig.preallocate_zeros``), with
kafka-python committing offsets: the space ahead of the data has no unwritten extent left for a
sync to convert, and a kill -9 leaves zeros that the restart cuts off, every commit kept."""

from __future__ import annotations

import os

import pytest
from kafka import KafkaConsumer, TopicPartition
from kafka.structs import OffsetAndMetadata

from kcoord.storage import preallocation
from kcoord.storage.segment import segment_name
from tests.harness import BrokerProcess
from tests.unit.test_preallocation import unwritten_extents

pytestmark = pytest.mark.slow


def test_committed_offsets_land_in_written_zeros_and_survive_a_kill_9(broker_factory) -> None:  # type: ignore[no-untyped-def]
    broker: BrokerProcess = broker_factory()
    broker.create_topic("t", partitions=4)
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id="g", enable_auto_commit=False)
    tps = [TopicPartition("t", p) for p in range(4)]
    for offset in range(1, 301):  # each commit acknowledged only once synced
        consumer.commit({tp: OffsetAndMetadata(offset * (tp.partition + 1), "m" * 100, -1) for tp in tps})
    consumer.close()

    segment = broker.data_dir / "__consumer_offsets-0" / (segment_name(0) + ".log")
    size = os.path.getsize(segment)
    # Data, then up to a chunk of zeros: the file is longer than its batches.
    with open(segment, "rb") as f:
        data = f.read()
    end = len(data.rstrip(b"\0"))
    assert 0 < end < size <= end + preallocation.ZEROS_CHUNK_BYTES + 4096
    # What tells written zeros from reserved space (both read as zeros, both are trimmed after
    # a crash); None: this filesystem cannot say.
    assert unwritten_extents(segment) in ([], None)

    broker.kill()
    broker.start()
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id="g", enable_auto_commit=False)
    assert {tp.partition: consumer.committed(tp) for tp in tps} == {p: 300 * (p + 1) for p in range(4)}
    consumer.commit({tps[0]: OffsetAndMetadata(1000, "", -1)})
    assert consumer.committed(tps[0]) == 1000
    consumer.close()
    assert "trimming preallocated space" in broker.log_text()
