"""Helpers for driving :class:`kcoord.storage.log.Log` directly (no broker, no sockets)."""

from __future__ import annotations

from pathlib import Path

from kafka.record.default_records import DefaultRecordBatch

from kcoord.protocol import records
from kcoord.storage.flush import Flusher
from kcoord.storage.log import AppendInfo, Log, LogConfig
from tests.wire import build_batch

T0 = 1_700_000_000_000


def open_log(directory: Path, unclean: bool = False, **config: int) -> Log:
    """A log whose appends are visible at once (flush policy ``os``, no event loop needed)."""
    return Log.open(directory, LogConfig(**config), Flusher("os"), unclean=unclean)


def append(
    log: Log,
    timestamps: list[int],
    now_ms: int | None = None,
    value_size: int = 8,
    log_append_time: bool = False,
    **batch_fields: int,
) -> AppendInfo:
    """Append one batch with one record per timestamp; record i has key ``k<i>``."""
    recs = [(f"k{i}".encode(), bytes([i % 251]) * value_size, ts) for i, ts in enumerate(timestamps)]
    data = bytearray(build_batch(recs, **batch_fields))
    headers = list(records.iter_headers(data))
    now = max(timestamps) if now_ms is None else now_ms
    return log.append(data, headers, now, log_append_time=log_append_time)


def decode(data: bytes) -> list[tuple[int, int, bytes | None, bytes | None]]:
    """(offset, timestamp, key, value) of every record in ``data`` (whole batches)."""
    out = []
    for h in records.iter_headers(data):
        for r in DefaultRecordBatch(bytes(data[h.position : h.position + h.size])):
            out.append((r.offset, r.timestamp, r.key, r.value))
    return out


def batch_bases(data: bytes) -> list[int]:
    return [h.base_offset for h in records.iter_headers(data)]


def read_all(log: Log) -> list[tuple[int, int, bytes | None, bytes | None]]:
    """Every record from the log start, by repeated reads as a consumer does."""
    out: list[tuple[int, int, bytes | None, bytes | None]] = []
    offset = log.log_start_offset
    while offset < log.high_watermark:
        data = log.read(offset, 1 << 20)
        got = [r for r in decode(data) if r[0] >= offset]
        assert got, f"no progress at offset {offset}"
        out.extend(got)
        offset = got[-1][0] + 1
    return out


def written_headers(data: bytes) -> list[records.BatchHeader]:
    """Headers of the batches in a segment file's bytes, up to the zeros that follow them in a
    running (or killed) broker's preallocated active segment."""
    out: list[records.BatchHeader] = []
    try:
        for h in records.iter_headers(data):
            out.append(h)
    except records.InvalidBatch:
        end = out[-1].position + out[-1].size if out else 0
        assert data.count(0, end) == len(data) - end, "bytes that are neither batches nor zeros"
    return out


def written(path: Path) -> bytes:
    """A segment file's batches, without the zeros a preallocated active segment ends with."""
    data = path.read_bytes()
    headers = written_headers(data)
    return data[: headers[-1].position + headers[-1].size] if headers else b""
