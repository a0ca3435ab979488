"""SCRAM credentials as Kafka stores them (RFC 5802): never the password, only what verifies it.

The broker receives a client's salt and salted password (AlterUserScramCredentials) and keeps
StoredKey = H(HMAC(salted, "Client Key")) and ServerKey = HMAC(salted, "Server Key"); a SCRAM
exchange proves knowledge of the password against those two keys.
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass
from typing import Protocol

# Kafka's ScramMechanism: name, hash, and the type number used in the SCRAM credential APIs.
SCRAM_MECHANISMS: dict[str, tuple[str, int]] = {
    "SCRAM-SHA-256": ("sha256", 1),
    "SCRAM-SHA-512": ("sha512", 2),
}
MIN_ITERATIONS = 4096  # Kafka's ScramMechanism.minIterations
MAX_ITERATIONS = 16384  # Kafka's ScramMechanism.maxIterations (AlterUserScramCredentials refuses more)


@dataclass(frozen=True, slots=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int


class ScramCredentialSource(Protocol):
    """Where the SASL/SCRAM server finds a user's credential (the durable metadata)."""

    def scram_credential(self, mechanism: str, user: str) -> ScramCredential | None: ...


def hash_name(mechanism: str) -> str:
    try:
        return SCRAM_MECHANISMS[mechanism][0]
    except KeyError:
        raise ValueError(f"unknown SCRAM mechanism {mechanism!r}") from None


def salted_password(mechanism: str, password: bytes, salt: bytes, iterations: int) -> bytes:
    """Hi(password, salt, i) of RFC 5802: PBKDF2 with the mechanism's HMAC."""
    return hashlib.pbkdf2_hmac(hash_name(mechanism), password, salt, iterations)


def credential_from_salted_password(
    mechanism: str, salt: bytes, salted: bytes, iterations: int
) -> ScramCredential:
    name = hash_name(mechanism)
    client_key = hmac.digest(salted, b"Client Key", name)
    stored_key = hashlib.new(name, client_key).digest()
    server_key = hmac.digest(salted, b"Server Key", name)
    return ScramCredential(salt, stored_key, server_key, iterations)
