"""One partition of the data plane (Kafka's Partition with its UnifiedLog and
ProducerStateManager), and the topic that holds partitions; dataplane/partitions.py's manager
creates, opens and deletes them.

Transactions' data plane: producer state follows every append; the last stable offset is the
first unstable offset (clamped to the log start offset) when it is below the high watermark,
else the high watermark; ABORT markers index their transaction in the segment's ``.txnindex``.
Producer state is snapshotted to ``<20-digit offset>.snapshot`` in the partition directory when a
segment rolls and at clean shutdown: JSON ``{"version": 1, "offset": N, "producers": [[producer
id, epoch, coordinator epoch, last timestamp, ongoing transaction's first offset or null, [[first
seq, last seq, first offset, last offset, timestamp], ...]], ...]}`` (kcoord's own format, not
Kafka's binary one), the state after every batch below N. On start the newest usable snapshot is
loaded and the log after it replayed (rebuilding the transaction indexes of what is replayed), so
producer state and ongoing transactions survive retention deleting the segments they were
written in.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final

import structlog

from kcoord.config import BrokerConfig
from kcoord.dataplane.append_rules import AppendRules
from kcoord.dataplane.producer_state import CompletedTxn, ProducerEntry, ProducerStateTable
from kcoord.protocol import records
from kcoord.protocol.records import BatchHeader
from kcoord.storage.atomic import atomic_write
from kcoord.storage.log import Log
from kcoord.storage.txn_index import AbortedTxn

log = structlog.get_logger(__name__)

LEADER_EPOCH: Final = 0
SNAPSHOT_SUFFIX: Final = ".snapshot"
SNAPSHOT_VERSION: Final = 1


class Partition:
    def __init__(self, topic: Topic, index: int, log_: Log) -> None:
        self.topic = topic
        self.index = index
        self.log = log_
        self.producers = ProducerStateTable()
        self._waiters: set[Callable[[], None]] = set()
        self._snapshots = False  # data partitions only: coordinator logs have no producer state
        log_.hw_listeners.append(self._on_high_watermark)

    @property
    def leader_epoch(self) -> int:
        return LEADER_EPOCH

    @property
    def high_watermark(self) -> int:
        return self.log.high_watermark

    @property
    def first_unstable_offset(self) -> int | None:
        """The first offset of the oldest transaction not yet decided, or decided by a marker
        the high watermark has not passed; never below the log start offset."""
        first = self.producers.first_unstable_offset()
        return None if first is None else max(first, self.log.log_start_offset)

    @property
    def last_stable_offset(self) -> int:
        hw = self.log.high_watermark
        first = self.first_unstable_offset
        return first if first is not None and first < hw else hw

    @property
    def log_start_offset(self) -> int:
        return self.log.log_start_offset

    # --- appending ---------------------------------------------------------------------------
    def append_from_client(
        self, data: bytearray | memoryview, headers: list[BatchHeader], now_ms: int, log_append_time: bool
    ) -> tuple[int, int, bool]:
        """Append validated producer batches (no control batches): (first offset, log append
        time, appended). A duplicate of a recent batch is not appended; its offsets answer."""
        duplicate = self.producers.validate(headers)
        if duplicate is not None:
            return duplicate.first_offset, -1, False
        info = self.log.append(data, headers, now_ms, log_append_time=log_append_time)
        for h in headers:
            self.producers.update(h, h.max_timestamp)
        return info.first_offset, info.log_append_time, True

    def write_txn_marker(
        self, producer_id: int, producer_epoch: int, coordinator_epoch: int, commit: bool, now_ms: int
    ) -> int:
        """Append a COMMIT or ABORT marker for the producer's transaction (the partition leader's
        part of WriteTxnMarkers); returns its offset. INVALID_PRODUCER_EPOCH for an epoch older
        than the producer's, TRANSACTION_COORDINATOR_FENCED for an older coordinator epoch;
        nothing is appended then. Durability is the caller's (the flusher)."""
        self.producers.validate_marker(producer_id, producer_epoch, coordinator_epoch)
        data = records.build_end_txn_marker(producer_id, producer_epoch, coordinator_epoch, commit, now_ms)
        h = records.read_header(data)
        offset = self.log.append(data, [h], now_ms).first_offset
        self._apply_marker(h, commit, coordinator_epoch, self.log.append_aborted_txn)
        self.producers.on_high_watermark(self.log.high_watermark)
        self._wake()  # the LSO may have moved without the high watermark
        return offset

    def _apply_marker(
        self, h: BatchHeader, commit: bool, coordinator_epoch: int, index: Callable[[AbortedTxn], None]
    ) -> CompletedTxn | None:
        completed = self.producers.update_marker(h, commit, coordinator_epoch, h.max_timestamp)
        if completed is not None:
            if completed.aborted:
                lso = self.producers.last_stable_offset_after(completed)
                index(AbortedTxn(completed.producer_id, completed.first_offset, completed.last_offset, lso))
            self.producers.complete(completed)
        return completed

    # --- reading -----------------------------------------------------------------------------
    def aborted_transactions(self, fetch_offset: int, upper_bound: int) -> list[AbortedTxn]:
        """Aborted transactions overlapping [fetch_offset, upper_bound): what a read_committed
        fetch returning that range answers with (Kafka's collectAbortedTransactions)."""
        return self.log.collect_aborted_txns(fetch_offset, upper_bound)

    def ongoing_transactions(self) -> dict[int, int]:
        """Producer id -> first offset of each transaction not yet ended by a marker."""
        return {pid: first for first, pid in self.producers.ongoing.items()}

    def active_producers(self) -> list[ProducerEntry]:
        """What DescribeProducers lists (Kafka's UnifiedLog.activeProducers)."""
        return list(self.producers.producers.values())

    # --- producer state on disk --------------------------------------------------------------
    def load_producer_state(self, unclean: bool) -> None:
        """Rebuild producer state, ongoing transactions and the transaction indexes of what is
        replayed: from the newest snapshot the log still covers, replaying the log after it.

        After an unclean shutdown the segments Log.open recovered (the last one or two) may have
        lost batches or index entries: the snapshot must not be newer than their start, so that
        their transaction indexes are rebuilt from their batches.
        """
        lg = self.log
        self._snapshots = True
        lg.roll_listeners.append(self._on_roll)
        segs = lg.segments
        limit = lg.log_end_offset
        if unclean:
            limit = segs[-2].base_offset if len(segs) >= 2 else segs[-1].base_offset
        start = segs[0].base_offset
        chosen: int | None = None
        for offset in self._snapshot_offsets():
            if offset > lg.log_end_offset or offset < start:
                (lg.directory / _snapshot_name(offset)).unlink(missing_ok=True)  # stale or orphaned
            elif offset <= limit:
                chosen = offset
        table = ProducerStateTable()
        replay_from = start
        if chosen is not None:
            try:
                data = json.loads((lg.directory / _snapshot_name(chosen)).read_bytes())
                if data.get("version") != SNAPSHOT_VERSION or data.get("offset") != chosen:
                    raise ValueError(f"snapshot version {data.get('version')}")
                table = ProducerStateTable.restore(data)
                replay_from = chosen
            except (ValueError, KeyError, TypeError) as e:
                log.warning("ignoring unreadable producer snapshot", offset=chosen, error=str(e))
        self._replay(table, replay_from)

    def rebuild_producer_state(self) -> None:
        """Rebuild from the whole log, ignoring snapshots."""
        self._replay(ProducerStateTable(), self.log.segments[0].base_offset)

    def _replay(self, table: ProducerStateTable, offset: int) -> None:
        """Continue ``table`` (the state below ``offset``) with the log from ``offset``; the
        transaction indexes are rewritten from there."""
        lg = self.log
        self.producers = table
        for seg in lg.segments:
            seg.txn_index.truncate_to(offset)
        for h, batch in lg.batches(offset):
            if not h.is_control:
                self.producers.update(h, h.max_timestamp)
                continue
            marker = records.read_end_txn_marker(bytes(batch), h) if h.has_producer_id else None
            if marker is not None:
                self._apply_marker(h, marker[0], marker[1], lg.segment_of(h.base_offset).txn_index.append)
        self.producers.on_high_watermark(lg.high_watermark)

    def take_snapshot(self) -> None:
        """Snapshot producer state at the log end (a roll, a clean shutdown)."""
        if not self._snapshots:
            return
        if not all(seg.txn_index.write_pending() for seg in self.log.segments):
            # An aborted transaction the disk has not taken into its index yet: a snapshot past
            # it would have a restart after a crash skip rebuilding that index from the log, and
            # read-committed fetches then return the aborted records.
            log.warning(
                "producer snapshot skipped: a transaction index lacks entries the disk refused",
                partition=self.log.directory.name,
            )
            return
        offset = self.log.log_end_offset
        data = {"version": SNAPSHOT_VERSION, "offset": offset, **self.producers.snapshot()}
        try:
            atomic_write(self.log.directory / _snapshot_name(offset), json.dumps(data).encode())
        except OSError as e:  # a full disk: an older snapshot, or none, means a longer replay
            log.warning(
                "could not write a producer snapshot: the next start replays more of the log",
                partition=self.log.directory.name,
                error=str(e),
            )

    def drop_producer_snapshots(self) -> None:
        """Remove every producer snapshot, so that the next start replays the whole log and
        rebuilds producer state and every transaction index from it."""
        for offset in self._snapshot_offsets():
            (self.log.directory / _snapshot_name(offset)).unlink(missing_ok=True)

    def delete_snapshots_below(self, offset: int) -> None:
        """Snapshots of deleted segments (retention, DeleteRecords) are of no more use."""
        for o in self._snapshot_offsets():
            if o < offset:
                (self.log.directory / _snapshot_name(o)).unlink(missing_ok=True)

    def _snapshot_offsets(self) -> list[int]:
        return sorted(
            int(p.name.removesuffix(SNAPSHOT_SUFFIX))
            for p in self.log.directory.glob("*" + SNAPSHOT_SUFFIX)
            if p.name.removesuffix(SNAPSHOT_SUFFIX).isdigit()
        )

    def _on_roll(self, _base_offset: int) -> None:
        self.take_snapshot()

    # --- long polling --------------------------------------------------------------------
    def add_waiter(self, waiter: Callable[[], None]) -> None:
        """Call ``waiter`` once, the next time the high watermark or the last stable offset
        moves (or the topic goes)."""
        self._waiters.add(waiter)

    def remove_waiter(self, waiter: Callable[[], None]) -> None:
        self._waiters.discard(waiter)

    def _on_high_watermark(self, offset: int) -> None:
        self.producers.on_high_watermark(offset)
        self._wake()

    def _wake(self) -> None:
        if self._waiters:
            waiters, self._waiters = self._waiters, set()
            for waiter in waiters:
                waiter()


def _snapshot_name(offset: int) -> str:
    return f"{offset:020d}{SNAPSHOT_SUFFIX}"


@dataclass
class Topic:
    name: str
    topic_id: uuid.UUID
    configs: dict[str, str]
    internal: bool = False
    partitions: list[Partition] = field(default_factory=list)
    _append_rules: AppendRules | None = field(default=None, repr=False, compare=False)

    def append_rules(self, broker: BrokerConfig) -> AppendRules:
        """The settings Produce checks, read again only when the topic's configs were replaced."""
        rules = self._append_rules
        if rules is None or rules.configs is not self.configs:
            rules = self._append_rules = AppendRules(self.configs, broker)
        return rules
