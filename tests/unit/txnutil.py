"""The transaction coordinator run through the production coordinator shard, synchronously.

``TxnHarness.run_op`` is what the runtime's actor does for one operation on ``__transaction_state``,
minus the event loop: ``CoordinatorShard.run`` (the operation, then its record through
``TransactionStore.replay``), ``CoordinatorShard.append`` to a real log, then the answers. The
marker writer is replaced by a list of the ``MarkerJob``s the store hands over: a test decides
when each job's markers are all durable (``complete``), as the writer in
``server/transaction_markers.py`` does. ``replay`` loads a fresh store from the log through
``CoordinatorShard.load``, as the broker does on start.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kcoord.clock import ManualClock
from kcoord.runtime.outcome import Operation, Outcome
from kcoord.runtime.records import RecordRegistry
from kcoord.runtime.shard import CoordinatorShard
from kcoord.storage.flush import Flusher
from kcoord.storage.log import Log, LogConfig
from kcoord.transaction.coordinator import (
    MarkerJob,
    ProducerIdAndEpoch,
    TransactionConfig,
    TransactionStore,
    abort_timed_out,
    expire_transactional_ids,
)
from kcoord.transaction.metadata import TopicPartition
from kcoord.transaction.records import TRANSACTION_RECORDS


class TxnHarness:
    def __init__(
        self,
        directory: Path,
        config: TransactionConfig | None = None,
        segment_bytes: int = 1 << 30,
        first_producer_id: int = 1000,
    ) -> None:
        self.clock = ManualClock()
        self.config = config or TransactionConfig()
        self.directory = directory
        self.flusher = Flusher("os")
        self.registry = RecordRegistry([TRANSACTION_RECORDS])
        self.jobs: list[MarkerJob] = []  # handed to the marker writer, not completed yet
        self.parked = False  # whether the last request waited for its transaction to complete
        self._last_producer_id = first_producer_id - 1
        log = Log.open(directory, LogConfig(segment_bytes=segment_bytes, retention_ms=-1), self.flusher)
        self.shard: CoordinatorShard[TransactionStore] = CoordinatorShard(
            0, log, self.new_store(), self.registry
        )

    def next_producer_id(self) -> int:
        # The broker's producer id blocks survive restarts: ids only grow, here as there.
        self._last_producer_id += 1
        return self._last_producer_id

    def new_store(self) -> TransactionStore:
        return TransactionStore(self.config, self.next_producer_id, self.jobs.append)

    @property
    def log(self) -> Log:
        return self.shard.log

    @property
    def store(self) -> TransactionStore:
        return self.shard.state

    # --- the actor's job ------------------------------------------------------------------------
    def run_op(self, op: Operation[TransactionStore]) -> Outcome:
        now = self.clock.now_ms()
        out = self.shard.run(op, now)
        if out.records:
            self.shard.append(out.records, now)
        for responder, value in out.responses:
            responder(value)
        return out

    def ask(self, tid: str, call: Callable[[TransactionStore, Callable[[Any], None], int], Outcome]) -> Any:
        """Run a request's operation and return its answer. A request that arrives while its
        id's markers are being written waits for the completion (``parked`` is then set): the
        marker writer completes the id's jobs, as it would, until the answer comes."""
        answers: list[Any] = []
        self.parked = False
        self.run_op(lambda store, now: call(store, answers.append, now))
        while not answers:
            jobs = [j for j in self.jobs if j.transactional_id == tid]
            assert jobs, "a request waits, but no markers of its transaction are being written"
            self.parked = True
            self.jobs.remove(jobs[0])
            self.complete(jobs[0])
        assert len(answers) == 1, answers
        return answers[0]

    # --- the APIs' operations ---------------------------------------------------------------------
    def init(
        self, tid: str, timeout_ms: int = 60_000, expected: tuple[int, int] | None = None
    ) -> ProducerIdAndEpoch:
        result: ProducerIdAndEpoch = self.ask(
            tid, lambda s, respond, now: s.init_producer_id(tid, timeout_ms, expected, respond, now)
        )
        return result

    def add(self, tid: str, pid: int, epoch: int, partitions: list[TopicPartition]) -> int:
        error: int = self.ask(
            tid, lambda s, respond, now: s.add_partitions(tid, pid, epoch, partitions, respond, now)
        )
        return error

    def end(self, tid: str, pid: int, epoch: int, commit: bool) -> int:
        error: int = self.ask(
            tid, lambda s, respond, now: s.end_transaction(tid, pid, epoch, commit, respond, now)
        )
        return error

    def complete(self, job: MarkerJob) -> Outcome:
        """Every marker of ``job`` is durable: what the marker writer then tells the store."""
        return self.run_op(
            lambda s, now: s.complete(
                job.transactional_id, job.producer_id, job.producer_epoch, job.commit, now
            )
        )

    def abort_timed_out(self) -> None:
        """The periodic scan, as the runtime runs it: one operation per ongoing transaction."""
        for _tid, op in list(abort_timed_out(self.store)):
            self.run_op(op)

    def expire_ids(self) -> None:
        for _tid, op in list(expire_transactional_ids(self.store)):
            self.run_op(op)

    def fire_timers(self) -> None:
        """Every due per-key timer, as the runtime's actors run them (markers again at start-up)."""
        now = self.clock.now_ms()
        for key in list(self.store.keys()):
            deadline = self.store.next_deadline(key)
            if deadline is not None and deadline <= now:
                self.run_op(lambda s, t, key=key: s.on_timer(key, t))

    # --- restart ------------------------------------------------------------------------------------
    def replay(self) -> TransactionStore:
        """A fresh store loaded from the log as it is (the live one stays)."""
        replayed: CoordinatorShard[TransactionStore] = CoordinatorShard(
            0,
            self.log,
            TransactionStore(self.config, self.next_producer_id, lambda _job: None),
            self.registry,
        )
        replayed.load(self.clock.now_ms())
        return replayed.state

    def restart(self) -> TransactionStore:
        """Continue on a store loaded from the reopened log, as after a broker restart: the marker
        jobs of the old process are gone, and what start-up finds mid-completion is sent again."""
        config = self.log.config
        self.log.close()
        log = Log.open(self.directory, config, self.flusher)
        self.jobs.clear()
        self.shard = CoordinatorShard(0, log, self.new_store(), self.registry)
        self.shard.load(self.clock.now_ms())
        self.fire_timers()
        return self.store

    def compact(self, delete_retention_ms: int) -> None:
        """Roll and run the real cleaner over every closed segment."""
        from kcoord.storage.cleaner import clean

        self.log.roll()
        asyncio.run(clean(self.log, self.clock.now_ms(), delete_retention_ms))

    def record_count(self) -> int:
        return sum(h.records_count for h, _ in self.log.batches())
