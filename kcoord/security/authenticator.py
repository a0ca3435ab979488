"""One connection's SASL authentication, as Kafka's SaslServerAuthenticator.

States: before the handshake a client may send ApiVersions and SaslHandshake; after it, only
SaslAuthenticate until the mechanism completes; any other request closes the connection
("Unexpected Kafka request of type ... during SASL handshake"). Failures are answered with
SASL_AUTHENTICATION_FAILED and Kafka's message, then the connection is closed.

Repeated failures from one IP: a failure costs the client a delay before its connection closes
(``connection.failed.authentication.delay.ms``, as Kafka), and once an IP failed
``sasl.failed.authentication.max.per.ip`` times within ``sasl.failed.authentication.window.ms``
(kcoord's settings) its further attempts fail without their credentials being checked until
the window has passed, so guessing passwords costs a window per few guesses.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from typing import Protocol

from kcoord.security.credentials import SCRAM_MECHANISMS, ScramCredentialSource
from kcoord.security.errors import SaslAuthenticationFailed, SaslCredentialsRefused
from kcoord.security.principal import USER_TYPE, KafkaPrincipal
from kcoord.security.sasl_plain import PlainServer
from kcoord.security.scram import ScramServer

SUPPORTED_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE = 18, 17, 36
MAX_TRACKED_IPS = 10_000  # addresses with recent failures remembered at once


class SaslMechanismServer(Protocol):
    username: str | None
    complete: bool

    def evaluate(self, token: bytes) -> bytes: ...


class State(Enum):
    HANDSHAKE = "handshake"  # ApiVersions or SaslHandshake expected
    AUTHENTICATE = "authenticate"  # SaslAuthenticate expected
    COMPLETE = "complete"
    FAILED = "failed"


class FailedAuthentications:
    """Failures per client IP within a sliding window (kcoord's brute-force limit)."""

    def __init__(self, max_per_ip: int, window_ms: int, now: Callable[[], float] = time.monotonic) -> None:
        self.max_per_ip = max_per_ip
        self.window_s = window_ms / 1000
        self._now = now
        self._failures: dict[str, deque[float]] = {}

    def _recent(self, ip: str) -> deque[float] | None:
        times = self._failures.get(ip)
        if times is None:
            return None
        horizon = self._now() - self.window_s
        while times and times[0] <= horizon:
            times.popleft()
        if not times:
            del self._failures[ip]
            return None
        return times

    def blocked(self, ip: str) -> bool:
        if self.max_per_ip <= 0:
            return False
        times = self._recent(ip)
        return times is not None and len(times) >= self.max_per_ip

    def record(self, ip: str) -> None:
        if self.max_per_ip <= 0:
            return
        if len(self._failures) >= MAX_TRACKED_IPS:
            # Many addresses (an IPv6 range) must not grow this without bound: forget the
            # expired ones, and if all are recent, the one whose latest failure is oldest.
            for other in list(self._failures):
                self._recent(other)
            if len(self._failures) >= MAX_TRACKED_IPS:
                del self._failures[min(self._failures, key=lambda k: self._failures[k][-1])]
        times = self._recent(ip)
        if times is None:
            times = self._failures[ip] = deque()
        times.append(self._now())
        while len(times) > self.max_per_ip:  # only the newest max_per_ip count
            times.popleft()


@dataclass(frozen=True)
class SaslSettings:
    """What a SASL listener authenticates with (its listener.name.<l>.* overrides applied)."""

    listener: str
    mechanisms: tuple[str, ...]
    plain_users: dict[str, str]
    scram_credentials: ScramCredentialSource
    failures: FailedAuthentications
    # connections.max.reauth.ms per mechanism (KIP-368); 0: sessions do not expire.
    session_lifetime_ms: dict[str, int] = field(default_factory=dict)


class AuthenticationFailure(Exception):
    """Raised by :meth:`SaslAuthenticator.authenticate`: the client is told ``message``;
    ``detail`` is for the broker's log."""

    def __init__(self, message: str, detail: str) -> None:
        super().__init__(message)
        self.message = message
        self.detail = detail


class SaslAuthenticator:
    """``previous`` is the mechanism and principal of the session being re-authenticated (KIP-368):
    both must stay the same, as in Kafka."""

    def __init__(
        self, settings: SaslSettings, peer_host: str, previous: tuple[str, KafkaPrincipal] | None = None
    ) -> None:
        self.settings = settings
        self.peer_host = peer_host
        self.previous = previous
        self.state = State.HANDSHAKE
        self.mechanism: str | None = None
        self.principal: KafkaPrincipal | None = None
        self.session_lifetime_ms = 0  # once complete: how long the session lasts (0: for ever)
        # After a v0 SaslHandshake (KIP-43) the tokens come raw, framed by their size alone.
        self.raw_tokens = False
        self._server: SaslMechanismServer | None = None

    @property
    def complete(self) -> bool:
        return self.state is State.COMPLETE

    def unexpected(self, api_key: int) -> str | None:
        """Why request ``api_key`` may not be sent now (None if it may), in Kafka's words."""
        if self.state is State.HANDSHAKE:
            if api_key in (API_VERSIONS, SASL_HANDSHAKE):
                return None
            return "during SASL handshake"
        if self.state is State.AUTHENTICATE:
            return None if api_key == SASL_AUTHENTICATE else "during SASL authentication"
        if self.state is State.FAILED:
            return "after a failed SASL authentication"
        return None

    def handshake(self, mechanism: str, raw_tokens: bool = False) -> bool:
        """Choose ``mechanism``; False (and no state change) if it is not enabled."""
        if mechanism not in self.settings.mechanisms:
            return False
        self.mechanism = mechanism
        self.raw_tokens = raw_tokens
        if mechanism == "PLAIN":
            self._server = PlainServer(self.settings.plain_users)
        else:
            self._server = ScramServer(mechanism, self.settings.scram_credentials)
        self.state = State.AUTHENTICATE
        return True

    def authenticate(self, token: bytes) -> bytes:
        """The mechanism's answer to ``token``; raises :class:`AuthenticationFailure`."""
        server = self._server
        assert server is not None and self.mechanism is not None
        failures = self.settings.failures
        if self.previous is not None and self.previous[0] != self.mechanism:
            self._failed()
            message = (
                f"SASL mechanism '{self.mechanism}' requested by client is not supported for "
                f"re-authentication of mechanism '{self.previous[0]}'"
            )
            raise AuthenticationFailure(message, message)
        if failures.blocked(self.peer_host):
            self.state = State.FAILED
            raise AuthenticationFailure(
                self._generic_message(), "too many failed authentications from this address"
            )
        try:
            answer = server.evaluate(token)
        except SaslAuthenticationFailed as e:
            self._failed()
            raise AuthenticationFailure(str(e), str(e)) from None
        except SaslCredentialsRefused as e:
            self._failed()
            raise AuthenticationFailure(self._generic_message(), str(e)) from None
        if server.complete:
            assert server.username is not None
            principal = KafkaPrincipal(USER_TYPE, server.username)
            if self.previous is not None and self.previous[1] != principal:
                self._failed()
                before = self.previous[1]
                message = (
                    "Cannot change principals during re-authentication from "
                    f"{before.principal_type}.{before.name}: {principal.principal_type}.{principal.name}"
                )
                raise AuthenticationFailure(message, message)
            self.principal = principal
            self.session_lifetime_ms = self.settings.session_lifetime_ms.get(self.mechanism, 0)
            self.state = State.COMPLETE
        return answer

    def _failed(self) -> None:
        self.state = State.FAILED
        self.settings.failures.record(self.peer_host)

    def _generic_message(self) -> str:
        # Kafka's text: the reason stays in the broker's log, as it may tell which users exist.
        return (
            "Authentication failed during authentication due to invalid credentials with SASL "
            f"mechanism {self.mechanism}"
        )


def check_mechanisms(names: list[str]) -> tuple[str, ...]:
    """``sasl.enabled.mechanisms`` validated: the ones kcoord serves, with a reason for the rest."""
    for name in names:
        if name in ("GSSAPI", "OAUTHBEARER"):
            raise ValueError(
                f"SASL mechanism {name} is not supported by kcoord (see SKIPPED.md); "
                f"use {', '.join(SUPPORTED_MECHANISMS)}"
            )
        if name not in SUPPORTED_MECHANISMS:
            raise ValueError(f"unknown SASL mechanism {name!r}; supported: {', '.join(SUPPORTED_MECHANISMS)}")
    if not names:
        raise ValueError("sasl.enabled.mechanisms is empty")
    assert set(SCRAM_MECHANISMS) <= set(SUPPORTED_MECHANISMS)
    return tuple(names)
