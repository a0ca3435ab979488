"""Client connections: frames cut from the byte stream, dispatched at once, answered in order;
and the Processor holding a server's connections and the write pass they share.

Each connection is an asyncio Protocol. Frames are cut from the byte stream as they arrive
and dispatched at once, so many requests of one connection are in flight together; their
responses are written strictly in request order (clients match them by order as well as by
correlation id). Responses that are ready together go out in one write. A connection with too
much in flight, or whose peer does not read, stops being read until it catches up.

A frame larger than ``socket.request.max.bytes``, a negative size, or a request that cannot be
parsed closes that connection, with a warning naming the peer, once the requests before it were
answered; nothing else is affected.

Security (server/listeners.py): on an SSL listener a client certificate names the connection's
principal; on a SASL listener the connection is authenticated first, and until then frames are
limited to ``sasl.server.max.receive.size`` and only the requests of the SASL exchange are served
(anything else closes the connection, as Kafka's SaslServerAuthenticator does).
"""

from __future__ import annotations

import asyncio
import itertools
import struct
import time
from collections.abc import Callable
from typing import Any, Final

import structlog

from kcoord.protocol.errors import CloseConnection
from kcoord.protocol.frames import int32_at
from kcoord.protocol.messages import ApiKey
from kcoord.security.authenticator import AuthenticationFailure, SaslAuthenticator
from kcoord.security.principal import ANONYMOUS, USER_TYPE, KafkaPrincipal
from kcoord.server.connection_quotas import ConnectionQuotas
from kcoord.server.dispatcher import DeferredAnswer, Dispatcher, Frame
from kcoord.server.listeners import ListenerSecurity
from kcoord.server.socket_metrics import ListenerStats

log = structlog.get_logger(__name__)

_SIZE: Final = struct.Struct(">i")
MAX_IN_FLIGHT: Final = 512  # per connection, before reading pauses
# Bytes of answers a connection may hold before the broker stops taking its next requests: those
# written to a peer that does not read them, and those waiting behind an earlier answer. Without
# it one client pipelining Fetches and reading nothing grew the broker to 2.7 GB (600 requests).
MAX_HELD_ANSWER_BYTES: Final = 16 << 20
WRITE_CHUNK_BYTES: Final = 256 << 10  # answers made in one pass go out in writes of about this size
# Bytes of requests one connection may hand over before it lets the others have their turn in the
# loop's next pass. The event loop reads a ready socket until it is empty (libuv: up to 32 reads
# of 256 KiB), and a client that is answered while it is read sends its next requests at once: at
# 8 producers x 16 requests of 100 KiB, one connection was served for ~80 requests in a row while
# the others waited (p50 2.5 ms, p90 80 ms).
READ_TURN_BYTES: Final = 512 << 10
# A frame at least this large is gathered into a buffer of its own size as its bytes arrive,
# and handed to its handler as it is (Produce: the batch is stamped and written from it), instead
# of being joined to the read buffer and then cut out of it.
LARGE_FRAME_BYTES: Final = 64 << 10


def _frame_size(data: Frame | None) -> int:
    if data is None:
        return 0
    if type(data) is list:
        return sum(len(c) for c in data)
    return len(data)


_ids = itertools.count(1)


def _missing(buf: bytearray, max_frame: int) -> int:
    """The bytes still to come of the one frame whose start ``buf`` holds (0 when ``buf`` does
    not hold the start of exactly one frame of a valid size)."""
    if len(buf) < 4:
        return 0
    size = int.from_bytes(buf[:4], "big", signed=True)
    if size < 0 or size > max_frame:
        return 0
    return max(0, 4 + size - len(buf))


class _Pending:
    """A response slot: filled later, written when everything before it was written.

    Called with the answer (a DeferredAnswer's consumer): the slot itself, where its bound
    ``deliver`` method was one more object made per deferred answer."""

    __slots__ = ("conn", "data", "done")

    def __init__(self, conn: KafkaConnection) -> None:
        self.conn = conn
        self.data: Frame | None = None
        self.done = False

    def __call__(self, data: Frame | None, error: BaseException | None) -> None:
        self.conn.server.answers_owed -= 1
        self.conn._deliver(self, data, error)


