"""What a handler knows about the request besides its body."""

from __future__ import annotations

from typing import Any

from kcoord.protocol.frames import RequestHeader
from kcoord.security.principal import ANONYMOUS, KafkaPrincipal


class RequestContext:
    __slots__ = ("api_version", "conn", "flexible", "frame_buffer", "header")

    def __init__(
        self, header: RequestHeader, api_version: int, conn: Any, frame_buffer: memoryview | None = None
    ) -> None:
        self.header = header
        self.api_version = api_version
        self.conn = conn
        self.flexible = False
        # The frame's bytes in a writable buffer of its own, when a large request was read into
        # one: Produce stamps and writes its batches there (the decoded request reads a copy).
        self.frame_buffer = frame_buffer

    @property
    def client_id(self) -> str | None:
        return self.header.client_id

    @property
    def client_host(self) -> str:
        return self.conn.peer_host if self.conn is not None else "unknown"

    @property
    def listener(self) -> str:
        """Name of the listener the client connected to (for advertised addresses)."""
        return self.conn.listener if self.conn is not None else "PLAINTEXT"

    @property
    def principal(self) -> KafkaPrincipal:
        """Who sent the request: the connection's authenticated principal (User:ANONYMOUS when
        the listener authenticates no one, as in Kafka)."""
        return self.conn.principal if self.conn is not None else ANONYMOUS
