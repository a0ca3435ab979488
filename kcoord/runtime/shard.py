"""One coordinator partition, sans-io: its log, its state, and the path records take into both.

``run(op, now)`` runs an operation against the state and applies the records it returns through
the state's ``replay``; ``append(records, now)`` writes records to the log as one batch; ``load``
replays the log into a fresh state at start-up, through the same ``replay``. Nothing here waits:
the asyncio driver (runtime.py) decides when to append and when answers may go out, and tests
call the same three methods directly.

Snapshots (snapshot.py): the shard keeps the latest record of every key (``latest``) from the
bytes it appends and replays; ``load`` starts from the newest usable snapshot and replays only the
log after it, and ``capture``/``write_snapshot`` make a new one.

Transactions, as Kafka's coordinator runtime has them: an operation's records may be a producer's
transactional writes (``Outcome.producer``; applied through ``replay_transactional`` and written
as a transactional batch of that producer), and an operation may end a producer's transaction in
the partition (``Outcome.marker``; applied through ``replay_end_transaction`` and written as a
COMMIT or ABORT control batch). Start-up replay feeds both to the loaders in log order.
"""

from __future__ import annotations

import struct
import threading
from collections.abc import Callable, Hashable, Iterable, Mapping
from pathlib import Path
from typing import Any, Final, Generic, Protocol, TypeVar

from kcoord.protocol import records as batches
from kcoord.runtime.outcome import Operation, Outcome, Producer, Record, TransactionMarker
from kcoord.runtime.records import RecordFormatError, RecordRegistry, record_type
from kcoord.runtime.snapshot import (
    NO_PRODUCER,
    Entry,
    LatestRecords,
    delete_snapshots,
    encode_latest,
    read_snapshot,
    store_snapshot,
)
from kcoord.storage.log import Log

K = TypeVar("K", bound=Hashable, contravariant=True)

# What reading a record's fields out of bytes that are not that record raises (UnicodeDecodeError
# and RecordFormatError are ValueErrors); anything else is a bug in a state's replay, not bad bytes.
_UNDECODABLE = (ValueError, IndexError, struct.error, OverflowError)


def _unknown_record_type(key: bytes, offset: int) -> RecordFormatError:
    return RecordFormatError(f"unknown record type {record_type(key)} at offset {offset}")


class Loader(Protocol):
    """Turns a log's records of some types into replayed state at start-up.

    ``feed`` gets every record in log order with its offset; a loader may decode and replay it at
    once, keep it back (a later record of the same key replaces it) or skip it, as long as the
    state after ``finish`` is what replaying every record in order gives.
    """

    def feed(self, offset: int, key: bytes, value: bytes | None) -> None: ...

    def feed_transactional(
        self, offset: int, producer_id: int, producer_epoch: int, key: bytes, value: bytes | None
    ) -> None:
        """A record of a producer's transaction, pending until an end marker."""
        ...

    def end_transaction(self, offset: int, producer_id: int, producer_epoch: int, commit: bool) -> None:
        """A COMMIT or ABORT marker at ``offset``: every loader gets it."""
        ...

    def finish(self) -> None: ...


class CoordinatorState(Protocol[K]):
    """The in-memory state of one shard, as a coordinator kind keeps it."""

    def replay(self, key: Any, value: Any, now: int) -> None:
        """Apply one record: live writes and start-up replay both come through here."""
        ...

    def replay_transactional(
        self, producer_id: int, producer_epoch: int, key: Any, value: Any, now: int
    ) -> None:
        """Apply a record of a producer's ongoing transaction (Kafka's replay with a producer id)."""
        ...

    def replay_end_transaction(self, producer_id: int, producer_epoch: int, commit: bool, now: int) -> None:
        """The producer's transaction ended in this partition (Kafka's replayEndTransactionMarker)."""
        ...

    def loaders(self, registry: RecordRegistry, now: int) -> Mapping[int, Loader]:
        """A loader per record type for start-up (types without one are decoded and replayed)."""
        ...

    def loaded(self, now: int) -> None:
        """Start-up replay is over: bring what the records describe to life."""
        ...

    def link(self, records: list[Record], base_offset: int) -> list[Record]:
        """The records as written at ``base_offset`` on: for records that point at earlier ones."""
        ...

    def holds(self, key: K) -> bool:
        """Whether anything lives under ``key`` (else its actor may go)."""
        ...

    def keys(self) -> Iterable[Any]: ...

    def next_deadline(self, key: K) -> int | None: ...

    def on_timer(self, key: K, now: int) -> Outcome: ...


