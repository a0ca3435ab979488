"""Fuzz target: a producer's record batches through Produce's append path (kcoord.apis.produce.
append_records): header and CRC checks, record parsing, timestamps, compaction's key check and
recompression. Anything but a KafkaError (the partition's error answer) is a finding.

    python fuzz/record_batches.py -runs=1000000 fuzz/corpus/record_batches

Inputs are record payloads whose batch CRC the target fixes (so the fuzzer gets past the CRC
check into the records), or raw bytes as a client could send (the first byte chooses).
"""

from __future__ import annotations

import contextlib
import struct
import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace

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
_dir = tempfile.mkdtemp(prefix="kcoord-fuzz-batches-")
_pm = PartitionManager(
    BrokerConfig(log_dirs=_dir, log_segment_bytes=1 << 20), Flusher("os"), ManualClock(NOW)
)
_pm.open()
_parts = []
for name, configs in (
    ("plain", {}),
    ("compacted", {"cleanup.policy": "compact"}),
    ("lz4", {"compression.type": "lz4"}),
    ("appendtime", {"message.timestamp.type": "LogAppendTime", "message.timestamp.before.max.ms": "1000"}),
):
    _pm.create_topic(name, 1, configs)
    _parts.append(_pm.partition(name, 0))
_services = SimpleNamespace(config=_pm.config)


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
    fdp = atheris.FuzzedDataProvider(data)
    mode = fdp.ConsumeIntInRange(0, 1)
    part = _parts[fdp.ConsumeIntInRange(0, len(_parts) - 1)]
    version = fdp.ConsumeIntInRange(3, 13)
    body = bytearray(fdp.ConsumeBytes(fdp.remaining_bytes()))
    raw = with_crc(body) if mode == 0 else bytes(body)
    with contextlib.suppress(KafkaError):  # the partition's error answer
        append_records(_services, part, raw, NOW, None, version)  # type: ignore[arg-type]


if __name__ == "__main__":
    atheris.Setup(sys.argv, one)
    atheris.Fuzz()
