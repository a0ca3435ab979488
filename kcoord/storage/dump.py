"""``kcoord log-dump``: print the batches of a segment file or a partition directory."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from kafka.record.default_records import DefaultRecordBatch

from kcoord.protocol import records


def dump_path(path: Path, records_too: bool = False) -> Iterator[str]:
    files = sorted(path.glob("*.log")) if path.is_dir() else [path]
    for f in files:
        yield f"segment {f}"
        data = f.read_bytes()
        end = 0
        for h in records.iter_headers(data, partial_ok=True):
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
        if end < len(data):
            yield f"  {len(data) - end} trailing bytes after the last complete batch"
