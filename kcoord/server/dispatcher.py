"""From a request frame to a response frame: header, version gate, decode, handler, encode.

Behaviour (as a Kafka broker):
- an unknown API key, or a version no schema describes, closes the connection (Kafka's
  SocketServer throws InvalidRequestException and closes it);
- ApiVersions at a version above the highest served is answered with UNSUPPORTED_VERSION and
  a v0 body that lists the served versions, so the client can retry at a version it shares;
- any other API at a version the table does not serve, but that its schema describes, is
  answered with that API's error response carrying UNSUPPORTED_VERSION;
- a body that does not decode, or that has null where the schema allows none, closes the
  connection (Kafka's parser throws, and its SocketServer closes the connection);
- a handler raising :class:`KafkaError` is answered with the API's error response, one raising
  :class:`CloseConnection` closes the connection (acks=0 Produce); any other exception is logged
  and answered with UNKNOWN_SERVER_ERROR.

Every request served is counted in Kafka's RequestMetrics (requests by API and version, the
answer's top-level error code, the time from the frame's arrival to its answer being ready): a
counter the route holds, so the cost per request is two clock reads and two increments.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Final

import structlog

from kcoord import logsetup
from kcoord.apis.context import RequestContext
from kcoord.apis.reply import Reply
from kcoord.apis.services import Services
from kcoord.metrics import RequestCounter
from kcoord.protocol.errors import CloseConnection, ErrorCode, KafkaError
from kcoord.protocol.frames import (
    MalformedRequest,
    parse_request_header,
    response_frame,
    response_head,
    skip_tagged_fields,
)
from kcoord.protocol.messages import ApiKey, null_violation
from kcoord.server.api_table import ApiSpec, ApiTable

log = structlog.get_logger(__name__)
# Final: compiled, a name imported from another module is a lookup in this module's dict at
# every use (two per request).
_perf_counter: Final = time.perf_counter

Frame = bytes | list[Any]  # a framed response: bytes, or buffers to write one after the other


def _tagged(spec: ApiSpec, version: int) -> bool:
    """Response header v1 (flexible versions, except ApiVersions) adds empty tagged fields."""
    return spec.key != ApiKey.ApiVersions and bool(spec.response_cls.flexible_version_q(version))


def _error_code(answer: Any) -> int:
    """An answer's own top-level error code: 0 when it has none (or per-partition codes only).

    hasattr, not getattr with a default, here and in ``_framed``: compiled, getattr's default is
    reached by raising and clearing an AttributeError (message formatted) for every answer
    without the name, where hasattr looks it up without one."""
    return answer.error_code if hasattr(answer, "error_code") else 0


def _framed(response: Any, version: int, correlation_id: int, tagged: bool) -> Frame:
    if hasattr(response, "encode_framed"):  # the hot answers write their frame in one buffer
        framed: bytes = response.encode_framed(version, correlation_id, tagged)
        return framed
    if hasattr(response, "encode_chunks"):
        chunks = response.encode_chunks(version)
        size = sum(len(c) for c in chunks)
        return [response_head(size, correlation_id, tagged), *chunks]
    # Positional: kafka-python's encode(version=None, ...) takes it so too, and a compiled
    # answer's encode is then called without parsing a keyword.
    return response_frame(response.encode(version), correlation_id, tagged)  # kafka-python: bytearray


class _Route:
    """What dispatching one (api key, version) needs, worked out once."""

    __slots__ = ("check_nulls", "counter", "decode", "flexible", "own", "spec", "tagged")
    decode: Callable[[bytes, int], tuple[Any, int]]  # (frame, position) -> (request, end)

    def __init__(self, spec: ApiSpec, version: int, counter: RequestCounter) -> None:
        self.spec = spec
        self.counter = counter
        cls = spec.request_cls
        self.flexible = cls.flexible_version_q(version)
        self.tagged = _tagged(spec, version)
        # A hand-written decoder (called with the version: no partial's keyword call per request)
        # refuses forbidden nulls itself; kafka-python's reads them.
        self.own = spec.decoder
        self.check_nulls = spec.decoder is None
        # kafka-python's compiled decoder, called with the header's end as start position: no
        # per-request slicing, type checks or codegen-cache lookups (ApiMessage.decode's work).
        compiled = getattr(cls._struct, "compiled_decode_from", None) if self.own is None else None
        if compiled is not None:
            self.decode = compiled(version, compact=self.flexible, tagged=self.flexible, data_class=cls[None])
        else:

            def decode(buf: bytes, pos: int) -> tuple[Any, int]:
                return cls.decode(buf[pos:], version=version), len(buf)

            self.decode = decode


class Dispatcher:
    def __init__(self, services: Services, table: ApiTable) -> None:
        self.services = services
        self.table = table
        self._routes: dict[tuple[int, int], _Route] = {}
        # Read once: the CLI configures logging before it builds the broker, and a module's
        # global read from compiled code is a dict and an attribute lookup per request.
        self._debug = logsetup.debug_enabled

    def dispatch(
        self, frame: bytes, conn: Any, frame_buffer: memoryview | None = None
    ) -> Frame | DeferredAnswer | None:
        """Answer one request frame (without its size prefix). ``frame_buffer``: the same bytes in
        a writable buffer of their own, when a large request was read into one (a Produce batch
        is stamped in it and written from it).

        Returns the framed response (bytes, or a list of buffers), a :class:`DeferredAnswer` of
        it, or None when the request expects no response (Produce with acks=0).
        Raises :class:`CloseConnection`.
        """
        start = _perf_counter()
        try:
            header = parse_request_header(frame)
        except MalformedRequest as bad_header:
            raise CloseConnection(str(bad_header)) from bad_header
        version = header.api_version
        route = self._routes.get((header.api_key, version))
        if route is None:
            spec = self.table.get(header.api_key)
            if spec is None:
                raise CloseConnection(f"unknown api key {header.api_key}")
            ctx = RequestContext(header, version, conn)
            requests = self.services.metrics.requests
            if not spec.min_version <= version <= spec.max_version:
                answer = self._unsupported_version(ctx, spec, frame)
                counter = requests.counter(spec.name, version)
                counter.count += 1
                counter.answered(ErrorCode.UNSUPPORTED_VERSION, (_perf_counter() - start) * 1000)
                return answer
            counter = requests.counter(spec.name, version)
            route = self._routes[(header.api_key, version)] = _Route(spec, version, counter)
        spec = route.spec
        counter = route.counter
        counter.count += 1
        ctx = RequestContext(header, version, conn, frame_buffer)
        try:
            body_at = header.body_offset
            if route.flexible:
                body_at = skip_tagged_fields(frame, body_at)
            own = route.own
            if own is not None:
                request, _ = own(frame, body_at, version)
            else:
                request, _ = route.decode(frame, body_at)
        except Exception as undecodable:
            raise CloseConnection(
                f"cannot decode {ApiKey(header.api_key).name} v{version}: {undecodable!r}"
            ) from undecodable
        if route.check_nulls:
            bad = null_violation(request, version)
            if bad is not None:
                raise CloseConnection(f"non-nullable field {bad} was serialized as null")
        ctx.flexible = route.flexible
        if self._debug:
            log.debug(
                "request",
                api=spec.name,
                version=version,
                client_id=header.client_id,
                correlation_id=header.correlation_id,
                peer=getattr(conn, "peer", None),
            )
        try:
            result = spec.handler(self.services, ctx, request)
        except CloseConnection:
            raise
        except KafkaError as refused:
            counter.answered(refused.code, (_perf_counter() - start) * 1000)
            return self._error(ctx, spec, request, refused.code, refused.message)
        except Exception as crashed:
            log.exception("handler failed", api=spec.name, version=version, client_id=header.client_id)
            counter.answered(ErrorCode.UNKNOWN_SERVER_ERROR, (_perf_counter() - start) * 1000)
            return self._error(ctx, spec, request, ErrorCode.UNKNOWN_SERVER_ERROR, str(crashed))
        if type(result) is Reply:
            if result.done:  # settled on the handler's stack: no answer deferred
                value, error = result.outcome()
                return self._settled(ctx, route, request, start, value, error)
            deferred = DeferredAnswer(self, ctx, route, request, start)
            result.then(deferred)
            return deferred
        # An answer's own top-level error code (NONE when it has none, or per-partition codes only).
        counter.answered(_error_code(result), (_perf_counter() - start) * 1000)
        if result is None:
            return None
        return _framed(result, version, header.correlation_id, route.tagged)

    def _settled(
        self,
        ctx: RequestContext,
        route: _Route,
        request: Any,
        start: float,
        value: Any,
        error: BaseException | None,
    ) -> Frame | None:
        """The framed answer of a handler's settled Reply (None: no answer), counted; raises what
        the connection must act on (CloseConnection)."""
        counter = route.counter
        if error is None:
            counter.answered(_error_code(value), (_perf_counter() - start) * 1000)
            if value is None:
                return None
            return _framed(value, ctx.api_version, ctx.header.correlation_id, route.tagged)
        if isinstance(error, KafkaError):
            counter.answered(error.code, (_perf_counter() - start) * 1000)
        elif not isinstance(error, CloseConnection):
            counter.answered(ErrorCode.UNKNOWN_SERVER_ERROR, (_perf_counter() - start) * 1000)
        return self._failed(ctx, route.spec, request, error)

    def _failed(self, ctx: RequestContext, spec: ApiSpec, request: Any, error: BaseException) -> Frame:
        """The framed error answer of a handler whose Reply failed with ``error``."""
        if isinstance(error, KafkaError):
            return self._error(ctx, spec, request, error.code, error.message)
        if isinstance(error, CloseConnection) or not isinstance(error, Exception):
            raise error
        log.error("handler failed", api=spec.name, version=ctx.api_version, exc_info=error)
        return self._error(ctx, spec, request, ErrorCode.UNKNOWN_SERVER_ERROR, str(error))

    def encode(self, ctx: RequestContext, spec: ApiSpec, response: Any) -> Frame:
        """The framed response: bytes, or a list of buffers for answers that hand over their
        large parts uncopied (``encode_chunks``, Fetch), for the connection's writelines."""
        version = ctx.api_version
        return _framed(response, version, ctx.header.correlation_id, _tagged(spec, version))

    def _error(
        self, ctx: RequestContext, spec: ApiSpec, request: Any, code: int, message: str | None
    ) -> Frame:
        if spec.error_response is None:
            raise CloseConnection(f"{spec.name} failed with {ErrorCode(code).name}: {message}")
        return self.encode(ctx, spec, spec.error_response(request, ctx.api_version, code, message))

    def _unsupported_version(self, ctx: RequestContext, spec: ApiSpec, buf: bytes) -> Frame:
        version = ctx.api_version
        if spec.key == ApiKey.ApiVersions:
            # Answer in v0 so that any client can read the versions we do serve.
            ctx.api_version = 0
            return self.encode(ctx, spec, self.table.api_versions_error(ErrorCode.UNSUPPORTED_VERSION))
        schema_max = spec.request_cls.max_version
        if version < 0 or version > schema_max or spec.error_response is None:
            raise CloseConnection(
                f"{spec.name} v{version} is not supported (served: v{spec.min_version}-v{spec.max_version})"
            )
        try:
            body_at = ctx.header.body_offset
            if spec.request_cls.flexible_version_q(version):
                body_at = skip_tagged_fields(buf, body_at)
            request = spec.request_cls.decode(buf[body_at:], version=version)
        except Exception as e:
            raise CloseConnection(f"cannot decode {spec.name} v{version}: {e!r}") from e
        bad = null_violation(request, version)
        if bad is not None:
            raise CloseConnection(f"non-nullable field {bad} was serialized as null")
        return self._error(ctx, spec, request, ErrorCode.UNSUPPORTED_VERSION, None)


