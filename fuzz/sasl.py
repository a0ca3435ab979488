"""Fuzz target: the SASL parsers an unauthenticated client reaches (PLAIN tokens, both SCRAM
messages, and the JAAS configs an operator writes). Only their own errors may come out.

    python fuzz/sasl.py -runs=1000000 fuzz/corpus/sasl
"""

from __future__ import annotations

import sys
from pathlib import Path

import atheris

# The repository's kcoord, whatever is installed (run as python fuzz/<target>.py).
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

with atheris.instrument_imports(include=["kcoord"], enable_loader_override=False):
    from kcoord.security.credentials import credential_from_salted_password, salted_password
    from kcoord.security.errors import SaslAuthenticationFailed, SaslCredentialsRefused
    from kcoord.security.jaas import JaasConfigError, parse_jaas_config
    from kcoord.security.sasl_plain import PlainServer
    from kcoord.security.scram import ScramServer

EXPECTED = (SaslAuthenticationFailed, SaslCredentialsRefused, JaasConfigError)
SALT = b"fuzz-salt"
CRED = credential_from_salted_password(
    "SCRAM-SHA-256", SALT, salted_password("SCRAM-SHA-256", b"secret", SALT, 4096), 4096
)


class Credentials:
    def scram_credential(self, mechanism: str, user: str) -> object:
        return CRED if user == "alice" else None


def one(data: bytes) -> None:
    fdp = atheris.FuzzedDataProvider(data)
    which = fdp.ConsumeIntInRange(0, 2)
    try:
        if which == 0:
            PlainServer({"alice": "secret"}).evaluate(fdp.ConsumeBytes(fdp.remaining_bytes()))
        elif which == 1:
            server = ScramServer("SCRAM-SHA-256", Credentials(), server_nonce=lambda: "srvnonce")  # type: ignore[arg-type]
            first = fdp.ConsumeBytes(fdp.ConsumeIntInRange(0, 200))
            server.evaluate(first)
            server.evaluate(fdp.ConsumeBytes(fdp.remaining_bytes()))
        else:
            parse_jaas_config(fdp.ConsumeUnicodeNoSurrogates(fdp.remaining_bytes()))
    except EXPECTED:
        pass


if __name__ == "__main__":
    atheris.Setup(sys.argv, one)
    atheris.Fuzz()
