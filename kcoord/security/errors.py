"""How a SASL exchange fails, split as Kafka splits it (SaslServerAuthenticator)."""

from __future__ import annotations


class SaslAuthenticationFailed(Exception):
    """Refused credentials whose message the client may read (Kafka's SaslAuthenticationException)."""


class SaslCredentialsRefused(Exception):
    """Refused credentials whose reason must stay in the broker's log, since it could tell the
    client which users exist (Kafka's SaslException): the client gets a generic message."""
