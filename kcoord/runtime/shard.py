"""One coordinator partition, sans-io: its log, its state, and the path records take into both.

``run(op, now)`` runs an operation against the state and applies the records it returns through
the state's ``replay``; ``append(records, now)`` writes records to the log as one batch; ``load``
replays the log into a fresh state at start-up, through the same ``replay``. Nothing here waits:
the asyncio driver (runtime.py) decides when to append and when answers may go out, and tests
call the same three methods directly.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping
from typing import Any, Generic, Protocol, TypeVar

from kcoord.protocol import records as batches
from kcoord.runtime.outcome import Operation, Outcome, Record
from kcoord.runtime.records import RecordFormatError, RecordRegistry, record_type
from kcoord.storage.log import Log

K = TypeVar("K", bound=Hashable, contravariant=True)


class Loader(Protocol):
    """Turns a log's records of some types into replayed state at start-up.

    ``feed`` gets every record in log order with its offset; a loader may decode and replay it at
    once, keep it back (a later record of the same key replaces it) or skip it, as long as the
    state after ``finish`` is what replaying every record in order gives.
    """

    def feed(self, offset: int, key: bytes, value: bytes | None) -> None: ...

    def finish(self) -> None: ...


class CoordinatorState(Protocol[K]):
    """The in-memory state of one shard, as a coordinator kind keeps it."""

    def replay(self, key: Any, value: Any, now: int) -> None:
        """Apply one record: live writes and start-up replay both come through here."""
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

    __slots__ = ("_decode", "_now", "_replay")

    def __init__(self, registry: RecordRegistry, replay: Callable[[Any, Any, int], None], now: int) -> None:
        self._decode = registry.decode
        self._replay = replay
        self._now = now

    def feed(self, offset: int, key: bytes, value: bytes | None) -> None:
        k, v = self._decode(key, value)
        self._replay(k, v, self._now)

    def finish(self) -> None:
        pass


LOAD_PROGRESS_EVERY = 200_000  # records between two progress reports of a start-up replay


class CoordinatorShard(Generic[S]):
    __slots__ = ("index", "log", "registry", "state")

    def __init__(self, index: int, log: Log, state: S, registry: RecordRegistry) -> None:
        self.index = index
        self.log = log
        self.state = state
        self.registry = registry

    def run(self, op: Operation[S], now: int) -> Outcome:
        """Run ``op`` and apply its records; what it returns still has to be appended and answered."""
        outcome = op(self.state, now)
        replay = self.state.replay
        for key, value in outcome.records:
            replay(key, value, now)
        while outcome.then is not None:
            step, outcome.then = outcome.then, None
            more = step(self.state, now)
            for key, value in more.records:
                replay(key, value, now)
            outcome.extend(more)
        return outcome

    def append(self, records: list[Record], now: int) -> None:
        """Append ``records`` to the log as one batch (durable once the flusher says so)."""
        records = self.state.link(records, self.log.log_end_offset)
        data = batches.build_batch(self.registry.encode_all(records), now)
        self.log.append(data, [batches.read_header(data)], now)

    def load(self, now: int, progress: Callable[[int], None] | None = None) -> int:
        """Replay the whole log into the state; returns the number of records read."""
        state = self.state
        registry = self.registry
        loaders = dict(state.loaders(registry, now))
        replaying = Replaying(registry, state.replay, now)
        for t in registry.key_types:
            loaders.setdefault(t, replaying)
        feeders = {t.to_bytes(2, "big", signed=True): loader.feed for t, loader in loaders.items()}
        count = 0
        for h, data in self.log.batches():
            if h.is_control:
                continue
            if progress is not None and (count // LOAD_PROGRESS_EVERY) != (
                (count + h.records_count) // LOAD_PROGRESS_EVERY
            ):
                progress(count + h.records_count)
            for offset, key, value in batches.iter_key_values(data, h):
                if key is None:
                    continue
                count += 1
                feed = feeders.get(key[:2])
                if feed is None:
                    raise RecordFormatError(f"unknown record type {record_type(key)} at offset {offset}")
                feed(offset, key, value)
        for loader in dict.fromkeys(loaders.values()):
            loader.finish()
        state.loaded(now)
        return count