class DeferredAnswer:
    """A handler's later answer, framed for the connection when the handler's Reply settles.

    The connection hands ``then`` its consumer, which gets the frame (or the error) straight from
    the handler's resolver: no second Reply stands between (one object and one call less per
    deferred answer). An object, not a closure over ``dispatch``'s scope: compiled, such a closure
    and that scope would hold each other."""

    __slots__ = ("_consumer", "_done", "_error", "_frame", "ctx", "dispatcher", "request", "route", "start")

    def __init__(
        self, dispatcher: Dispatcher, ctx: RequestContext, route: _Route, request: Any, start: float
    ) -> None:
        self.dispatcher = dispatcher
        self.ctx = ctx
        self.route = route
        self.request = request
        self.start = start
        self._consumer: Callable[[Frame | None, BaseException | None], None] | None = None
        self._done = False
        self._frame: Frame | None = None
        self._error: BaseException | None = None

    def then(self, consumer: Callable[[Frame | None, BaseException | None], None]) -> None:
        """Hand the framed answer to ``consumer(frame, error)``: now if known, else when it is."""
        if self._done:
            frame, error = self._frame, self._error
            self._frame = self._error = None
            consumer(frame, error)
        else:
            self._consumer = consumer

    def _settle(self, frame: Frame | None, error: BaseException | None) -> None:
        consumer = self._consumer
        if consumer is None:
            self._done = True
            self._frame = frame
            self._error = error
        else:
            self._consumer = None
            consumer(frame, error)

    def __call__(self, value: Any, error: BaseException | None) -> None:
        """The handler's Reply settled (its consumer)."""
        try:
            data = self.dispatcher._settled(self.ctx, self.route, self.request, self.start, value, error)
        except BaseException as e:
            self._settle(None, e)
            return
        self._settle(data, None)
