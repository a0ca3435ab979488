"""Incremental fetch sessions (KIP-227), following Kafka's FetchSession rules.

- epoch 0 (INITIAL) or -1 (FINAL) is a full fetch; a session id given with it is closed.
  INITIAL creates a session if a slot is free (its id in the response; 0 means "no session,
  keep sending full requests", which is how a broker refuses); FINAL never creates one.
- epoch n > 0 continues session id: unknown id -> FETCH_SESSION_ID_NOT_FOUND, wrong epoch ->
  INVALID_FETCH_SESSION_EPOCH, topic ids used inconsistently -> FETCH_SESSION_TOPIC_ID_ERROR.
  The request's partitions are added or updated, forgotten ones removed; a session left empty
  is dropped and the request handled sessionless.
- an incremental response carries only partitions with records, an error, or a changed high
  watermark or log start offset; partitions that answered move to the end of the session so
  that others get their turn under the response size limit.
- ``max.incremental.fetch.session.cache.slots`` bounds the sessions; when full, the least
  recently used one idle for over two minutes (Kafka's min.incremental.fetch.session.eviction.ms)
  makes room, else the new session is refused.
"""

from __future__ import annotations

import random
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from kcoord.clock import Clock

INITIAL_EPOCH = 0
FINAL_EPOCH = -1
EVICTION_MS = 120_000

PartitionKey = tuple[Any, int]  # (topic name or topic id, partition)


@dataclass(slots=True)
class CachedPartition:
    fetch_offset: int
    max_bytes: int
    current_leader_epoch: int
    high_watermark: int = -1
    log_start_offset: int = -1


class FetchSession:
    def __init__(self, session_id: int, uses_topic_ids: bool, now: int) -> None:
        self.id = session_id
        self.uses_topic_ids = uses_topic_ids
        self.epoch = 1  # the epoch the next request must carry
        self.partitions: OrderedDict[PartitionKey, CachedPartition] = OrderedDict()
        self.last_used = now

    def update(
        self, requested: list[tuple[PartitionKey, int, int, int]], forgotten: list[PartitionKey]
    ) -> None:
        for key, offset, max_bytes, leader_epoch in requested:
            cached = self.partitions.get(key)
            if cached is None:
                self.partitions[key] = CachedPartition(offset, max_bytes, leader_epoch)
            else:
                cached.fetch_offset, cached.max_bytes, cached.current_leader_epoch = (
                    offset,
                    max_bytes,
                    leader_epoch,
                )
        for key in forgotten:
            self.partitions.pop(key, None)

    @staticmethod
    def must_respond(cached: CachedPartition, error: int, hw: int, log_start: int, has_records: bool) -> bool:
        """Kafka's CachedPartition.maybeUpdateResponseData, updating the cached values."""
        respond = has_records
        if cached.high_watermark != hw:
            respond = True
            cached.high_watermark = hw
        if cached.log_start_offset != log_start:
            respond = True
            cached.log_start_offset = log_start
        if error:
            cached.high_watermark = -1  # re-send the partition once the error clears
            respond = True
        return respond

    def rotate(self, answered: list[PartitionKey]) -> None:
        for key in answered:
            self.partitions.move_to_end(key)


class FetchSessionCache:
    def __init__(self, max_slots: int, clock: Clock) -> None:
        self.max_slots = max_slots
        self.clock = clock
        self.sessions: OrderedDict[int, FetchSession] = OrderedDict()  # LRU order

    def get(self, session_id: int) -> FetchSession | None:
        return self.sessions.get(session_id)

    def remove(self, session_id: int) -> None:
        self.sessions.pop(session_id, None)

    def touch(self, session: FetchSession) -> None:
        session.last_used = self.clock.now_ms()
        self.sessions.move_to_end(session.id)

    def maybe_create(self, uses_topic_ids: bool) -> FetchSession | None:
        now = self.clock.now_ms()
        if self.max_slots <= 0:
            return None
        if len(self.sessions) >= self.max_slots:
            oldest_id, oldest = next(iter(self.sessions.items()))
            if now - oldest.last_used < EVICTION_MS:
                return None
            del self.sessions[oldest_id]
        while True:
            sid = random.randint(1, 0x7FFFFFFF)
            if sid not in self.sessions:
                break
        session = FetchSession(sid, uses_topic_ids, now)
        self.sessions[sid] = session
        return session

    def evict_expired(self) -> None:
        now = self.clock.now_ms()
        for sid in [s for s, sess in self.sessions.items() if now - sess.last_used >= EVICTION_MS]:
            del self.sessions[sid]