S = TypeVar("S", bound=CoordinatorState[Any])


class Replaying:
    """The loader of records that are decoded and replayed as they come."""

    __slots__ = ("_decode", "_now", "_replay", "_state")

    def __init__(self, registry: RecordRegistry, state: CoordinatorState[Any], now: int) -> None:
        self._decode = registry.decode
        self._replay = state.replay
        self._state = state
        self._now = now

    def feed(self, offset: int, key: bytes, value: bytes | None) -> None:
        k, v = self._decode(key, value)
        self._replay(k, v, self._now)

    def feed_transactional(
        self, offset: int, producer_id: int, producer_epoch: int, key: bytes, value: bytes | None
    ) -> None:
        k, v = self._decode(key, value)
        self._state.replay_transactional(producer_id, producer_epoch, k, v, self._now)

    def end_transaction(self, offset: int, producer_id: int, producer_epoch: int, commit: bool) -> None:
        self._state.replay_end_transaction(producer_id, producer_epoch, commit, self._now)

    def finish(self) -> None:
        pass


class Write:
    """Records of one kind for the log: plain, or one producer's transactional writes; then
    perhaps a marker ending that producer's transaction."""

    __slots__ = ("marker", "producer", "records")

    def __init__(
        self,
        records: list[Record],
        producer: Producer | None = None,
        marker: TransactionMarker | None = None,
    ) -> None:
        self.records = records
        self.producer = producer
        self.marker = marker


LOAD_PROGRESS_EVERY: Final = 200_000  # records between two progress reports of a start-up replay


Capture = tuple[int, int, dict[bytes, tuple[int, bytes | None]], list[Entry]]


