"""Fuzz target: a producer's record batches through Produce's append path (kcoord.apis.produce.
append_records): header and CRC checks, record parsing, timestamps, compaction's key check and
recompression. Anything but a KafkaError (the partition's error answer) is a finding.

    python fuzz/record_batches.py -runs=1000000 fuzz/corpus/record_batches

Inputs are record payloads whose batch CRC the target fixes (so the fuzzer gets past the CRC
check into the records), or raw bytes as a client could send (the first byte chooses); handed
over as bytes or as a writable view, which the append stamps in place (the next byte chooses).
"""

from __future__ import annotations

import contextlib
import shutil
import struct
import sys
import tempfile
from pathlib import Path

import atheris

# The repository's kcoord, whatever is installed (run as python fuzz/<target>.py).
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

with atheris.instrument_imports(include=["kcoord"], enable_loader_override=False):
    from kcoord.apis.produce import append_records
    from kcoord.clock import ManualClock
    from kcoord.config import BrokerConfig
    from kcoord.dataplane.partitions import PartitionManager
    from kcoord.protocol import records
    from kcoord.protocol.errors import KafkaError
    from kcoord.storage.flush import Flusher

import crc32c

NOW = 1_700_000_000_000
# Inputs between two fresh data directories: appends grow the logs (and the producer state), and
# a run of a million inputs on the same partitions slows to a crawl (119 k in 640 s).
FRESH_EVERY = 20_000
TOPICS = (
    ("plain", {}),
    ("compacted", {"cleanup.policy": "compact"}),
    ("lz4", {"compression.type": "lz4"}),
    ("appendtime", {"message.timestamp.type": "LogAppendTime", "message.timestamp.before.max.ms": "1000"}),
)


class Partitions:
    """The target's topics in a data directory of their own, replaced every FRESH_EVERY inputs."""

    def __init__(self) -> None:
        self.inputs = 0
        self.dir = ""
        self.pm: PartitionManager | None = None
        self.fresh()

    def fresh(self) -> None:
        if self.pm is not None:
            self.pm.close()
            shutil.rmtree(self.dir, ignore_errors=True)
        self.dir = tempfile.mkdtemp(prefix="kcoord-fuzz-batches-")
        config = BrokerConfig(log_dirs=self.dir, log_segment_bytes=1 << 20)
        self.pm = PartitionManager(config, Flusher("os"), ManualClock(NOW))
        self.pm.open()
        self.parts = []
        for name, configs in TOPICS:
            self.pm.create_topic(name, 1, configs)
            self.parts.append(self.pm.partition(name, 0))
        self.config = self.pm.config

    def next(self) -> None:
        self.inputs += 1
        if self.inputs % FRESH_EVERY == 0:
            self.fresh()


_partitions = Partitions()


def with_crc(data: bytearray) -> bytes:
    """``data`` as one v2 batch whose length and CRC fields are right (offset 0..61 header)."""
    if len(data) < records.HEADER_SIZE:
        data += bytes(records.HEADER_SIZE - len(data))
    struct.pack_into(">i", data, 8, len(data) - 12)
    data[16] = 2  # magic
    struct.pack_into(">I", data, 17, crc32c.crc32c(bytes(data[21:])))
    return bytes(data)


def one(data: bytes) -> None:
    if not data:
        return
    _partitions.next()
    fdp = atheris.FuzzedDataProvider(data)
    mode = fdp.ConsumeIntInRange(0, 1)
    part = _partitions.parts[fdp.ConsumeIntInRange(0, len(_partitions.parts) - 1)]
    version = fdp.ConsumeIntInRange(3, 13)
    in_place = fdp.ConsumeBool()  # as a large request's own buffer hands them over (server.py)
    body = bytearray(fdp.ConsumeBytes(fdp.remaining_bytes()))
    raw: bytes | memoryview = with_crc(body) if mode == 0 else bytes(body)
    if in_place:
        raw = memoryview(bytearray(raw))
    with contextlib.suppress(KafkaError):  # the partition's error answer
        append_records(_partitions.config, part, raw, NOW, None, version)


if __name__ == "__main__":
    atheris.Setup(sys.argv, one)
    atheris.Fuzz()
