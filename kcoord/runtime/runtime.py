"""The runtime's asyncio side: one actor per key, batched appends, durable-then-respond, timers.

Keys (group ids, transactional ids) map to the partitions of a coordinator topic as in Kafka
(partitioning.py); each partition is a sans-io shard (shard.py). Every key has an actor: a mailbox
drained in arrival order, one operation at a time, by the event loop (docs/architecture.md,
principle 2), so state machines need no locks; a handler's operation on an idle key may run on the
handler's own stack (``run_or_tell``), never inside another operation. An operation's records are
applied at once (``shard.run``) and queued for the shard's next batch; its answers are released
once everything its key appended up to then is durable. All records written to a shard while the
flusher syncs the previous round (``log.flush.policy=always``), or in one event-loop pass
otherwise, go into one record batch, and all shards share the flusher's group commit. A write that
fails stops the runtime (fail-stop): memory is then ahead of the log.

Snapshots (snapshot.py): every ``snapshot_interval_records`` records appended to a shard (and
at least ``SNAPSHOT_RECORDS_PER_KEY`` per key it holds), its latest records are copied on the
loop and written to a snapshot file in a worker thread; at a clean close every shard writes one
on the spot, so the next start replays no log at all.

Timers: after each drain the actor asks the state for the key's next deadline and arms one
event-loop timer for it; when it fires, the state's ``on_timer`` runs as an operation.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Generic

import structlog

from kcoord.protocol.errors import ErrorCode, KafkaError
from kcoord.runtime.outcome import Operation, Outcome, Producer, Record, Responder, TransactionMarker
from kcoord.runtime.partitioning import PARTITION_CACHE_KEYS, partition_for
from kcoord.runtime.records import RecordRegistry
from kcoord.runtime.shard import CoordinatorShard, S, Write
from kcoord.storage.flush import Flusher
from kcoord.storage.log import Log, LogConfig
from kcoord.storage.log_cleaner import LogCleaner
from kcoord.storage.switch_interval import background_work_ended, background_work_started

log = structlog.get_logger(__name__)

# A periodic snapshot is taken only once the shard has appended this many records per key it
# holds, as well as ``snapshot_interval_records``. Writing one costs as much as its keys (10 k
# of them: ~5 ms of Python on the worker thread, sharing the GIL with the event loop; ~1 ms in
# the C codec, snapshot.py), so its
# share of the appends' cost stays small however many keys there are, and a restart after a
# crash replays at most this many times the snapshot's records from the log. At 8 x 16 commits
# of 10 partitions (10 k keys, 360 k records/s) a snapshot every 100 k records was 3.6 a second,
# and the loop's inline syncs ran past 3 ms ~5 times a second, waiting for the GIL.
SNAPSHOT_RECORDS_PER_KEY: Final = 50

Periodic = Callable[[Any], Iterable[tuple[str, Operation[Any]]]]  # shard state -> (key, op) to run


@dataclass(frozen=True, slots=True)
class PartitionKey:
    """The actor key of operations on a whole partition; no state holds it, so its actor goes
    once its writes are durable."""

    index: int


class Durable:
    """Records appended together; callbacks run once they are durable or their write failed.

    One per shard batch, shared by every actor that wrote into it: a plain callback list instead
    of a future per write, so releasing the answers of a flush round costs no event-loop passes.
    """

    __slots__ = ("callbacks", "done", "error", "order")

    def __init__(self, order: int = 0) -> None:
        self.callbacks: list[Callable[[BaseException | None], None]] = []
        self.done = False
        self.error: BaseException | None = None
        self.order = order  # its place among its shard's batches, which settle in this order

    def add(self, callback: Callable[[BaseException | None], None]) -> None:
        if self.done:
            callback(self.error)
        else:
            self.callbacks.append(callback)

    def settle(self, error: BaseException | None) -> None:
        if self.done:
            return
        self.done = True
        self.error = error
        callbacks, self.callbacks = self.callbacks, []
        for callback in callbacks:
            try:
                callback(error)
            except Exception:
                log.exception("releasing coordinator answers failed")


def synced(write: Durable | None) -> bool:
    """No write, or one that is durable: nothing for an answer to wait for."""
    return write is None or (write.done and write.error is None)


class _ShardWriter:
    """The records a shard's actors wrote since its last append, and when to append them."""

    __slots__ = ("_batch", "_batches", "_now", "_pending", "after_append", "flusher", "shard", "wide_write")

    def __init__(
        self,
        shard: CoordinatorShard[Any],
        flusher: Flusher,
        now: Callable[[], int],
        after_append: Callable[[CoordinatorShard[Any]], None] | None = None,
    ) -> None:
        self.shard = shard
        self.flusher = flusher
        self._now = now
        self._pending: list[Write] = []
        self._batch: Durable | None = None
        self._batches = 0
        self.after_append = after_append
        # The last write of an operation on the partition as a whole (a transaction marker): it
        # changes what any key of the shard reads (pending offsets become committed), so what a
        # key's operation answers waits for it as for the key's own last write.
        self.wide_write: Durable | None = None

    def write(
        self,
        records: list[Record],
        producer: Producer | None = None,
        marker: TransactionMarker | None = None,
    ) -> Durable:
        """Queue records for the shard's next batch; the Durable settles once they are durable.

        With log.flush.policy=always the batch is appended when the next flush round starts, so it
        holds everything written while the previous round synced; otherwise at the end of this
        event-loop pass.
        """
        pending = self._pending
        if (
            producer is None
            and marker is None
            and pending
            and pending[-1].producer is None
            and (pending[-1].marker is None)
        ):
            pending[-1].records.extend(records)
        else:
            pending.append(Write(list(records), producer, marker))
        batch = self._batch
        if batch is None:
            self._batches += 1
            batch = self._batch = Durable(self._batches)
            if self.flusher.waits_for_disk:
                self.flusher.before_next_round(self._append_pending)
            else:
                asyncio.get_running_loop().call_soon(self._append_pending)
        return batch

    def _append_pending(self) -> None:
        writes, self._pending = self._pending, []
        batch, self._batch = self._batch, None
        if batch is None:
            return
        try:
            self.shard.append_writes(writes, self._now())
            if self.after_append is not None:
                try:
                    self.after_append(self.shard)
                except Exception:  # a snapshot is an optimisation: never fail the write for it
                    log.exception("starting a coordinator snapshot failed")
            if self.flusher.waits_for_disk:
                self.flusher.when_durable(self.shard.log, batch.settle)
                return
            self.flusher.mark_dirty(self.shard.log)
        except Exception as e:
            batch.settle(e)
            return
        batch.settle(None)


