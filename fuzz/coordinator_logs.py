"""Fuzz target: a damaged coordinator log through the broker's start-up load path.

Each input is one segment of ``__consumer_offsets``, ``__transaction_state`` or
``__cluster_metadata`` (the first byte chooses), written to a fresh data directory and opened by
the production ``CoordinatorRuntime.open`` with its production state (the group store with every
group type, the transaction store, the metadata store): the log's recovery, the snapshot reader
(mode 2 writes what follows the input's batches as the partition's snapshot file), the record readers and each
store's replay. By default every batch's CRC is recomputed so the fuzzer gets past the CRC check
into the records, as a bug writing well-framed nonsense would (mode 1 leaves the bytes raw, as a
damaged disk would).

A loader may refuse a log only with ``RecordFormatError`` (the broker then refuses to start and
names the partition and offset, losing nothing); any other exception is a finding.

    PYTHONPATH=. python fuzz/make_corpus.py fuzz/corpus/coordinator_logs
    python fuzz/coordinator_logs.py -runs=1000000 -max_len=8192 fuzz/corpus/coordinator_logs
"""

from __future__ import annotations

import shutil
import struct
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import atheris

# The repository's kcoord, whatever is installed (run as python fuzz/<target>.py).
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

with atheris.instrument_imports(include=["kcoord"], enable_loader_override=False):
    from kcoord.clock import ManualClock
    from kcoord.config import BrokerConfig
    from kcoord.protocol.fields import RecordFormatError
    from kcoord.runtime.runtime import CoordinatorRuntime
    from kcoord.runtime.snapshot import snapshot_path
    from kcoord.server.coordinators import group_runtime, metadata_runtime, transaction_runtime
    from kcoord.storage.flush import Flusher
    from kcoord.storage.segment import segment_name

import crc32c

NOW = 1_700_000_000_000
HEADER_SIZE = 61  # a v2 batch's header; its CRC covers bytes 21 onwards


class _NoTopics:
    """Consumer and share groups look topics up while replaying; none exist here."""

    version = 0

    def lookup(self, name: str) -> None:
        return None

    def __call__(self, name: str) -> None:
        return None


# One data directory for the run: each input replaces the partition directory it uses.
_root = Path(tempfile.mkdtemp(prefix="kcoord-fuzz-coord-"))
_config = BrokerConfig(
    log_dirs=str(_root),
    offsets_topic_num_partitions=1,
    transaction_state_log_num_partitions=1,
    coordinator_snapshot_interval_records=0,
)
_flusher = Flusher("os")
_clock = ManualClock(NOW)
_RUNTIMES: list[Callable[[], CoordinatorRuntime[Any]]] = [
    lambda: group_runtime(_config, _flusher, _clock, _NoTopics(), lambda _t: None),  # type: ignore[arg-type]
    lambda: transaction_runtime(_config, _flusher, _clock, lambda: 1000, lambda _job: None),
    lambda: metadata_runtime(_config, _flusher, _clock),
]


def frame(data: bytearray, fix: bool) -> tuple[int, int]:
    """Where the batches the length fields frame end, and the offset after the last of them
    (what a snapshot of the whole log covers); with
    ``fix``, each framed batch's CRC is recomputed so mutations inside records reach the record
    readers."""
    pos = end_offset = 0
    while pos + HEADER_SIZE <= len(data):
        base, length = struct.unpack_from(">qi", data, pos)
        (last_delta,) = struct.unpack_from(">i", data, pos + 23)
        end = pos + 12 + length
        if length < HEADER_SIZE - 12 or end > len(data):
            break
        if fix:
            data[pos + 16] = 2  # magic
            struct.pack_into(">I", data, pos + 17, crc32c.crc32c(bytes(data[pos + 21 : end])))
        end_offset = max(0, base + last_delta + 1)
        pos = end
    return pos, end_offset


def one(data: bytes) -> None:
    if len(data) < 2:
        return
    which, mode = data[0] % 3, data[1] % 3
    body = bytearray(data[2:])
    framed, end_offset = frame(body, fix=mode != 1)
    snapshot = b""
    if mode == 2:  # what follows the batches is the snapshot of the log they make
        snapshot, body = bytes(body[framed:]), body[:framed]
    runtime = _RUNTIMES[which]()
    directory = _root / f"{runtime.topic}-0"
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir()
    (directory / (segment_name(0) + ".log")).write_bytes(bytes(body))
    if snapshot:
        snapshot_path(directory, end_offset).write_bytes(snapshot)
    try:
        runtime.open(unclean=mode != 0)
    except RecordFormatError:
        pass  # refused, clearly: the broker does not start and says where
    finally:
        for shard in runtime.shards:
            shard.log.close()


if __name__ == "__main__":
    atheris.Setup(sys.argv, one)
    atheris.Fuzz()
