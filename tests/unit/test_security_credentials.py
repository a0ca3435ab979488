"""SCRAM credential arithmetic against RFC 7677's SCRAM-SHA-256 example, and principals."""

import base64
import hashlib
import hmac

import pytest

from kcoord.security.credentials import credential_from_salted_password, salted_password
from kcoord.security.principal import ANONYMOUS, KafkaPrincipal

CLIENT_FIRST_BARE = "n=user,r=rOprNGfwEbeRWgbNEkqO"
SERVER_FIRST = "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
CLIENT_FINAL_NO_PROOF = "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
PROOF = "dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
SERVER_SIGNATURE = "6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


def test_rfc7677_exchange_verifies_against_the_stored_keys() -> None:
    salt = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
    salted = salted_password("SCRAM-SHA-256", b"pencil", salt, 4096)
    cred = credential_from_salted_password("SCRAM-SHA-256", salt, salted, 4096)
    auth_message = f"{CLIENT_FIRST_BARE},{SERVER_FIRST},{CLIENT_FINAL_NO_PROOF}".encode()
    client_signature = hmac.digest(cred.stored_key, auth_message, "sha256")
    client_key = bytes(a ^ b for a, b in zip(base64.b64decode(PROOF), client_signature, strict=True))
    assert hashlib.sha256(client_key).digest() == cred.stored_key
    server_signature = hmac.digest(cred.server_key, auth_message, "sha256")
    assert base64.b64encode(server_signature).decode() == SERVER_SIGNATURE


def test_unknown_mechanism_is_refused() -> None:
    with pytest.raises(ValueError, match="SCRAM-SHA-1"):
        salted_password("SCRAM-SHA-1", b"x", b"salt", 4096)


def test_principal_text_form() -> None:
    assert str(ANONYMOUS) == "User:ANONYMOUS"
    assert KafkaPrincipal.parse("User:CN=alice,O=acme") == KafkaPrincipal("User", "CN=alice,O=acme")
    with pytest.raises(ValueError):
        KafkaPrincipal.parse("alice")