class _Release:
    """Answers an operation's responders once its write is durable (NOT_COORDINATOR if it failed).
    An object, not a closure: compiled, a closure would hold ``Actor._commit``'s whole scope, the
    outcome's records with it, until the flush."""

    __slots__ = ("responses", "runtime")

    def __init__(self, responses: list[tuple[Responder, Any]], runtime: CoordinatorRuntime[Any]) -> None:
        self.responses = responses
        self.runtime = runtime

    def __call__(self, exc: BaseException | None) -> None:
        for responder, value in self.responses:
            responder(KafkaError(ErrorCode.NOT_COORDINATOR, str(exc)) if exc else value)
        if exc is not None:
            self.runtime.fail(exc)


class Actor:
    """The mailbox of one key; operations run one at a time, in arrival order."""

    __slots__ = (
        "_last_write",
        "_scheduled",
        "_timer",
        "_timer_at",
        "key",
        "mailbox",
        "partition_wide",
        "runtime",
        "shard",
        "writer",
    )

    def __init__(self, runtime: CoordinatorRuntime[Any], key: Any, index: int) -> None:
        self.runtime = runtime
        self.key = key
        # A PartitionKey's actor: the state has no timers for it and holds nothing under it.
        self.partition_wide = isinstance(key, PartitionKey)
        self.shard = runtime.shards[index]
        self.writer = runtime._writers[index]
        self.mailbox: deque[Operation[Any]] = deque()
        self._scheduled = False
        self._last_write: Durable | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at: int | None = None

    def tell(self, op: Operation[Any]) -> None:
        self.mailbox.append(op)
        if not self._scheduled:
            self._scheduled = True
            self.runtime.schedule(self)

    def _drain(self) -> None:
        self._scheduled = False
        runtime = self.runtime
        shard = self.shard
        clock = runtime.now
        while self.mailbox:
            op = self.mailbox.popleft()
            now = clock()
            try:
                outcome = shard.run(op, now)
            except Exception as e:
                log.exception("coordinator operation failed", key=self.key)
                outcome = Outcome()
                runtime.fail(e)
            self._commit(outcome)
        self._arm_timer()
        if (
            self._timer is None
            and (self._last_write is None or self._last_write.done)
            and (self.partition_wide or not shard.state.holds(self.key))
        ):
            runtime.actors.pop(self.key, None)

    def _commit(self, outcome: Outcome) -> None:
        writer = self.writer
        if outcome.records or outcome.marker is not None:
            self._last_write = writer.write(outcome.records, outcome.producer, outcome.marker)
            if self.partition_wide:
                writer.wide_write = self._last_write
        if not outcome.responses:
            return
        pending = self._last_write
        wide = writer.wide_write
        # A shard's batches settle in order: waiting for the later unsynced one covers both (a
        # failed write of the key's own is waited for: its answers get the failure).
        if (
            wide is not None
            and not synced(wide)
            and (pending is None or synced(pending) or (not pending.done and wide.order > pending.order))
        ):
            pending = wide
        if pending is None or synced(pending):
            for responder, value in outcome.responses:
                responder(value)
            return
        pending.add(_Release(outcome.responses, self.runtime))

    def _arm_timer(self) -> None:
        deadline = None if self.partition_wide else self.shard.state.next_deadline(self.key)
        if deadline == self._timer_at:
            return
        if deadline is not None and self._timer_at is not None and self._timer_at < deadline:
            # Deadlines that move later (members heartbeating in turn) keep the armed timer: it
            # fires early, finds nothing due, and arms the next one. Rearming on every operation
            # cost more than the operation.
            return
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._timer_at = deadline
        if deadline is not None:
            delay = max(0.0, (deadline - self.runtime.now()) / 1000)
            self._timer = asyncio.get_running_loop().call_later(delay, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        self._timer_at = None
        key = self.key
        self.tell(lambda state, now: state.on_timer(key, now))

    def cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None


class CoordinatorRuntime(Generic[S]):
    """The shards of one coordinator topic and the actors of their keys."""

    def __init__(
        self,
        topic: str,
        partitions: int,
        data_dir: Path,
        log_config: LogConfig,
        registry: RecordRegistry,
        new_state: Callable[[int], S],
        flusher: Flusher,
        now: Callable[[], int],
        cleaner: LogCleaner | None = None,
        snapshot_interval_records: int = 0,
    ) -> None:
        self.topic = topic
        self.num_partitions = partitions
        self.data_dir = data_dir
        self.log_config = log_config
        self.registry = registry
        self._new_state = new_state
        self.flusher = flusher
        self.now = now
        self.cleaner = cleaner
        self.shards: list[CoordinatorShard[S]] = []
        self._writers: list[_ShardWriter] = []
        self.load_seconds: list[float] = []  # per shard, how long its start-up replay took
        self.actors: dict[Any, Actor] = {}
        # Key -> partition for the keys in use: a compiled dict lookup costs a tenth of what
        # the lru_cache around partitioning.partition_for did (~1 k instructions a call).
        self._partition_of: dict[str, int] = {}
        self._ready: deque[Actor] = deque()  # actors with operations, in the order they got them
        self._run_scheduled = False
        # An actor is draining: an operation handed to run_or_tell meanwhile (by an operation, a
        # responder) queues instead of running on top of it, so none ever runs inside another.
        self._draining = False
        # Run after each pass over the ready actors, on the same pass (the server writes the
        # answers they completed at once instead of a loop pass later).
        self.after_run: list[Callable[[], None]] = []
        self._periodic: list[tuple[str, float, Periodic]] = []
        self._tasks: list[asyncio.Task[Any]] = []
        self.failed: BaseException | None = None
        self.on_failure: Callable[[BaseException], None] | None = None
        # Records between two snapshots of a shard (0: only at a clean close).
        self.snapshot_interval_records = snapshot_interval_records
        self._snapshotting: dict[int, asyncio.Future[Any]] = {}

    # --- lookup ------------------------------------------------------------------------------
    def partition_for(self, key: str) -> int:
        known = self._partition_of
        partition = known.get(key)
        if partition is None:
            if len(known) >= PARTITION_CACHE_KEYS:
                known.clear()
            partition = known[key] = partition_for(key, self.num_partitions)
        return partition

    def shard_for(self, key: str) -> CoordinatorShard[S]:
        return self.shards[self.partition_for(key)]

    def state_for(self, key: str) -> S:
        """The state of ``key``'s shard, to read outside an operation (never to change)."""
        return self.shards[self.partition_for(key)].state

    def states(self) -> list[S]:
        return [shard.state for shard in self.shards]

    @property
    def logs(self) -> list[Log]:
        return [shard.log for shard in self.shards]

    # --- operations ---------------------------------------------------------------------------
    def _actor(self, key: str) -> Actor:
        actor = self.actors.get(key)
        if actor is None:
            actor = self.actors[key] = Actor(self, key, self.partition_for(key))
        return actor

    def tell(self, key: str, op: Operation[S]) -> None:
        """Run ``op`` in ``key``'s actor, after every operation already queued for the key."""
        self._actor(key).tell(op)

    def run_or_tell(self, key: str, op: Operation[S]) -> None:
        """Run ``op`` at once when ``key``'s actor has nothing queued and no operation is running;
        else queue it, as ``tell``.

        For handlers, whose requests arrive outside any operation. Running on the caller's stack
        keeps ``op``'s place among its own key's operations; it overtakes other keys' operations
        queued for the run queue's next pass, partition-wide ones (a transaction's markers)
        included, which a request racing them could not tell apart from arriving first. It saves
        the run queue's pass of the event loop. When its answer waits for no
        write (a read, whose key has nothing unsynced), the handler's Reply settles before the
        handler returns: the dispatcher then answers at once, not through the connection's queue
        of owed responses. An answer still waits for the key's last write to be durable, and for
        the partition's last partition-wide write (the actor's ``_commit``); records are still
        appended with the shard's next batch.
        ``tell`` never runs ``op`` before returning: callers inside operations, or that set up
        what ``op`` answers through after telling it, rely on that.
        """
        actor = self._actor(key)
        if actor.mailbox or self._draining:  # (an actor in the run queue has a mailbox)
            actor.tell(op)
            return
        actor.mailbox.append(op)
        self._draining = True
        try:
            actor._drain()
        except Exception:  # as in _run_ready: the operation ran; its caller is not to blame
            log.exception("coordinator actor failed")
        finally:
            self._draining = False

    def idle(self, key: str) -> bool:
        """Nothing of ``key``'s is queued, running or waiting to be durable, nor a write on its
        whole partition (a transaction marker): its state may be read at once, outside an
        operation, and a read finds only what the log holds (Kafka's read operations read the
        last committed state). A handler that reads without an operation when this holds answers
        as ``run_or_tell`` would have, minus the actor's bookkeeping. Never after a failed write
        (memory may be ahead of the log)."""
        if self._draining or self.failed is not None:
            return False
        if not synced(self._writers[self.partition_for(key)].wide_write):
            return False  # a marker's effect on the key's state is not durable yet
        actor = self.actors.get(key)
        if actor is None:  # an actor outlives its key's last write until that write is durable
            return True
        if actor.mailbox:
            return False
        return synced(actor._last_write)

    def tell_partition(self, index: int, op: Operation[S]) -> None:
        """Run ``op`` on partition ``index`` as a whole (a transaction marker ends a producer's
        transaction in the partition, whichever keys it wrote under), in an actor of its own."""
        key = PartitionKey(index)
        actor = self.actors.get(key)
        if actor is None:
            actor = self.actors[key] = Actor(self, key, index)
        actor.tell(op)

    def schedule(self, actor: Actor) -> None:
        """Drain ``actor`` in the next pass of the event loop (one callback for all actors)."""
        self._ready.append(actor)
        if not self._run_scheduled:
            self._run_scheduled = True
            asyncio.get_running_loop().call_soon(self._run_ready)

    def _run_ready(self) -> None:
        self._run_scheduled = False
        ready = self._ready
        self._draining = True
        try:
            # Actors scheduled while these run wait for the next pass, as with a call_soon each.
            for _ in range(len(ready)):
                try:
                    ready.popleft()._drain()
                except Exception:  # one actor's bug must not stall the actors queued behind it
                    log.exception("coordinator actor failed")
        finally:
            self._draining = False
        for hook in self.after_run:
            try:
                hook()
            except Exception:
                log.exception("after-run hook failed")

    def every(self, name: str, interval_ms: int, ops: Periodic) -> None:
        """From ``start`` on, every ``interval_ms`` tell each shard's ``ops(state)``."""
        self._periodic.append((name, interval_ms / 1000, ops))

    def run_periodic(self, ops: Periodic) -> None:
        for shard in self.shards:
            for key, op in list(ops(shard.state)):
                self.tell(key, op)

    def fail(self, exc: BaseException) -> None:
        """A coordinator write failed: memory is ahead of the log, so stop serving (fail-stop)."""
        if self.failed is None:
            self.failed = exc
            log.critical("coordinator write failed; shutting down", topic=self.topic, error=repr(exc))
            if self.on_failure is not None:
                self.on_failure(exc)

    # --- start and stop -----------------------------------------------------------------------
    def open(self, unclean: bool) -> None:
        """Open every partition's log and replay it (the partition count of an existing topic wins)."""
        self.num_partitions = self._existing_partition_count() or self.num_partitions
        self._partition_of.clear()
        started = time.monotonic()
        total = 0
        from_snapshot = 0
        now = self.now()
        for i in range(self.num_partitions):
            lg = Log.open(
                self.data_dir / f"{self.topic}-{i}",
                self.log_config,
                self.flusher,
                unclean=unclean,
                trust_clean_close=True,
            )
            shard = CoordinatorShard(i, lg, self._new_state(i), self.registry)
            loading = time.monotonic()
            before = total

            def progress(records: int, name: str = lg.directory.name, before: int = before) -> None:
                log.info("replaying coordinator log", partition=name, records=before + records)

            try:
                total += shard.load(now, progress)
            except BaseException:
                lg.close()  # the broker stops; an embedding program (tests) may go on
                raise
            from_snapshot += shard.snapshot_records
            self.load_seconds.append(time.monotonic() - loading)
            self.shards.append(shard)
            self._writers.append(
                _ShardWriter(
                    shard,
                    self.flusher,
                    self.now,
                    self._snapshot_if_due if self.snapshot_interval_records > 0 else None,
                )
            )
            if self.cleaner is not None:
                self.cleaner.register(lg)
        log.info(
            "loaded coordinator partitions",
            topic=self.topic,
            partitions=self.num_partitions,
            records=total,
            seconds=round(time.monotonic() - started, 3),
            snapshot_records=from_snapshot,
            log_records=total - from_snapshot,
        )

    def _existing_partition_count(self) -> int | None:
        """The partition count of the topic already on disk, if any.

        As in Kafka, the configured count applies when the topic is created: keys map to
        partitions by that count, so reading an existing topic with another count would look for
        every key in the wrong partition.
        """
        prefix = self.topic + "-"
        found = [
            int(suffix)
            for d in self.data_dir.glob(f"{self.topic}-*")
            if d.is_dir() and (suffix := d.name[len(prefix) :]).isdigit()
        ]
        if not found:
            return None
        count = max(found) + 1
        if count != self.num_partitions:
            log.info(
                "coordinator topic exists; keeping its partition count",
                topic=self.topic,
                partitions=count,
                configured=self.num_partitions,
            )
        return count

    def start(self) -> None:
        loop = asyncio.get_running_loop()
        for name, interval, ops in self._periodic:
            self._tasks.append(loop.create_task(self._every(interval, ops), name=name))
        if self.cleaner is not None:
            self._tasks.append(loop.create_task(self.cleaner.run(), name=f"{self.topic}-log-cleaner"))
        # What the logs loaded may have deadlines (members on fresh session timers): arm them.
        for shard in self.shards:
            state = shard.state
            for key in list(state.keys()):
                if state.next_deadline(key) is not None:
                    actor = self.actors.get(key)
                    if actor is None:
                        actor = self.actors[key] = Actor(self, key, shard.index)
                    actor._arm_timer()

    async def _every(self, interval: float, ops: Periodic) -> None:
        while True:
            await asyncio.sleep(interval)
            self.run_periodic(ops)

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        for actor in self.actors.values():
            actor.cancel_timer()
        for future in list(self._snapshotting.values()):
            with contextlib.suppress(Exception):
                await future

    # --- snapshots ----------------------------------------------------------------------------
    def _snapshot_if_due(self, shard: CoordinatorShard[Any]) -> None:
        since = shard.log.log_end_offset - max(shard.snapshot_offset, 0)
        if (
            since < self.snapshot_interval_records
            or since < SNAPSHOT_RECORDS_PER_KEY * len(shard.latest.latest)
            or shard.index in self._snapshotting
        ):
            return
        capture = shard.capture()
        # Encoding a snapshot is Python on the worker thread: the loop must get the GIL back
        # often meanwhile (at 280 k records/s a 10 k-key snapshot was written three times a
        # second, and 1-2 % of commits waited ~10 ms more).
        background_work_started()  # before the thread can take the GIL
        future = asyncio.get_running_loop().run_in_executor(None, shard.write_snapshot, capture)
        self._snapshotting[shard.index] = future

        def done(f: asyncio.Future[Any], index: int = shard.index) -> None:
            background_work_ended()
            self._snapshotting.pop(index, None)
            if f.cancelled():
                return
            exc = f.exception()
            if exc is not None:
                # The log is intact; the next start replays more of it.
                log.warning("writing a coordinator snapshot failed", topic=self.topic, error=repr(exc))
            elif f.result() is not None:
                log.debug("wrote coordinator snapshot", path=str(f.result()), offset=capture[1])

        future.add_done_callback(done)

    def write_snapshots(self) -> None:
        """Snapshot every shard whose log moved since its last snapshot (at a clean close)."""
        for shard in self.shards:
            if shard.log.closed or shard.log.log_end_offset == shard.snapshot_offset:
                continue
            try:
                started = time.monotonic()
                path = shard.write_snapshot(shard.capture())
                log.info(
                    "wrote coordinator snapshot",
                    snapshot=str(path),
                    records=len(shard.latest),
                    seconds=round(time.monotonic() - started, 3),
                )
            except OSError as e:
                log.warning("writing a coordinator snapshot failed", topic=self.topic, error=repr(e))

    def close(self) -> None:
        # Memory may be ahead of the log after a failed write; the snapshot describes the log
        # anyway (it is built from appended bytes), but a failing disk is no place for one more file.
        if self.failed is None:
            self.write_snapshots()
        for shard in self.shards:
            try:
                shard.log.close()
            except OSError as e:
                # A failing disk (trimming a preallocated segment to its data, say): the files
                # are closed all the same. The next start is a clean one, and finds the end of a
                # segment whose file runs past its last batch by reading it (and trims it then).
                # The other shards must close too, and the broker's stop go on to close the data
                # plane.
                log.warning(
                    "could not close a coordinator log whole", log=shard.log.directory.name, error=str(e)
                )