class _Slots:
    """A connection's response slots in request order: a list and the index of its head.

    Not a deque: compiled, a deque's ``append`` and ``popleft`` are Python method calls (some
    200 instructions each, one of each per deferred answer), where a list's are C. Popped slots
    are dropped from the list's front once they are half of it (amortized O(1) per slot)."""

    __slots__ = ("_head", "_items")

    def __init__(self) -> None:
        self._items: list[_Pending] = []
        self._head = 0

    def __len__(self) -> int:
        return len(self._items) - self._head

    def __bool__(self) -> bool:
        return self._head < len(self._items)

    def append(self, slot: _Pending) -> None:
        self._items.append(slot)

    def first(self) -> _Pending:
        """The oldest slot (IndexError when there is none)."""
        if self._head >= len(self._items):
            raise IndexError("no response slot")
        return self._items[self._head]

    def popleft(self) -> _Pending:
        slot = self.first()
        head = self._head + 1
        items = self._items
        if head == len(items):
            items.clear()
            head = 0
        elif head >= 64 and 2 * head >= len(items):
            del items[:head]
            head = 0
        self._head = head
        return slot


class KafkaConnection(asyncio.Protocol):
    def __init__(self, server: Processor, listener: str) -> None:
        self.server = server
        self.listener = listener
        self.dispatcher = server.dispatcher
        self.max_frame = server.max_frame_bytes
        self.id = next(_ids)
        self.transport: asyncio.Transport | None = None
        self.peer_host = "unknown"
        self.peer = "unknown"
        self.principal: KafkaPrincipal = ANONYMOUS  # set when the connection authenticates
        self.security: ListenerSecurity | None = server.security.get(listener)
        self.authenticator: SaslAuthenticator | None = None  # on SASL listeners, until authenticated
        self._close_after_answer: str | None = None
        # KIP-368: when the SASL session ends (monotonic seconds), and when re-authentication began.
        self._session_expires: float | None = None
        self._reauth_started = 0.0
        self._sasl_mechanism: str | None = None
        self._buf = bytearray()  # the start of a frame not yet read whole (or frames left unserved)
        self._large: bytearray | None = None  # a large frame being read into its own buffer
        self._large_len = 0  # bytes of it read
        # Answers made while the next large request was still being read: written with the
        # answers after it, or when this pass of the loop has read what it could (one send, not
        # one per chunk read).
        self._unsent: list[Any] = []
        self._queue = _Slots()
        self._paused_reading = False
        self._turn_bytes = 0  # read since this connection last gave up its turn
        self._turn_over = False  # not read again before the loop's next pass
        self._writing_paused = False
        self._closing = False
        self._close_reason: str | None = None  # close once the responses still owed are written
        self._flush_scheduled = False
        self._held = 0  # bytes of finished answers queued behind one not yet finished
        self._counted = False  # in the connection quotas
        self.last_active = time.monotonic()  # connections.max.idle.ms
        self._drained: asyncio.Future[None] | None = None

    # --- asyncio.Protocol --------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # uvloop's transports are not asyncio.Transport
        peer = transport.get_extra_info("peername")
        if peer:
            self.peer_host = str(peer[0])
            self.peer = f"{peer[0]}:{peer[1]}"
        stats = self.server.stats[self.listener]
        refused = self.server.quotas.accept(self.peer_host)
        if refused is not None:
            log.warning("connection refused", peer=self.peer, listener=self.listener, reason=refused)
            self._closing = True
            transport.close()
            return
        stats.created += 1
        self._counted = True
        self.server.connections.add(self)
        security = self.security
        if security is not None:
            if security.sasl is not None:
                self.authenticator = SaslAuthenticator(security.sasl, self.peer_host)
                self.max_frame = security.sasl_max_receive_size
            elif security.principal_mapper is not None:
                self._tls_principal(security)

    def _tls_principal(self, security: ListenerSecurity) -> None:
        """A client certificate names the principal (after the TLS handshake, which asyncio
        completes before connection_made)."""
        assert self.transport is not None and security.principal_mapper is not None
        ssl_object = self.transport.get_extra_info("ssl_object")
        der = ssl_object.getpeercert(binary_form=True) if ssl_object is not None else None
        if not der:
            return  # no certificate (ssl.client.auth none or requested): User:ANONYMOUS
        from kcoord.security.distinguished_names import certificate_dn  # cryptography: on first use

        dn = certificate_dn(der)
        stats = self.server.stats[self.listener]
        try:
            name = security.principal_mapper.name(dn)
        except ValueError as e:
            stats.failed_authentication += 1
            self._abort(f"ssl.principal.mapping.rules: {e}")
            return
        stats.authenticated += 1
        self.principal = KafkaPrincipal(USER_TYPE, name)
        log.info(
            "TLS client authenticated", peer=self.peer, listener=self.listener, principal=str(self.principal)
        )

    # --- SASL (the handlers of apis/sasl.py call these) ---------------------------------------
    def authenticated(self, principal: KafkaPrincipal, session_lifetime_ms: int = 0) -> None:
        if self.authenticator is not None:
            self._sasl_mechanism = self.authenticator.mechanism
        self.server.stats[self.listener].authenticated += 1
        self.principal = principal
        self.authenticator = None
        self.max_frame = self.server.max_frame_bytes
        self._session_expires = time.monotonic() + session_lifetime_ms / 1000 if session_lifetime_ms else None

    def _session_check(self, frame: bytes, out: list[Any]) -> bool:
        """KIP-368 on an authenticated SASL connection whose session expires: a SaslHandshake
        begins re-authentication (at most once a second, as Kafka); any other request after the
        session expired closes the connection (Kafka's expired-connections-killed)."""
        assert self._session_expires is not None and self.security is not None
        now = time.monotonic()
        api_key = int.from_bytes(frame[:2], "big", signed=True) if len(frame) >= 2 else -1
        if api_key == ApiKey.SaslHandshake and now - self._reauth_started >= 1.0:
            assert self.security.sasl is not None and self._sasl_mechanism is not None
            self._reauth_started = now
            self.authenticator = SaslAuthenticator(
                self.security.sasl, self.peer_host, previous=(self._sasl_mechanism, self.principal)
            )
            self.max_frame = self.security.sasl_max_receive_size
            return True
        if now > self._session_expires:
            self._close_after_pending(out, "SASL session expired (connections.max.reauth.ms)")
            return False
        return True

    def failed_authentication(self, reason: str) -> None:
        """Close once the answer being made was written, after Kafka's delay
        (``connection.failed.authentication.delay.ms``) so failing again costs the client time."""
        self.server.stats[self.listener].failed_authentication += 1
        self._close_after_answer = reason

    def failed_sasl_exchange(self, mechanism: str | None, detail: str) -> None:
        """A SASL exchange the mechanism refused (SaslAuthenticate, or a v0 frame): logged with
        the mechanism's own detail, which the client never sees, then ``failed_authentication``."""
        log.warning(
            "SASL authentication failed",
            peer=self.peer,
            listener=self.listener,
            mechanism=mechanism,
            reason=detail,
        )
        self.failed_authentication(f"failed authentication with SASL mechanism {mechanism}")

    def connection_lost(self, exc: Exception | None) -> None:
        self._closing = True
        if self._counted:
            self.server.stats[self.listener].closed += 1
            self._counted = False
            self.server.quotas.release(self.peer_host)
        self.server.connections.discard(self)
        self._set_drained()
        self.server.on_connection_closed(self)

    def pause_writing(self) -> None:
        self._writing_paused = True
        self._update_reading()

    def resume_writing(self) -> None:
        self._writing_paused = False
        self._update_reading()
        self._dispatch_buffered()

    def _backlogged(self) -> bool:
        """The peer is not reading fast enough: take no more of its requests for now."""
        return self._held_back(self._transport_full())

    def _held_back(self, transport_full: bool) -> bool:
        """``_backlogged``, given what ``_transport_full`` answered (when it was last asked)."""
        return self._writing_paused or self._held > MAX_HELD_ANSWER_BYTES or transport_full

    def _transport_full(self) -> bool:
        """The transport holds more unsent bytes than a connection may: it only grows when
        something is written, so ``_serve`` asks again only after its writes (the question is
        a call into uvloop, per frame it was a tenth of a commit's serving)."""
        transport = self.transport
        return transport is not None and transport.get_write_buffer_size() > MAX_HELD_ANSWER_BYTES

    def _dispatch_buffered(self) -> None:
        """Serve the requests left in the buffer when the connection was backlogged."""
        if (
            len(self._buf) >= 4
            and not self._closing
            and self._close_reason is None
            and not self._backlogged()
        ):
            # Served from a copy: serving may clear or refill self._buf (closing, reading on).
            buf, self._buf = self._buf, bytearray()
            pos = self._serve(bytes(buf), 0, len(buf), None)
            if pos >= 0:
                del buf[:pos]
                buf += self._buf
                self._buf = buf
            self._write([])
            self._update_reading()

    # --- reading ---------------------------------------------------------------------------
    def data_received(self, data: bytes) -> None:
        self.last_active = time.monotonic()
        self._turn_bytes += len(data)
        pos = 0
        large = self._large
        if large is not None:
            have = self._large_len
            n = min(len(data), len(large) - have)
            # Through a view: slicing the bytes would copy the piece once more before it is stored.
            with memoryview(data) as view:
                large[have : have + n] = view[:n]
            self._large_len = have + n
            if self._large_len < len(large):
                self._end_pass()
                return
            self._large = None
            self._large_len = 0
            # The buffer holds the frame without its size prefix: one copy makes it the frame's
            # bytes, where slicing it out of the prefixed bytes copied it twice.
            with memoryview(large) as view:
                served = self._serve(bytes(large), 0, len(large), view)
            if served < 0:
                return
            if served == 0:  # backlogged meanwhile: served with what follows it
                self._buf += len(large).to_bytes(4, "big")
                self._buf += large
            pos = n
        if self._buf:
            pos = self._serve_kept(data, pos)
        if 0 <= pos < len(data):
            # Read whole frames, the usual case, are cut from the read's own bytes.
            pos = self._serve(data, pos, len(data), None)
            if 0 <= pos < len(data):
                self._keep(data, pos)
        self._end_pass()

    def _serve_kept(self, data: bytes, pos: int) -> int:
        """Serve what was kept from earlier reads (``_buf``) with the bytes of ``data`` from ``pos``
        on that it needs: where serving ``data`` goes on (``len(data)`` when it was used up, -1
        when the connection closes)."""
        buf, self._buf = self._buf, bytearray()
        need = _missing(buf, self.max_frame)
        if 0 < need <= len(data) - pos:
            # The start of one frame was kept: only that frame is joined, and the frames after it
            # are cut from the read's own bytes. Joining the whole read copied each of them twice
            # more (a Produce's 100 KiB frames arrive in reads of up to 256 KiB).
            with memoryview(data) as view:
                # One copy of each part into the frame (appending to ``buf`` first copied twice).
                frame = b"".join((buf, view[pos : pos + need]))
                served = self._serve(frame, 0, len(frame), None)
                if served == 0:  # held back: kept with the rest of the read, as below
                    buf += view[pos:]
                    self._buf = buf
                    return len(data)
            return pos + need if served > 0 else -1
        # Anything else (frames left unserved while held back, or a frame this read does not
        # complete): the frames are cut from the bytes joined (the buffer is reused).
        with memoryview(data) as view:
            buf += view[pos:]
        joined = bytes(buf)
        served = self._serve(joined, 0, len(joined), None)
        if served < 0:
            return -1
        self._keep(joined, served)
        return len(data)

    def _keep(self, data: bytes, pos: int) -> None:
        """The bytes from ``pos`` on, after the last whole frame read: a large frame of which at
        least half came goes into a buffer of its own size, which the next reads fill; anything
        else is kept for the next read."""
        rest = len(data) - pos
        with memoryview(data) as view:
            if rest >= 4 and not self._backlogged():
                size = int32_at(data, pos)
                # Only once half of it came: a size prefix alone must not make the broker allocate
                # (and zero) up to socket.request.max.bytes for bytes nobody has sent.
                if LARGE_FRAME_BYTES <= size <= self.max_frame and 4 + size > rest >= (4 + size) // 2:
                    large = self._large = bytearray(size)  # the frame, without its size prefix
                    large[: rest - 4] = view[pos + 4 :]
                    self._large_len = rest - 4
                    return
            self._buf += view[pos:]

    def _end_pass(self) -> None:
        if self._turn_bytes >= READ_TURN_BYTES and not self._turn_over:
            self._turn_over = True
            (self.server.loop or asyncio.get_running_loop()).call_soon(self._next_turn)
        if self._unsent:
            # Answers made at once are written after this pass's reads, with every connection's
            # (the write pass), not now: at 64 connections with one request each in flight, an
            # answer written on its request's own read had the client's next request arrive
            # before the loop polled again, and each poll found fewer sockets ready (fetch-offsets
            # c64 d1: 15 % more CPU per request than writing them after the reads).
            if self._turn_over:
                self._write([])
            elif not self._flush_scheduled:
                self._flush_scheduled = True
                self.server.flush_soon(self)
        self._update_reading()

    def _next_turn(self) -> None:
        self._turn_bytes = 0
        self._turn_over = False
        self._update_reading()

    def _serve(self, data: bytes, pos: int, end: int, buffer: memoryview | None) -> int:
        """Serve the whole frames in ``data[pos:end]``: the position after the last frame served,
        or -1 when the connection is to close. The answers made at once are left in ``_unsent``
        for the caller's ``_end_pass`` (or the next write) to send.

        Each frame is sliced out as ``bytes``, which the decoders read fastest (see
        ``protocol.frames``). With ``buffer``, ``data`` is one large frame without its size
        prefix, read into a buffer of its own: ``buffer`` is the same bytes writable, which the
        dispatcher also gets, for Produce to write its batches from."""
        out: list[Any] = []
        out_bytes = 0
        queue = self._queue
        transport_full = self._transport_full()
        while end - pos >= 4:
            if self._held_back(transport_full):
                break  # the rest waits in the buffer: resume_writing or _flush serves it
            if buffer is not None:
                frame = data
                pos = end
            else:
                size = int32_at(data, pos)
                if size < 0 or size > self.max_frame:
                    limit = (
                        "sasl.server.max.receive.size" if self.authenticator else "socket.request.max.bytes"
                    )
                    self._close_after_pending(out, f"frame size {size} outside 0..{self.max_frame} ({limit})")
                    return -1
                if end - pos - 4 < size:
                    break
                frame = data[pos + 4 : pos + 4 + size]
                pos += 4 + size
            # (While re-authenticating, the authenticator below decides what may be sent.)
            if (
                self._session_expires is not None
                and self.authenticator is None
                and not self._session_check(frame, out)
            ):
                return -1
            if self.authenticator is not None:
                if self.authenticator.raw_tokens:
                    if not self._raw_token(frame, out):
                        return -1
                    continue
                if not self._may_send(frame, out):
                    return -1
            try:
                result = self.dispatcher.dispatch(frame, self, buffer)
            except CloseConnection as e:
                self._close_after_pending(out, str(e))
                return -1
            except Exception:  # a bug must cost this connection only, as in _deliver
                log.exception("request failed", peer=self.peer)
                self._close_after_pending(out, "internal error")
                return -1
            if self._close_after_answer is not None:
                if type(result) is list:
                    out.extend(result)
                elif isinstance(result, bytes):
                    out.append(result)
                self._close_delayed(out)
                return -1
            if result is None:
                continue
            # Not isinstance with ``bytes | list``: compiled, that builds a union object and runs
            # Python's isinstance on it for every answer; a DeferredAnswer is one native type check.
            if not isinstance(result, DeferredAnswer):
                if queue:
                    slot = _Pending(self)
                    slot.data, slot.done = result, True
                    queue.append(slot)
                    self._held += _frame_size(result)
                    continue
                if type(result) is list:
                    out.extend(result)
                else:
                    out.append(result)
                out_bytes += _frame_size(result)
                if out_bytes >= WRITE_CHUNK_BYTES:
                    # Written now, so that a peer that does not read is noticed (pause_writing)
                    # before more of its requests are answered.
                    self._write(out)
                    out, out_bytes = [], 0
                    transport_full = self._transport_full()
                continue
            # Later: reserve the response's place in line.
            if out or self._unsent:
                self._write(out)
                out = []
                transport_full = self._transport_full()
            slot = _Pending(self)
            queue.append(slot)
            self.server.answers_owed += 1
            result.then(slot)
        if out:
            self._unsent += out  # written by the caller's _end_pass, or with the next answers
        return pos

    def _may_send(self, frame: bytes, out: list[Any]) -> bool:
        """Before authentication only the SASL exchange's requests are served."""
        assert self.authenticator is not None
        if self.authenticator.complete:
            return True
        api_key = int.from_bytes(frame[:2], "big", signed=True) if len(frame) >= 2 else -1
        why = self.authenticator.unexpected(api_key)
        if why is None:
            return True
        try:
            name = ApiKey(api_key).name
        except ValueError:
            name = str(api_key)
        self._close_after_pending(out, f"Unexpected Kafka request of type {name} {why}")
        return False

    def _raw_token(self, frame: bytes, out: list[Any]) -> bool:
        """A SASL token after a v0 handshake (KIP-43): answered with the mechanism's token, framed
        by its size; a failure closes the connection (v0 has no way to say why)."""
        auth = self.authenticator
        assert auth is not None
        try:
            answer = auth.authenticate(frame)
        except AuthenticationFailure as e:
            self.failed_sasl_exchange(auth.mechanism, e.detail)
            self._close_delayed(out)
            return False
        out.append(_SIZE.pack(len(answer)) + answer)
        if auth.principal is not None:
            self.authenticated(auth.principal, auth.session_lifetime_ms)
            log.info(
                "SASL client authenticated",
                peer=self.peer,
                listener=self.listener,
                mechanism=auth.mechanism,
                principal=str(auth.principal),
            )
        return True

    def _close_delayed(self, out: list[Any]) -> None:
        reason = self._close_after_answer
        assert reason is not None and self.security is not None
        self._write(out)
        self._buf.clear()
        self._close_reason = reason
        if self.transport is not None and not self._paused_reading:
            self.transport.pause_reading()
            self._paused_reading = True
        asyncio.get_running_loop().call_later(
            self.security.failed_authentication_delay_s, self._abort, reason
        )

    # --- responses -------------------------------------------------------------------------
    def _deliver(self, slot: _Pending, data: Frame | None, exc: BaseException | None) -> None:
        if exc is not None:
            if isinstance(exc, CloseConnection):
                self._abort(str(exc))
            else:
                log.error("request failed", peer=self.peer, error=repr(exc))
                self._abort("internal error")
            return
        slot.data = data
        slot.done = True
        if slot is not self._queue.first():
            self._held += _frame_size(data)
        # Responses completed in one pass of the event loop (a flush round releases many) go
        # out in one write.
        if not self._flush_scheduled and self._queue and self._queue.first().done:
            self._flush_scheduled = True
            self.server.flush_soon(self)

    def _flush(self) -> None:
        if not self._flush_scheduled:
            return  # already written by an earlier write pass
        self._flush_scheduled = False
        queue = self._queue
        out = []
        first = True
        while queue and queue.first().done:
            data = queue.popleft().data
            if not first:  # the head was never counted: it was written as soon as it was done
                self._held -= _frame_size(data)
            first = False
            if type(data) is list:
                out.extend(data)
            elif data is not None:
                out.append(data)
        self._write(out)
        if not queue:
            self._held = 0
            self._set_drained()
            if self._close_reason is not None:
                self._abort(self._close_reason)
                return
        self._update_reading()
        self._dispatch_buffered()

    def _write(self, out: list[Any]) -> None:
        if self._unsent:  # answers made before these ones
            out = self._unsent + out
            self._unsent = []
        if out and self.transport is not None and not self._closing:
            self.last_active = time.monotonic()
            if len(out) == 1:
                self.transport.write(out[0])
            else:
                self.transport.writelines(out)

    def _set_drained(self) -> None:
        if self._drained is not None and not self._drained.done():
            self._drained.set_result(None)

    def _update_reading(self) -> None:
        if self.transport is None or self._closing or self._close_reason is not None:
            return
        should_pause = self._turn_over or len(self._queue) >= MAX_IN_FLIGHT or self._backlogged()
        if should_pause and not self._paused_reading:
            self.transport.pause_reading()
            self._paused_reading = True
        elif not should_pause and self._paused_reading and not self.server.stopping:
            self.transport.resume_reading()
            self._paused_reading = False

    def _close_after_pending(self, out: list[Any], reason: str) -> None:
        """A frame that cannot be served: close the connection, but first answer the requests
        that came before it, as Kafka does (it reads a connection's next request only after
        answering the previous one)."""
        self._write(out)
        self._buf.clear()
        if not self._queue:
            self._abort(reason)
            return
        self._close_reason = reason
        if self.transport is not None and not self._paused_reading:
            self.transport.pause_reading()
            self._paused_reading = True

    def _abort(self, reason: str) -> None:
        if self._closing:
            return
        log.warning("closing connection", peer=self.peer, listener=self.listener, reason=reason)
        self._closing = True
        if self.transport is not None:
            self.transport.close()

    # --- shutdown ----------------------------------------------------------------------------
    def stop_reading(self) -> None:
        if self.transport is not None and not self._paused_reading and not self._closing:
            self.transport.pause_reading()
            self._paused_reading = True

    async def drain(self) -> None:
        """Wait until every response owed was written (or the connection was lost)."""
        if self._queue and not self._closing:
            self._drained = asyncio.get_running_loop().create_future()
            await self._drained

    def close(self) -> None:
        if self.transport is not None and not self._closing:
            self._closing = True
            self.transport.close()


