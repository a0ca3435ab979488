"""The latest records of a partition, for the console's topic page, read as Fetch reads them.

Fetch's read path (``Log.read``: whole batches from the one holding an offset, within one segment,
up to a bound) and the record codec of the protocol layer; no consumer group is involved, so
looking changes no committed offset. What a read_uncommitted consumer would see: records up to
the high watermark, control batches (transaction markers) left out, records of aborted
transactions included. Keys and values are previews: text when they are UTF-8, else hex.
"""

from __future__ import annotations

from dataclasses import dataclass

from kcoord.dataplane.partition import Partition
from kcoord.protocol import records

READ_BYTES = 1 << 20  # per read, as a consumer's fetch.max.bytes is per request
MAX_READ_BYTES = 8 << 20  # a page never reads more than this of one partition


@dataclass(frozen=True)
class Preview:
    text: str
    size: int | None  # None: a null key or value
    truncated: bool
    binary: bool


@dataclass(frozen=True)
class RecordPreview:
    offset: int
    timestamp: int
    key: Preview
    value: Preview


def preview(data: bytes | None, limit: int) -> Preview:
    if data is None:
        return Preview("null", None, False, False)
    head = data[:limit]
    try:
        # A cut may split a multi-byte character: decode the whole value, then cut the text.
        text = data.decode("utf-8")
        return Preview(text[:limit], len(data), len(text) > limit, False)
    except UnicodeDecodeError:
        return Preview(head.hex(" "), len(data), len(data) > limit, True)


def latest(part: Partition, count: int, preview_bytes: int = 120) -> list[RecordPreview]:
    """The last ``count`` records below the high watermark (fewer where compaction removed some),
    oldest first."""
    end = part.high_watermark
    offset = max(part.log_start_offset, end - count)
    out: list[RecordPreview] = []
    read = 0
    while offset < end and read < MAX_READ_BYTES:
        data = bytes(part.log.read(offset, READ_BYTES, end, min_one=True))
        if not data:
            break
        read += len(data)
        next_offset = offset
        for h in records.iter_headers(data):
            if not h.is_control:
                batch = data[h.position : h.position + h.size]
                for o, ts, key, value in records.iter_records(batch, h):
                    if o >= offset and o < end:
                        out.append(
                            RecordPreview(o, ts, preview(key, preview_bytes), preview(value, preview_bytes))
                        )
            next_offset = h.next_offset
        offset = max(offset + 1, next_offset)
    return out[-count:] if count else []
