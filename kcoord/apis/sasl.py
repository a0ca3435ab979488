"""SaslHandshake (key 17) and SaslAuthenticate (key 36): the SASL exchange of KIP-43/KIP-152.

Behaviour / version notes:
- served on SASL_PLAINTEXT and SASL_SSL listeners before authentication (the connection allows
  nothing else then, server/connection.py); on any other listener, or once authenticated, both
  answer ILLEGAL_SASL_STATE, as Kafka's KafkaApis;
- SaslHandshake v0-v1: after v0 (KIP-43) the client sends its tokens raw, framed by their size
  alone, and gets the answers framed alike (server/connection.py), a failure closing the connection
  without an answer, as Kafka; after v1 the tokens travel in SaslAuthenticate. An unknown or
  disabled mechanism answers UNSUPPORTED_SASL_MECHANISM with the enabled ones, then the
  connection is closed;
- SaslAuthenticate v0-v2 carries the mechanism's tokens; a failure answers
  SASL_AUTHENTICATION_FAILED with Kafka's message, logs a warning naming the peer, listener and
  mechanism (never the credentials), and closes the connection after
  ``connection.failed.authentication.delay.ms``;
- session_lifetime_ms (v1+) is ``connections.max.reauth.ms`` (per listener and mechanism, 0:
  sessions do not expire): the client re-authenticates on its connection before then (KIP-368:
  SaslHandshake and SaslAuthenticate again, same mechanism and principal), or the connection is
  closed at its first request after the session expired (server/connection.py).
"""

from __future__ import annotations

from typing import Any, Protocol

import structlog

from kcoord.apis.context import RequestContext
from kcoord.apis.services import Services
from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.messages import ApiKey, response_class
from kcoord.security.authenticator import AuthenticationFailure, SaslAuthenticator, State
from kcoord.security.principal import KafkaPrincipal

log = structlog.get_logger(__name__)

_HandshakeResponse: Any = response_class(ApiKey.SaslHandshake)
_AuthenticateResponse: Any = response_class(ApiKey.SaslAuthenticate)


class SaslConnection(Protocol):
    """What the SASL handlers need of the connection (server/connection.py's KafkaConnection)."""

    peer: str
    listener: str
    authenticator: SaslAuthenticator | None

    def authenticated(self, principal: KafkaPrincipal, session_lifetime_ms: int) -> None: ...

    def failed_authentication(self, reason: str) -> None: ...

    def failed_sasl_exchange(self, mechanism: str | None, detail: str) -> None: ...


def _authenticator(ctx: RequestContext) -> SaslAuthenticator | None:
    return getattr(ctx.conn, "authenticator", None)


def handle_handshake(services: Services, ctx: RequestContext, req: Any) -> Any:
    resp = _HandshakeResponse
    auth = _authenticator(ctx)
    if auth is None or auth.state is not State.HANDSHAKE:
        return resp(error_code=ErrorCode.ILLEGAL_SASL_STATE, mechanisms=[])
    enabled = list(auth.settings.mechanisms)
    if not auth.handshake(req.mechanism, raw_tokens=ctx.api_version == 0):
        conn: SaslConnection = ctx.conn
        log.warning(
            "SASL mechanism not enabled", peer=conn.peer, listener=conn.listener, mechanism=req.mechanism
        )
        conn.failed_authentication(f"unsupported SASL mechanism {req.mechanism}")
        return resp(error_code=ErrorCode.UNSUPPORTED_SASL_MECHANISM, mechanisms=enabled)
    return resp(error_code=ErrorCode.NONE, mechanisms=enabled)


def handle_authenticate(services: Services, ctx: RequestContext, req: Any) -> Any:
    resp = _AuthenticateResponse
    auth = _authenticator(ctx)
    if auth is None or auth.state is not State.AUTHENTICATE:
        message = (
            "SaslAuthenticate request received after successful authentication"
            if auth is None and getattr(ctx.conn, "security", None) is not None
            else "Unexpected SaslAuthenticate request"
        )
        return resp(error_code=ErrorCode.ILLEGAL_SASL_STATE, error_message=message, auth_bytes=b"")
    conn: SaslConnection = ctx.conn
    try:
        answer = auth.authenticate(bytes(req.auth_bytes))
    except AuthenticationFailure as e:
        conn.failed_sasl_exchange(auth.mechanism, e.detail)
        return resp(
            error_code=ErrorCode.SASL_AUTHENTICATION_FAILED,
            error_message=e.message,
            auth_bytes=b"",
            session_lifetime_ms=0,
        )
    if auth.principal is not None:
        conn.authenticated(auth.principal, auth.session_lifetime_ms)
        log.info(
            "SASL client re-authenticated" if auth.previous is not None else "SASL client authenticated",
            peer=conn.peer,
            listener=conn.listener,
            mechanism=auth.mechanism,
            principal=str(auth.principal),
        )
    return resp(
        error_code=ErrorCode.NONE,
        error_message=None,
        auth_bytes=answer,
        session_lifetime_ms=auth.session_lifetime_ms,
    )


def handshake_error_response(req: Any, version: int, code: int, message: str | None) -> Any:
    return _HandshakeResponse(error_code=code, mechanisms=[])


def authenticate_error_response(req: Any, version: int, code: int, message: str | None) -> Any:
    return _AuthenticateResponse(error_code=code, error_message=message, auth_bytes=b"")