class CoordinatorShard(Generic[S]):
    __slots__ = (
        "_snapshot_generation",
        "_snapshot_lock",
        "index",
        "latest",
        "log",
        "registry",
        "replayed",
        "snapshot_offset",
        "snapshot_records",
        "state",
    )

    def __init__(self, index: int, log: Log, state: S, registry: RecordRegistry) -> None:
        self.index = index
        self.log = log
        self.state = state
        self.registry = registry
        self.latest = LatestRecords()
        self.snapshot_offset = -1  # the end offset of the newest snapshot on disk (-1: none)
        self.snapshot_records = 0  # records the last load took from a snapshot
        self.replayed = 0  # records the last load replayed from the log
        # A snapshot written off the event loop is renamed into place only if no cleaning
        # invalidated snapshots meanwhile (the generation moves when one does).
        self._snapshot_lock = threading.Lock()
        self._snapshot_generation = 0
        log.clean_listeners.append(self._cleaning)

    def run(self, op: Operation[S], now: int) -> Outcome:
        """Run ``op`` and apply its records; what it returns still has to be appended and answered."""
        outcome = op(self.state, now)
        self._apply(outcome, now)
        while outcome.then is not None:
            step, outcome.then = outcome.then, None
            more = step(self.state, now)
            self._apply(more, now)
            outcome.extend(more)
        return outcome

    def _apply(self, outcome: Outcome, now: int) -> None:
        state = self.state
        if outcome.producer is None:
            # Called as a method, not held as a bound one: an operation writes a record or two,
            # and a bound method is one more object made and freed per operation.
            for key, value in outcome.records:
                state.replay(key, value, now)
        else:
            pid, epoch = outcome.producer
            for key, value in outcome.records:
                state.replay_transactional(pid, epoch, key, value, now)
        marker = outcome.marker
        if marker is not None:
            state.replay_end_transaction(marker.producer_id, marker.producer_epoch, marker.commit, now)

    def append(self, records: list[Record], now: int) -> None:
        """Append ``records`` to the log as one batch (durable once the flusher says so)."""
        self.append_writes([Write(records)], now)

    def append_writes(self, writes: list[Write], now: int) -> None:
        """Append writes in order, as one batch per run of plain records, one per transactional
        write and one per marker, in one append (durable once the flusher says so)."""
        data = bytearray()
        # Each batch's header, as it is built into ``data``: parsing the buffer again (a generator
        # drained into a list, then a header unpacked per batch) was a sixth of a depth-1
        # commit's append.
        headers: list[batches.BatchHeader] = []
        offset = self.log.log_end_offset
        # What the records change in ``latest``, applied once the append succeeded.
        seen: list[tuple[int, list[tuple[bytes, bytes | None]], Write]] = []
        for w in writes:
            if w.records:
                if w.producer is None:
                    records = self.state.link(w.records, offset)
                    encoded = self.registry.encode_all(records)
                    headers.append(batches.append_batch(data, encoded, now))
                else:
                    pid, epoch = w.producer
                    encoded = self.registry.encode_all(w.records)
                    headers.append(
                        batches.append_batch(
                            data,
                            encoded,
                            now,
                            producer_id=pid,
                            producer_epoch=epoch,
                            attributes=batches.ATTR_TRANSACTIONAL,
                        )
                    )
                seen.append((offset, encoded, w))
                offset += len(w.records)
            elif w.marker is not None:
                seen.append((offset, [], w))
            m = w.marker
            if m is not None:
                headers.append(
                    batches.append_marker_batch(
                        data, m.producer_id, m.producer_epoch, m.commit, m.coordinator_epoch, now
                    )
                )
                offset += 1
        if data:
            self.log.append(data, headers, now)
        latest = self.latest
        for base, encoded, w in seen:
            if w.producer is None:
                lt = latest.latest
                if latest.pending_keys:  # an open transaction: the general path
                    for k, v in encoded:
                        latest.plain(base, k, v)
                        base += 1
                else:
                    for k, v in encoded:
                        if v is None:
                            lt.pop(k, None)
                        else:
                            lt[k] = (base, v)
                        base += 1
            else:
                pid, epoch = w.producer
                for k, v in encoded:
                    latest.transactional(base, pid, epoch, k, v)
                    base += 1
            if w.marker is not None:
                latest.end_transaction(w.marker.producer_id, w.marker.commit)

    def load(self, now: int, progress: Callable[[int], None] | None = None, use_snapshot: bool = True) -> int:
        """Replay the log into the state, from its newest usable snapshot on (if ``use_snapshot``);
        returns the number of records read, from the snapshot and the log.

        Bytes that do not decode into the records the state knows (a CRC-valid batch written
        wrong, an unknown record type, a field that is not what its type says) raise
        ``RecordFormatError`` naming the partition and the offset: the broker refuses to start
        rather than serve a state that lost what the log holds, and the log stays as it is for
        ``kcoord log-dump``.
        """
        state = self.state
        registry = self.registry
        loaders = dict(state.loaders(registry, now))
        replaying = Replaying(registry, state, now)
        for t in registry.key_types:
            loaders.setdefault(t, replaying)
        by_type = {t.to_bytes(2, "big", signed=True): loader for t, loader in loaders.items()}
        feeders = {t: loader.feed for t, loader in by_type.items()}
        distinct = list(dict.fromkeys(loaders.values()))
        latest = self.latest = LatestRecords()
        lt = latest.latest
        pending_keys = latest.pending_keys
        start = 0
        from_snapshot = 0
        snapshot = (
            read_snapshot(self.log.directory, self.log.directory.name, self.log.log_end_offset)
            if use_snapshot
            else None
        )

        def feed_transactional(offset: int, pid: int, epoch: int, key: bytes, value: bytes | None) -> None:
            # A transaction's write, from the snapshot or the log (rare: no fast path).
            loader = by_type.get(key[:2])
            if loader is None:
                raise _unknown_record_type(key, offset)
            loader.feed_transactional(offset, pid, epoch, key, value)
            latest.transactional(offset, pid, epoch, key, value)

        where, at = "its snapshot's record", -1
        try:
            if snapshot is not None:
                # Records below the first segment are gone from the log (retention, DeleteRecords):
                # a full replay would not see them either.
                floor = self.log.segments[0].base_offset
                for at, pid, epoch, k, v in snapshot.entries():
                    if at < floor:
                        continue
                    if pid != NO_PRODUCER:
                        feed_transactional(at, pid, epoch, k, v)
                    else:
                        feed = feeders.get(k[:2])
                        if feed is None:
                            raise _unknown_record_type(k, at)
                        feed(at, k, v)
                        latest.plain(at, k, v)
                    from_snapshot += 1
                start = self.snapshot_offset = snapshot.end_offset
                snapshot = None  # its file's bytes are not needed for the tail
            count = 0
            where = "the batch"
            for h, data in self.log.batches(start):
                # Per batch, not per record: the records of a batch are what its base offset names.
                at = h.base_offset
                if h.is_control:
                    commit, _epoch = batches.read_marker(data, h)
                    for loader in distinct:
                        loader.end_transaction(h.base_offset, h.producer_id, h.producer_epoch, commit)
                    latest.end_transaction(h.producer_id, commit)
                    continue
                # Defensive: a snapshot ends at a batch boundary, and a cleaning across it deletes it.
                partial = h.base_offset < start
                if h.is_transactional:
                    for offset, key, value in batches.iter_key_values(data, h):
                        if key is None or (partial and offset < start):
                            continue
                        count += 1
                        feed_transactional(offset, h.producer_id, h.producer_epoch, key, value)
                    continue
                if progress is not None and (count // LOAD_PROGRESS_EVERY) != (
                    (count + h.records_count) // LOAD_PROGRESS_EVERY
                ):
                    progress(count + h.records_count)
                for offset, key, value in batches.iter_key_values(data, h):
                    if key is None or (partial and offset < start):
                        continue
                    count += 1
                    feed = feeders.get(key[:2])
                    if feed is None:
                        raise _unknown_record_type(key, offset)
                    feed(offset, key, value)
                    if pending_keys:  # an open transaction: the general path
                        latest.plain(offset, key, value)
                    elif value is None:
                        lt.pop(key, None)
                    else:
                        lt[key] = (offset, value)
            where, at = "one of its records", -1  # a loader that decodes what it held at the end
            for loader in distinct:
                loader.finish()
        except _UNDECODABLE as e:
            place = where if at < 0 else f"{where} at offset {at}"
            raise RecordFormatError(
                f"cannot load {self.log.directory.name}: {place} does not decode ({type(e).__name__}: {e})"
            ) from e
        state.loaded(now)
        self.snapshot_records = from_snapshot
        self.replayed = count
        return from_snapshot + count

    # --- snapshots ----------------------------------------------------------------------------
    def capture(self) -> Capture:
        """What a snapshot of the log up to its end holds, copied cheaply on the event loop (the
        dict copy shares the immutable bytes; entries are built by ``write_snapshot``)."""
        return (
            self._snapshot_generation,
            self.log.log_end_offset,
            dict(self.latest.latest),
            self.latest.pending_entries(),
        )

    def write_snapshot(self, capture: Capture) -> Path | None:
        """Write the captured snapshot (any thread); None if a cleaning invalidated it meanwhile."""
        generation, end_offset, latest, pending = capture
        data = encode_latest(self.log.directory.name, end_offset, latest, pending)
        with self._snapshot_lock:
            # A cleaning invalidated it, or a newer one (the one written at close) got there first.
            if generation != self._snapshot_generation or end_offset <= self.snapshot_offset:
                return None
            path = store_snapshot(self.log.directory, end_offset, data)
            self.snapshot_offset = end_offset
            return path

    def _cleaning(self, end_offset: int) -> None:
        """The cleaner is about to rewrite the log below ``end_offset``: a snapshot covering less
        than that could disagree with what the tail keeps (a tombstone it drops would bring back
        the key the snapshot holds), so it goes first."""
        with self._snapshot_lock:
            if self.snapshot_offset < end_offset:
                self._snapshot_generation += 1
                delete_snapshots(self.log.directory, below=end_offset)
                self.snapshot_offset = -1
