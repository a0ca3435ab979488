"""SASL/PLAIN (RFC 4616) as Kafka's PlainSaslServer serves it, with users from JAAS options.

The client's single message is ``authzid NUL authcid NUL passwd``; an authorization id, when
given, must equal the user name. Users are the ``user_<name>="<password>"`` options of
``org.apache.kafka.common.security.plain.PlainLoginModule`` (Kafka's PlainServerCallbackHandler).
"""

from __future__ import annotations

import hmac

from kcoord.security.errors import SaslAuthenticationFailed
from kcoord.security.jaas import parse_jaas_config

PLAIN_LOGIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
_USER_PREFIX = "user_"


def parse_plain_token(token: bytes) -> tuple[str, str, str]:
    """(authorization id, user name, password) of a PLAIN message; Kafka's errors otherwise."""
    try:
        text = token.decode("utf-8")
    except UnicodeDecodeError:
        raise SaslAuthenticationFailed("Invalid SASL/PLAIN response: not UTF-8") from None
    # Kafka's extractTokens: at most four tokens, empty ones kept.
    parts = text.split("\0", 3)
    if len(parts) != 3:
        raise SaslAuthenticationFailed(f"Invalid SASL/PLAIN response: expected 3 tokens, got {len(parts)}")
    authzid, username, password = parts
    if not username:
        raise SaslAuthenticationFailed("Authentication failed: username not specified")
    if not password:
        raise SaslAuthenticationFailed("Authentication failed: password not specified")
    return authzid, username, password


def plain_users(jaas_config: str) -> dict[str, str]:
    """The users and passwords of the PlainLoginModule in ``jaas_config``."""
    modules = [m for m in parse_jaas_config(jaas_config) if m.class_name == PLAIN_LOGIN_MODULE]
    if not modules:
        raise ValueError(f"the JAAS configuration has no {PLAIN_LOGIN_MODULE}")
    return {
        name[len(_USER_PREFIX) :]: password
        for m in modules
        for name, password in m.options.items()
        if name.startswith(_USER_PREFIX) and len(name) > len(_USER_PREFIX)
    }


class PlainServer:
    """One PLAIN exchange: one client message, no server challenge."""

    mechanism = "PLAIN"

    def __init__(self, users: dict[str, str]) -> None:
        self._users = users
        self.username: str | None = None
        self.complete = False

    def evaluate(self, token: bytes) -> bytes:
        if self.complete:
            raise SaslAuthenticationFailed("SASL/PLAIN exchange already completed")
        authzid, username, password = parse_plain_token(token)
        expected = self._users.get(username)
        # Compared in constant time even for an unknown user, so timing does not tell which exist.
        ok = hmac.compare_digest(
            password.encode("utf-8"), (expected if expected is not None else "\0" + password).encode("utf-8")
        )
        if expected is None or not ok:
            raise SaslAuthenticationFailed("Authentication failed: Invalid username or password")
        if authzid and authzid != username:
            raise SaslAuthenticationFailed(
                "Authentication failed: Client requested an authorization id that is different from username"
            )
        self.username = username
        self.complete = True
        return b""
