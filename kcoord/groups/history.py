"""Offset history: when a group's committed offsets changed, read back from its
``__consumer_offsets`` partition.

Live state keeps only each partition's last commit; the log keeps more, since the log cleaner
retains superseded offset commits for ``offsets.history.retention.ms``. This reads them, and
never touches live state (start-up replay still takes the last record per key):

- a plain offset commit (record types 0/1) of the group is a change where it stands in the log;
  a tombstone (OffsetDelete, expiry, DeleteGroups) is a deletion;
- a transactional commit (TxnOffsetCommit) is a change only once its producer's COMMIT marker is
  in the log, and then only if no record of the same partition was written after it (Kafka's
  rule: the offset written later in the log wins, see ``PendingTransactions``); an ABORT marker,
  or no marker yet, and it never is;
- the member that made a commit: offset commits carry no member id, so it is the member the
  group's last membership record before the commit assigned the partition to, where a
  ``Membership`` reads the group's other records (classic group metadata and KIP-848
  assignments are above this layer); None where no such record is in the log (or compaction
  removed it).

Reading runs in a worker thread over the segments as they were when it started (pinned, as the
cleaner pins them), up to the high watermark, so the event loop stays free for big logs.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from typing import Protocol

from kcoord.groups.records import OFFSET_COMMIT_TYPES, OffsetCommitValue, decode_offset_commit
from kcoord.protocol import records
from kcoord.protocol.fields import string
from kcoord.protocol.records import BatchHeader
from kcoord.storage.log import Log
from kcoord.storage.segment import Segment

READ_WINDOW_BYTES = 1 << 20
_OFFSET_TYPES = tuple(t.to_bytes(2, "big") for t in OFFSET_COMMIT_TYPES)


@dataclass(frozen=True, slots=True)
class OffsetChange:
    topic: str
    partition: int
    value: OffsetCommitValue | None  # None: the offset was deleted
    log_offset: int  # of the commit's record
    effective_at: int  # ms: the record's timestamp, the COMMIT marker's for a transactional commit
    member_id: str | None = None
    client_id: str | None = None


class Membership(Protocol):
    """Who owned which partition, from the group's records other than offset commits."""

    def feed(self, key: bytes, value: bytes | None) -> None: ...

    def owner(self, topic: str, partition: int) -> tuple[str, str] | None:
        """(member id, client id) of the member the partition is assigned to now, if known."""
        ...


def scan(
    batches: Iterable[tuple[BatchHeader, bytes]], group_id: str, membership: Membership | None = None
) -> list[OffsetChange]:
    """The group's offset changes in log order (the order they took effect)."""
    prefix = string(group_id)  # every record key of a group: int16 type, then the group id
    start, end = 2, 2 + len(prefix)
    out: list[OffsetChange] = []
    last: dict[tuple[str, int], int] = {}  # partition -> log offset of its last change
    pending: dict[int, dict[tuple[str, int], OffsetChange]] = {}  # producer id -> its writes
    for h, data in batches:
        if h.is_control:
            writes = pending.pop(h.producer_id, None)
            if writes and records.read_marker(data, h)[0]:
                for tp, change in sorted(writes.items(), key=lambda kv: kv[1].log_offset):
                    if last.get(tp, -1) < change.log_offset:
                        last[tp] = change.log_offset
                        out.append(replace(change, effective_at=h.max_timestamp))
            continue
        for offset, ts, key, value in records.iter_records(data, h):
            if key is None or key[start:end] != prefix:
                continue
            if key[:2] not in _OFFSET_TYPES:
                if membership is not None and not h.is_transactional:
                    membership.feed(key, value)
                continue
            k, v = decode_offset_commit(key, value)
            owner = membership.owner(k.topic, k.partition) if membership is not None else None
            change = OffsetChange(
                k.topic,
                k.partition,
                v,
                offset,
                ts,
                owner[0] if owner else None,
                owner[1] if owner else None,
            )
            tp = (k.topic, k.partition)
            if h.is_transactional:
                pending.setdefault(h.producer_id, {})[tp] = change
            else:
                last[tp] = offset
                out.append(change)
    return out


def offsets_at(changes: Iterable[OffsetChange], timestamp: int) -> dict[tuple[str, int], OffsetChange]:
    """Each partition's committed offset as of ``timestamp``: its last change at or before it,
    unless that was a deletion (then, as for a partition not committed yet, it is absent)."""
    state: dict[tuple[str, int], OffsetChange] = {}
    for c in changes:
        if c.effective_at > timestamp:
            continue
        tp = (c.topic, c.partition)
        if c.value is None:
            state.pop(tp, None)
        else:
            state[tp] = c
    return dict(sorted(state.items()))


def _read(snapshot: list[tuple[Segment, int]], end: int) -> Iterator[tuple[BatchHeader, bytes]]:
    """The batches of the snapshot's segments (each up to the size it had), below ``end``."""
    for seg, size in snapshot:
        pos = 0
        while pos < size:
            data = seg.read(pos, min(READ_WINDOW_BYTES, size - pos))
            used = 0
            for h in records.iter_headers(data, partial_ok=True):
                if h.base_offset >= end:
                    return
                used = h.position + h.size
                yield h, data[h.position : used]
            if used == 0:  # a batch larger than the window: read it whole
                if len(data) < records.HEADER_SIZE:
                    break
                whole = records.read_header(data).size
                if whole <= len(data) or pos + whole > size:
                    break
                data = seg.read(pos, whole)
                h = records.read_header(data)
                if h.base_offset >= end:
                    return
                yield h, data
                used = whole
            pos += used


async def read_changes(log: Log, group_id: str, membership: Membership | None = None) -> list[OffsetChange]:
    """``scan`` of the whole log in a worker thread, up to the high watermark (what is durable)."""
    snapshot = [(seg, seg.size) for seg in log.segments]
    end = log.high_watermark
    for seg, _ in snapshot:
        seg.pin()  # the cleaner may replace them meanwhile: their files must stay open
    try:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(None, scan, _read(snapshot, end), group_id, membership)
    finally:
        for seg, _ in snapshot:
            seg.unpin()
