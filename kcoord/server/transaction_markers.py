"""Writing the markers of ending transactions: Kafka's TransactionMarkerChannelManager, in-process.

The transaction coordinator hands over a ``MarkerJob`` once its PrepareCommit or PrepareAbort
record is durable. A COMMIT or ABORT marker goes into every partition of the transaction: data
partitions through the data plane, ``__consumer_offsets`` partitions through the group
coordinator's runtime (where the marker makes the transaction's offsets committed, or drops them,
through the same replay as at start-up). Once every marker is durable, the transaction coordinator
writes CompleteCommit or CompleteAbort. A partition deleted meanwhile needs no marker (Kafka
drops such markers too).

A marker whose partition cannot be written (a full disk: the append fails and counts for nothing)
is written again after a backoff, as Kafka's channel retries a partition whose log directory
failed: ``retry.backoff.ms`` doubling up to ``retry.backoff.max.ms``, Kafka's client defaults. The
transaction stays prepared, and the last stable offset of its partitions with it, until every
marker is written. A marker that was written but whose sync failed halts the broker instead
(storage/log_dir_failure.py), and the restart writes every marker of the transaction again.
"""

from __future__ import annotations

import asyncio
from typing import Any, Final

import structlog

from kcoord.clock import Clock
from kcoord.dataplane.partition import Partition
from kcoord.dataplane.partitions import PartitionManager
from kcoord.groups import OFFSETS_TOPIC
from kcoord.groups.store import GroupStore
from kcoord.protocol.errors import ErrorCode, KafkaError
from kcoord.runtime.outcome import Outcome, TransactionMarker
from kcoord.runtime.runtime import CoordinatorRuntime
from kcoord.storage.flush import Flusher
from kcoord.transaction.coordinator import MarkerJob, TransactionStore

log = structlog.get_logger(__name__)

COORDINATOR_EPOCH = 0  # one node leads __transaction_state forever: its epoch never moves
RETRY_BACKOFF_MS: Final = 100  # Kafka's retry.backoff.ms
RETRY_BACKOFF_MAX_MS: Final = 1000  # Kafka's retry.backoff.max.ms


class TransactionMarkers:
    def __init__(
        self,
        partitions: PartitionManager,
        groups: CoordinatorRuntime[GroupStore],
        flusher: Flusher,
        clock: Clock,
    ) -> None:
        self.partitions = partitions
        self.groups = groups
        self.flusher = flusher
        self.clock = clock
        self.transactions: CoordinatorRuntime[TransactionStore] | None = None  # set once both exist
        self._retries: set[asyncio.TimerHandle] = set()  # markers waiting to be written again

    def send(self, job: MarkerJob) -> None:
        remaining = len(job.partitions) + 1  # one more for the loop below, so that none completes early
        failed = False

        def done(error: Any = None) -> None:
            nonlocal remaining, failed
            if isinstance(error, BaseException):
                if not failed:
                    failed = True
                    log.error(
                        "writing a transaction marker failed",
                        transactional_id=job.transactional_id,
                        error=repr(error),
                    )
                return
            remaining -= 1
            if remaining == 0 and not failed:
                self._complete(job)

        marker = TransactionMarker(job.producer_id, job.producer_epoch, job.commit, COORDINATOR_EPOCH)
        for topic, index in job.partitions:
            if topic == OFFSETS_TOPIC:
                self.groups.tell_partition(index, _marker_op(marker, done))
                continue
            part = self.partitions.partition(topic, index)
            if part is None:
                done()
                continue
            self._write_marker(job, part, done, 0)
        done()

    def stop(self) -> None:
        """Cancel the retries waiting: their transactions stay prepared, and the next start
        writes their markers again."""
        for handle in self._retries:
            handle.cancel()
        self._retries.clear()

    def _write_marker(self, job: MarkerJob, part: Partition, done: Any, failures: int) -> None:
        """Write the job's marker into one data partition; ``done`` once it is durable (or needs
        none), or again after a backoff when the partition's files cannot be written."""
        topic, index = part.topic.name, part.index
        if part.log.closed:  # the topic was deleted while the marker waited: it needs none now
            done()
            return
        try:
            part.write_txn_marker(
                job.producer_id, job.producer_epoch, COORDINATOR_EPOCH, job.commit, self.clock.now_ms()
            )
        except KafkaError as e:
            # The partition knows a newer epoch of this producer (Kafka's marker handler drops
            # such a marker too): nothing of this transaction is pending there.
            log.warning(
                "transaction marker refused by the partition",
                transactional_id=job.transactional_id,
                partition=f"{topic}-{index}",
                error=ErrorCode(e.code).name,
            )
            done()
            return
        except OSError as e:
            if failures == 0:
                log.warning(
                    "writing a transaction marker failed: retrying until the partition takes it",
                    transactional_id=job.transactional_id,
                    partition=f"{topic}-{index}",
                    error=str(e),
                )
            delay_ms = min(RETRY_BACKOFF_MS << min(failures, 16), RETRY_BACKOFF_MAX_MS)
            handle: asyncio.TimerHandle | None = None

            def retry() -> None:
                if handle is not None:
                    self._retries.discard(handle)
                self._write_marker(job, part, done, failures + 1)

            handle = asyncio.get_running_loop().call_later(delay_ms / 1000, retry)
            self._retries.add(handle)
            return
        if failures:
            log.info(
                "transaction marker written after failed writes",
                transactional_id=job.transactional_id,
                partition=f"{topic}-{index}",
                failed_writes=failures,
            )
        if self.flusher.waits_for_disk:
            self.flusher.when_durable(part.log, done)
        else:
            self.flusher.mark_dirty(part.log)
            done()

    def _complete(self, job: MarkerJob) -> None:
        transactions = self.transactions
        if transactions is None:
            return
        tid = job.transactional_id
        transactions.tell(
            tid, lambda store, now: store.complete(tid, job.producer_id, job.producer_epoch, job.commit, now)
        )


def _marker_op(marker: TransactionMarker, done: Any) -> Any:
    def op(_store: GroupStore, _now: int) -> Outcome:
        out = Outcome(marker=marker)
        out.respond(done, None)
        return out

    return op