class ShutdownSignal:
    """Set once the server starts to stop; long polls listen to it to answer at once then."""

    def __init__(self) -> None:
        self.stopping = False
        self._waiters: set[Callable[[], None]] = set()

    def add_waiter(self, waiter: Callable[[], None]) -> None:
        self._waiters.add(waiter)

    def remove_waiter(self, waiter: Callable[[], None]) -> None:
        self._waiters.discard(waiter)

    def trigger(self) -> None:
        self.stopping = True
        waiters, self._waiters = self._waiters, set()
        for waiter in waiters:
            waiter()


class Processor:
    """The connections of a server and what they share (Kafka's SocketServer.Processor): the
    dispatcher, the limits, the count of answers owed, and the write pass that sends every
    connection's ready answers at once. ``server.KafkaServer`` adds the listeners.

    A class the server extends rather than an interface it satisfies: compiled, a connection
    reaches these fields and methods directly, where through a Protocol each access was a
    generic attribute lookup (1-3 % more instructions per commit)."""

    def __init__(
        self,
        dispatcher: Dispatcher,
        listeners: list[str],
        max_frame_bytes: int,
        shutdown: ShutdownSignal | None,
        security: dict[str, ListenerSecurity] | None,
        quotas: ConnectionQuotas | None,
    ) -> None:
        self.dispatcher = dispatcher
        self.quotas = quotas or ConnectionQuotas(2**31 - 1, 2**31 - 1, {})
        self.security = security or {}
        self.max_frame_bytes = max_frame_bytes
        self.connections: set[KafkaConnection] = set()
        # Requests whose handler has not answered yet (a Reply pending), on every connection.
        self.answers_owed = 0
        self.stats = {name: ListenerStats() for name in listeners}
        self.shutdown = shutdown or ShutdownSignal()
        self._close_listeners: list[Callable[[KafkaConnection], None]] = []
        self._ready: list[KafkaConnection] = []  # connections with answers to write
        self._write_pass_scheduled = False
        # Looked up once: get_running_loop() costs a getpid syscall per call in CPython 3.11.
        self.loop: asyncio.AbstractEventLoop | None = None

    def flush_soon(self, conn: KafkaConnection) -> None:
        """Write ``conn``'s ready answers in the next write pass: at the end of the code that
        completed them (:meth:`write_ready`, e.g. after a flush round released its writers), or
        else in the next pass of the event loop; one callback for all connections."""
        self._ready.append(conn)
        if not self._write_pass_scheduled:
            self._write_pass_scheduled = True
            (self.loop or asyncio.get_running_loop()).call_soon(self.write_ready)

    def idle(self) -> bool:
        """At most one request is waiting for its answer, on any connection (the flusher's
        question: a count, since a round asks it and thousands of connections may be open)."""
        return self.answers_owed <= 1

    def write_ready(self) -> None:
        """Write every connection's answers that are ready (the write pass)."""
        self._write_pass_scheduled = False
        ready, self._ready = self._ready, []
        for conn in ready:
            conn._flush()

    def on_connection_closed(self, conn: KafkaConnection) -> None:
        for cb in self._close_listeners:
            cb(conn)

    def add_close_listener(self, cb: Callable[[KafkaConnection], None]) -> None:
        self._close_listeners.append(cb)

    @property
    def stopping(self) -> bool:
        return self.shutdown.stopping
