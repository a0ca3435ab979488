"""Share sessions (KIP-932), as Kafka's ShareSessionCache / SharePartitionManager.newContext.

A session is keyed by (group id, member id) and belongs to the connection that opened it.
ShareSessionEpoch 0 opens a session (a full request: it names the partitions; it may carry no
acknowledgements), replacing any older one of that member; -1 closes it (a final request:
acknowledgements only, then every record the member holds is released); n > 0 continues it
(partitions added, forgotten ones removed; an empty list means "the same partitions").
Fetches and acknowledgements share one epoch counter. Errors: SHARE_SESSION_NOT_FOUND,
INVALID_SHARE_SESSION_EPOCH, and SHARE_SESSION_LIMIT_REACHED once
``group.share.max.share.sessions`` are open.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from kcoord.protocol.errors import ErrorCode, KafkaError

INITIAL_EPOCH = 0
FINAL_EPOCH = -1
_INT32_MAX = 0x7FFFFFFF

SessionKey = tuple[str, str]  # (group id, member id)
PartitionKey = tuple[uuid.UUID, int]


@dataclass
class ShareSession:
    key: SessionKey
    conn: Any
    epoch: int = 1  # what the next request must carry
    partitions: dict[PartitionKey, None] = field(default_factory=dict)  # ordered set

    def bump(self) -> None:
        self.epoch = 1 if self.epoch == _INT32_MAX else self.epoch + 1


class ShareSessionCache:
    def __init__(self, max_sessions: int) -> None:
        self.max_sessions = max_sessions
        self.sessions: dict[SessionKey, ShareSession] = {}

    def for_fetch(
        self,
        key: SessionKey,
        epoch: int,
        conn: Any,
        added: list[PartitionKey],
        forgotten: list[PartitionKey],
        has_acks: bool,
    ) -> ShareSession:
        """The session a ShareFetch runs in (epoch -1: the session being closed)."""
        if epoch == INITIAL_EPOCH:
            if has_acks:
                raise KafkaError(
                    ErrorCode.INVALID_REQUEST, "a new share session cannot carry acknowledgements"
                )
            self.sessions.pop(key, None)
            if len(self.sessions) >= self.max_sessions:
                raise KafkaError(
                    ErrorCode.SHARE_SESSION_LIMIT_REACHED,
                    f"{self.max_sessions} share sessions are open (group.share.max.share.sessions)",
                )
            session = ShareSession(key, conn, partitions=dict.fromkeys(added))
            self.sessions[key] = session
            return session
        session = self._existing(key, epoch)
        if epoch == FINAL_EPOCH:
            return session
        for p in added:
            session.partitions.setdefault(p, None)
        for p in forgotten:
            session.partitions.pop(p, None)
        session.conn = conn
        session.bump()
        return session

    def for_acknowledge(self, key: SessionKey, epoch: int, conn: Any) -> ShareSession:
        if epoch == INITIAL_EPOCH:
            raise KafkaError(
                ErrorCode.INVALID_SHARE_SESSION_EPOCH,
                "ShareAcknowledge cannot open a share session (epoch 0)",
            )
        session = self._existing(key, epoch)
        if epoch != FINAL_EPOCH:
            session.conn = conn
            session.bump()
        return session

    def _existing(self, key: SessionKey, epoch: int) -> ShareSession:
        session = self.sessions.get(key)
        if session is None:
            raise KafkaError(ErrorCode.SHARE_SESSION_NOT_FOUND, f"no share session for member {key[1]}")
        if epoch != FINAL_EPOCH and epoch != session.epoch:
            raise KafkaError(
                ErrorCode.INVALID_SHARE_SESSION_EPOCH,
                f"share session epoch {epoch}, expected {session.epoch}",
            )
        return session

    def close(self, key: SessionKey) -> None:
        self.sessions.pop(key, None)

    def closed_connection(self, conn: Any) -> list[SessionKey]:
        """Drop the sessions a connection opened; their members' records must be released."""
        keys = [k for k, s in self.sessions.items() if s.conn is conn]
        for k in keys:
            del self.sessions[k]
        return keys
