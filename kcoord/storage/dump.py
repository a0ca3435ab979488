"""``kcoord log-dump``: print the batches of a segment file or a partition directory."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

from kafka.record.default_records import DefaultRecordBatch

from kcoord.protocol import records


def segment_files(path: Path) -> list[Path]:
    return sorted(path.glob("*.log")) if path.is_dir() else [path]


def dump_path(
    path: Path, records_too: bool = False, progress: Callable[[int], None] | None = None
) -> Iterator[str]:
    """The dump's lines; ``progress`` is told how many more bytes of the files were read."""
    for f in segment_files(path):
        yield f"segment {f}"
        data = f.read_bytes()
        end = 0
        for h in _headers(data):
            crc_ok = records.crc_of(data, h.position, h.size) == h.crc
            yield (
                f"  baseOffset: {h.base_offset} lastOffset: {h.last_offset} count: {h.records_count} "
                f"position: {h.position} size: {h.size} maxTimestamp: {h.max_timestamp} "
                f"producerId: {h.producer_id} producerEpoch: {h.producer_epoch} "
                f"baseSequence: {h.base_sequence} transactional: {h.is_transactional} "
                f"control: {h.is_control} compression: {h.compression} crcValid: {crc_ok}"
            )
            if records_too:
                for r in DefaultRecordBatch(bytes(data[h.position : h.position + h.size])):
                    yield f"    offset: {r.offset} timestamp: {r.timestamp} key: {r.key!r} value: {r.value!r}"
            end = h.position + h.size
            if progress is not None:
                progress(h.size)
        if progress is not None:
            progress(len(data) - end)
        if end < len(data):
            if data.count(0, end) == len(data) - end:
                # The active segment of a running (or crashed) broker: see preallocation.py.
                yield f"  {len(data) - end} bytes of preallocated space (zeros) after the last batch"
            else:
                yield f"  {len(data) - end} trailing bytes after the last complete batch"


def _headers(data: bytes) -> Iterator[records.BatchHeader]:
    """The batches up to the first bytes that are not one (a torn write, preallocated zeros)."""
    try:
        yield from records.iter_headers(data, partial_ok=True)
    except records.InvalidBatch:
        return
