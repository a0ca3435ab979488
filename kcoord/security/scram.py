"""The server side of SCRAM-SHA-256 / SCRAM-SHA-512 (RFC 5802, RFC 7677) as Kafka's ScramSaslServer.

Two rounds: client-first (``n,[a=authzid],n=user,r=cnonce[,ext...]``) is answered with
server-first (``r=cnonce+snonce,s=salt,i=iterations``), client-final
(``c=biws,r=nonce[,ext...],p=proof``) with server-final (``v=signature``) once the proof checks
against the stored key. Only the gs2 header ``n`` (no channel binding) is accepted, as Kafka.
Kafka's ``tokenauth`` extension (delegation tokens) is refused: kcoord has no delegation tokens.
Credentials come from a :class:`ScramCredentialSource`; the password never reaches the broker.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
import secrets
from collections.abc import Callable

from kcoord.security.credentials import MIN_ITERATIONS, SCRAM_MECHANISMS, ScramCredentialSource
from kcoord.security.errors import SaslAuthenticationFailed, SaslCredentialsRefused

# Kafka's ScramMessages grammar (Java's [a&&[^b]] written out as plain classes).
_VALUE = r"[\x01-\x2b\x2d-\x7f]+"
_PRINTABLE = r"[\x21-\x2b\x2d-\x7e]+"
_SASLNAME = r"(?:[\x01-\x2b\x2d-\x3c\x3e-\x7f]|=2C|=3D)+"
_EXTENSIONS = rf"(?:,[A-Za-z]+={_VALUE})*"
_BASE64 = r"(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?"
CLIENT_FIRST = re.compile(
    rf"n,(?:a=(?P<authzid>{_SASLNAME}))?,(?P<bare>(?:m={_VALUE},)?n=(?P<saslname>{_SASLNAME}),"
    rf"r=(?P<nonce>{_PRINTABLE})(?P<extensions>{_EXTENSIONS}))"
)
CLIENT_FINAL = re.compile(
    rf"(?P<without_proof>c=(?P<channel>{_BASE64}),r=(?P<nonce>{_PRINTABLE}){_EXTENSIONS}),p=(?P<proof>{_BASE64})"
)
TOKEN_AUTH = "tokenauth"


def username_of(saslname: str) -> str:
    """RFC 5802's saslname decoded (=2C is ',' and =3D is '='); any other '=' is refused."""
    name = saslname.replace("=2C", ",")
    if "=" in name.replace("=3D", ""):
        raise SaslCredentialsRefused(f"invalid username: {saslname}")
    return name.replace("=3D", "=")


def _extensions(text: str) -> dict[str, str]:
    out = {}
    for item in text.split(",")[1:]:
        key, _, value = item.partition("=")
        out[key] = value
    return out


class ScramServer:
    """One SCRAM exchange for one connection."""

    def __init__(
        self,
        mechanism: str,
        credentials: ScramCredentialSource,
        server_nonce: Callable[[], str] = lambda: secrets.token_urlsafe(24),
    ) -> None:
        if mechanism not in SCRAM_MECHANISMS:
            raise ValueError(f"unknown SCRAM mechanism {mechanism!r}")
        self.mechanism = mechanism
        self._hash = SCRAM_MECHANISMS[mechanism][0]
        self._credentials = credentials
        self._server_nonce = server_nonce
        self.username: str | None = None  # the authenticated user, once complete
        self.complete = False
        self._user: str | None = None
        self._first_bare = ""
        self._gs2_header = ""
        self._server_first = ""
        self._nonce = ""
        self._stored_key = b""
        self._server_key = b""

    def evaluate(self, token: bytes) -> bytes:
        if self.complete:
            raise SaslAuthenticationFailed(f"SASL/{self.mechanism} exchange already completed")
        if not self._server_first:
            return self._client_first(token)
        return self._client_final(token)

    def _client_first(self, token: bytes) -> bytes:
        message = _ascii(token, "client first")
        m = CLIENT_FIRST.fullmatch(message)
        if m is None:
            raise SaslCredentialsRefused(f"invalid SCRAM client first message format: {message!r}")
        user = username_of(m["saslname"])
        if _extensions(m["extensions"]).get(TOKEN_AUTH, "").lower() == "true":
            raise SaslCredentialsRefused("delegation tokens (SCRAM extension tokenauth) are not supported")
        credential = self._credentials.scram_credential(self.mechanism, user)
        if credential is None:
            raise SaslCredentialsRefused("Authentication failed: Invalid user credentials")
        authzid = m["authzid"]
        if authzid is not None and username_of(authzid) != user:
            raise SaslAuthenticationFailed(
                "Authentication failed: Client requested an authorization id that is different from username"
            )
        if credential.iterations < MIN_ITERATIONS:
            raise SaslCredentialsRefused(
                f"Iterations {credential.iterations} is less than the minimum {MIN_ITERATIONS} "
                f"for {self.mechanism}"
            )
        self._user = user
        self._gs2_header = message[: m.start("bare")]
        self._first_bare = m["bare"]
        self._nonce = m["nonce"] + self._server_nonce()
        self._stored_key = credential.stored_key
        self._server_key = credential.server_key
        salt = base64.b64encode(credential.salt).decode()
        self._server_first = f"r={self._nonce},s={salt},i={credential.iterations}"
        return self._server_first.encode()

    def _client_final(self, token: bytes) -> bytes:
        message = _ascii(token, "client final")
        m = CLIENT_FINAL.fullmatch(message)
        if m is None:
            # Not quoted: the message carries the client proof, which has no place in a log.
            raise SaslCredentialsRefused("invalid SCRAM client final message format")
        if m["nonce"] != self._nonce:
            raise SaslCredentialsRefused("Invalid client nonce in the final client message.")
        if base64.b64decode(m["channel"]) != self._gs2_header.encode():
            raise SaslCredentialsRefused("channel binding does not repeat the gs2 header")
        try:
            proof = base64.b64decode(m["proof"], validate=True)
        except binascii.Error:
            raise SaslCredentialsRefused("invalid SCRAM client proof") from None
        auth_message = f"{self._first_bare},{self._server_first},{m['without_proof']}".encode()
        client_signature = hmac.digest(self._stored_key, auth_message, self._hash)
        if len(proof) != len(client_signature):
            raise SaslCredentialsRefused("Invalid client credentials")
        client_key = bytes(a ^ b for a, b in zip(proof, client_signature, strict=True))
        if not hmac.compare_digest(hashlib.new(self._hash, client_key).digest(), self._stored_key):
            raise SaslCredentialsRefused("Invalid client credentials")
        server_signature = hmac.digest(self._server_key, auth_message, self._hash)
        self.username = self._user
        self.complete = True
        return b"v=" + base64.b64encode(server_signature)


def _ascii(token: bytes, what: str) -> str:
    try:
        return token.decode("ascii")
    except UnicodeDecodeError:
        raise SaslCredentialsRefused(f"SCRAM {what} message is not ASCII") from None
