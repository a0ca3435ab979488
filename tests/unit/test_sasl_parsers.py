"""The SASL parsers and exchanges without a network: JAAS, PLAIN, SCRAM (RFC 7677's vector and
kafka-python's SCRAM client), the failure limit per IP, DN rendering and Kafka's mapping rules."""

from __future__ import annotations

import base64
import contextlib
import datetime

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.net.sasl.scram import ScramClient

from kcoord.security.authenticator import (
    AuthenticationFailure,
    FailedAuthentications,
    SaslAuthenticator,
    SaslSettings,
    State,
)
from kcoord.security.credentials import (
    ScramCredential,
    credential_from_salted_password,
    salted_password,
)
from kcoord.security.distinguished_names import rfc2253_name
from kcoord.security.errors import SaslAuthenticationFailed, SaslCredentialsRefused
from kcoord.security.jaas import JaasConfigError, parse_jaas_config
from kcoord.security.sasl_plain import PlainServer, parse_plain_token, plain_users
from kcoord.security.scram import ScramServer
from kcoord.security.ssl_principal import SslPrincipalMapper

PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"


class Credentials:
    """An in-memory ScramCredentialSource."""

    def __init__(self) -> None:
        self.creds: dict[tuple[str, str], ScramCredential] = {}

    def add(
        self, mechanism: str, user: str, password: str, salt: bytes = b"salt-1234", iterations: int = 4096
    ) -> None:
        salted = salted_password(mechanism, password.encode(), salt, iterations)
        self.creds[(mechanism, user)] = credential_from_salted_password(mechanism, salt, salted, iterations)

    def scram_credential(self, mechanism: str, user: str) -> ScramCredential | None:
        return self.creds.get((mechanism, user))


# --- JAAS ---------------------------------------------------------------------------------------
def test_jaas_several_options_quoting_and_modules() -> None:
    text = (
        f'{PLAIN_MODULE} required\n  username="admin" password="a\\"b;c"\n user_alice=alice-secret ;'
        " org.example.Other optional debug=true;"
    )
    first, second = parse_jaas_config(text)
    assert first.class_name == PLAIN_MODULE and first.flag == "required"
    assert first.options == {"username": "admin", "password": 'a"b;c', "user_alice": "alice-secret"}
    assert (second.class_name, second.flag, second.options) == (
        "org.example.Other",
        "optional",
        {"debug": "true"},
    )


@pytest.mark.parametrize(
    "text",
    [
        "",
        f"{PLAIN_MODULE} required user_a=1",  # no ';'
        f"{PLAIN_MODULE} mandatory user_a=1;",  # unknown flag
        f'{PLAIN_MODULE} required user_a="unterminated;',
        f"{PLAIN_MODULE} required user_a;",
        f"{PLAIN_MODULE} required user_a=1 user_a=2;",
    ],
)
def test_jaas_refuses_malformed(text: str) -> None:
    with pytest.raises(JaasConfigError):
        parse_jaas_config(text)


def test_plain_users_from_jaas() -> None:
    users = plain_users(
        f'{PLAIN_MODULE} required username="admin" password="x" user_admin="x" user_alice="s";'
    )
    assert users == {"admin": "x", "alice": "s"}
    with pytest.raises(ValueError, match="has no org\\.apache\\.kafka"):
        plain_users("org.example.Other required;")


# --- PLAIN --------------------------------------------------------------------------------------
def test_plain_tokens_as_kafka() -> None:
    assert parse_plain_token(b"\0alice\0pw") == ("", "alice", "pw")
    with pytest.raises(SaslAuthenticationFailed, match="expected 3 tokens, got 2"):
        parse_plain_token(b"alice\0pw")
    with pytest.raises(SaslAuthenticationFailed, match="expected 3 tokens, got 4"):
        parse_plain_token(b"a\0b\0c\0d\0e")
    with pytest.raises(SaslAuthenticationFailed, match="username not specified"):
        parse_plain_token(b"a\0\0pw")
    with pytest.raises(SaslAuthenticationFailed, match="password not specified"):
        parse_plain_token(b"\0alice\0")
    server = PlainServer({"alice": "pw"})
    with pytest.raises(SaslAuthenticationFailed, match="Invalid username or password"):
        server.evaluate(b"\0alice\0wrong")
    with pytest.raises(SaslAuthenticationFailed, match="Invalid username or password"):
        PlainServer({"alice": "pw"}).evaluate(b"\0mallory\0pw")
    with pytest.raises(SaslAuthenticationFailed, match="authorization id that is different"):
        PlainServer({"alice": "pw"}).evaluate(b"bob\0alice\0pw")
    assert server.evaluate(b"alice\0alice\0pw") == b"" and server.complete and server.username == "alice"


# --- SCRAM --------------------------------------------------------------------------------------
def test_scram_sha256_rfc7677_vector() -> None:
    creds = Credentials()
    salt = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
    creds.add("SCRAM-SHA-256", "user", "pencil", salt=salt, iterations=4096)
    server = ScramServer("SCRAM-SHA-256", creds, server_nonce=lambda: "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0")
    first = server.evaluate(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO")
    assert first == b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
    final = server.evaluate(
        b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
        b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
    )
    assert final == b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
    assert server.complete and server.username == "user"


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_with_kafka_pythons_client(mechanism: str) -> None:
    creds = Credentials()
    creds.add(mechanism, "alice", "alice-secret")
    client = ScramClient("alice", "alice-secret", mechanism)
    server = ScramServer(mechanism, creds)
    client.process_server_first_message(server.evaluate(client.first_message()))
    client.process_server_final_message(server.evaluate(client.final_message()))  # checks the signature
    assert server.username == "alice"


@pytest.mark.parametrize(
    ("password", "user", "error"),
    [
        ("wrong", "alice", "Invalid client credentials"),
        ("alice-secret", "mallory", "Invalid user credentials"),
    ],
)
def test_scram_refuses_bad_credentials(password: str, user: str, error: str) -> None:
    creds = Credentials()
    creds.add("SCRAM-SHA-512", "alice", "alice-secret")
    client = ScramClient(user, password, "SCRAM-SHA-512")
    server = ScramServer("SCRAM-SHA-512", creds)
    with pytest.raises(SaslCredentialsRefused, match=error):
        client.process_server_first_message(server.evaluate(client.first_message()))
        server.evaluate(client.final_message())
    assert not server.complete


@pytest.mark.parametrize(
    ("first", "final", "error"),
    [
        (b"y,,n=alice,r=abc", None, "client first message format"),  # channel binding flag
        (b"n,,n=alice,r=abc,tokenauth=true", None, "tokenauth"),
        (b"n,,n=al=ice,r=abc", None, "client first message format"),
        (b"n,a=bob,n=alice,r=abc", None, "different from username"),
        (b"n,,n=alice,r=abc", b"c=biws,r=abcX,p=AAAA", "nonce"),
        (b"n,,n=alice,r=abc", b"c=eSws,r={nonce},p=AAAA", "channel binding"),
        (b"n,,n=alice,r=abc", b"c=biws,r={nonce}", "client final message format"),
        (b"n,,n=alice,r=abc", b"c=biws,r={nonce},p=AAAA", "Invalid client credentials"),
        (b"n,,n=\xffalice,r=abc", None, "not ASCII"),
    ],
)
def test_scram_refuses_malformed_messages(first: bytes, final: bytes | None, error: str) -> None:
    creds = Credentials()
    creds.add("SCRAM-SHA-256", "alice", "alice-secret")
    server = ScramServer("SCRAM-SHA-256", creds, server_nonce=lambda: "SRV")
    with pytest.raises((SaslCredentialsRefused, SaslAuthenticationFailed), match=error):
        server.evaluate(first)
        assert final is not None
        server.evaluate(final.replace(b"{nonce}", b"abcSRV"))


def test_scram_refuses_weak_iterations_and_saslname_escapes() -> None:
    creds = Credentials()
    creds.add("SCRAM-SHA-256", "a,b=c", "pw", iterations=1000)
    with pytest.raises(SaslCredentialsRefused, match="less than the minimum 4096"):
        ScramServer("SCRAM-SHA-256", creds).evaluate(b"n,,n=a=2Cb=3Dc,r=abc")


# --- the authenticator: states, messages, the limit per IP -------------------------------------
def _settings(max_per_ip: int = 2, now: list[float] | None = None) -> SaslSettings:
    clock = now if now is not None else [0.0]
    creds = Credentials()
    creds.add("SCRAM-SHA-512", "alice", "alice-secret")
    return SaslSettings(
        "SASL_SSL",
        ("PLAIN", "SCRAM-SHA-512"),
        {"alice": "alice-secret"},
        creds,
        FailedAuthentications(max_per_ip, 60_000, now=lambda: clock[0]),
    )


def test_authenticator_states_and_kafka_messages() -> None:
    auth = SaslAuthenticator(_settings(), "10.0.0.1")
    assert auth.unexpected(18) is None and auth.unexpected(17) is None
    assert auth.unexpected(3) == "during SASL handshake"
    assert not auth.handshake("GSSAPI") and auth.state is State.HANDSHAKE
    assert auth.handshake("SCRAM-SHA-512")
    assert auth.unexpected(18) == "during SASL authentication" and auth.unexpected(36) is None
    client = ScramClient("mallory", "x", "SCRAM-SHA-512")
    with pytest.raises(AuthenticationFailure) as e:
        auth.authenticate(client.first_message())
    # The reason stays in the log: the client is not told whether the user exists.
    assert e.value.message == (
        "Authentication failed during authentication due to invalid credentials with SASL mechanism "
        "SCRAM-SHA-512"
    )
    assert "Invalid user credentials" in e.value.detail
    assert auth.state is State.FAILED


def test_reauthentication_keeps_mechanism_and_principal() -> None:
    settings = _settings()
    settings.session_lifetime_ms["PLAIN"] = 1500
    first = SaslAuthenticator(settings, "10.0.0.9")
    first.handshake("PLAIN")
    first.authenticate(b"\0alice\0alice-secret")
    assert first.principal is not None and first.session_lifetime_ms == 1500
    previous = ("PLAIN", first.principal)
    again = SaslAuthenticator(settings, "10.0.0.9", previous)
    again.handshake("PLAIN")
    again.authenticate(b"\0alice\0alice-secret")
    assert again.complete and again.session_lifetime_ms == 1500
    other = SaslAuthenticator(settings, "10.0.0.9", previous)
    other.handshake("SCRAM-SHA-512")
    with pytest.raises(
        AuthenticationFailure, match="not supported for re-authentication of mechanism 'PLAIN'"
    ):
        other.authenticate(ScramClient("alice", "alice-secret", "SCRAM-SHA-512").first_message())
    settings.plain_users["bob"] = "bob-secret"
    bob = SaslAuthenticator(settings, "10.0.0.9", previous)
    bob.handshake("PLAIN")
    with pytest.raises(AuthenticationFailure, match="Cannot change principals during re-authentication"):
        bob.authenticate(b"\0bob\0bob-secret")


def test_failures_per_ip_are_limited_then_forgotten() -> None:
    now = [0.0]
    settings = _settings(max_per_ip=2, now=now)

    def attempt(password: str, ip: str = "10.0.0.1") -> str | None:
        auth = SaslAuthenticator(settings, ip)
        auth.handshake("PLAIN")
        try:
            auth.authenticate(b"\0alice\0" + password.encode())
        except AuthenticationFailure as e:
            return e.detail
        return None

    assert attempt("x") == attempt("y") == "Authentication failed: Invalid username or password"
    # The third attempt from that IP is refused unchecked, even with the right password...
    assert attempt("alice-secret") == "too many failed authentications from this address"
    assert attempt("alice-secret", ip="10.0.0.2") is None  # ...other addresses are not affected
    now[0] += 61  # the window passed
    assert attempt("alice-secret") is None


def test_failure_tracking_stays_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    import kcoord.security.authenticator as authenticator

    monkeypatch.setattr(authenticator, "MAX_TRACKED_IPS", 3)
    now = [0.0]
    failures = FailedAuthentications(1, 60_000, now=lambda: now[0])
    for i in range(5):
        now[0] += 1
        failures.record(f"10.0.0.{i}")
    assert len(failures._failures) == 3
    assert failures.blocked("10.0.0.4") and not failures.blocked("10.0.0.0")  # the oldest forgotten


# --- mutual TLS: the DN and Kafka's mapping rules ----------------------------------------------
def _certificate_name(*rdns: x509.RelativeDistinguishedName) -> x509.Name:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name(list(rdns))
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(1)
        .not_valid_before(now)
        .not_valid_after(now + datetime.timedelta(days=1))
        .sign(key, hashes.SHA256())
    )
    return cert.subject


def test_dn_rendered_as_javas_x500principal() -> None:
    def rdn(oid: x509.ObjectIdentifier, value: str) -> x509.RelativeDistinguishedName:
        return x509.RelativeDistinguishedName([x509.NameAttribute(oid, value)])

    name = _certificate_name(
        rdn(NameOID.COUNTRY_NAME, "US"),
        rdn(NameOID.ORGANIZATION_NAME, "Acme, Inc."),
        rdn(NameOID.EMAIL_ADDRESS, "a@b.c"),
        rdn(NameOID.COMMON_NAME, " alice+admin"),
    )
    # Java: new X500Principal(...).getName() (RFC 2253; emailAddress has no RFC 2253 keyword, so
    # it is its OID and the DER of the IA5String value in hex).
    assert (
        rfc2253_name(name) == "CN=\\ alice\\+admin,1.2.840.113549.1.9.1=#16056140622e63,O=Acme\\, Inc.,C=US"
    )


def test_kafka_principal_mapping_rules() -> None:
    # The cases of Kafka's SslPrincipalMapperTest.
    mapper = SslPrincipalMapper(
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,"
        "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L,"
        "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U, DEFAULT"
    )
    assert mapper.name("CN=Duke,OU=ServiceUsers,O=Org,C=US") == "Duke"
    assert mapper.name("CN=Duke,OU=SME,O=mycp,L=Fulton,ST=MD,C=US") == "duke@sme"
    assert mapper.name("cn=duke,ou=JavaSoft,o=Sun Microsystems") == "DUKE"
    assert mapper.name("OU=JavaSoft,O=Sun Microsystems,C=US") == "OU=JavaSoft,O=Sun Microsystems,C=US"
    with pytest.raises(ValueError, match="No rules apply"):
        SslPrincipalMapper("RULE:^CN=(.*)$/$1/").name("OU=x")
    for bad in ("DEFAULT, RULE:x", "RULE:^CN=(.*)$/$1/X", "nonsense"):
        with pytest.raises(ValueError, match="Invalid rule"):
            SslPrincipalMapper(bad)


# --- hostile input: only the parsers' own errors, whatever the bytes -----------------------------
@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=200))
def test_plain_any_bytes(token: bytes) -> None:
    with contextlib.suppress(SaslAuthenticationFailed):
        PlainServer({"alice": "pw"}).evaluate(token)


def _pieces(*pieces: str) -> st.SearchStrategy[str]:
    return st.lists(st.sampled_from(pieces), max_size=60).map("".join)


_SCRAM_TEXT = _pieces(*"nacrpsiv=,biwsABC+/0123456789\x00\xff", "alice", "=2C", "=3D", "SRV")


@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=120), _SCRAM_TEXT)
def test_scram_any_messages(raw: bytes, shaped: str) -> None:
    creds = Credentials()
    creds.add("SCRAM-SHA-256", "alice", "pw")
    for first in (raw, ("n,,n=alice,r=abc" + shaped).encode("utf-8", "surrogateescape")):
        server = ScramServer("SCRAM-SHA-256", creds, server_nonce=lambda: "SRV")
        with contextlib.suppress(SaslAuthenticationFailed, SaslCredentialsRefused):
            server.evaluate(first)
            server.evaluate(("c=biws,r=abcSRV" + shaped).encode("utf-8", "surrogateescape"))
            server.evaluate(raw)


@settings(max_examples=500, deadline=None)
@given(_pieces(*'ab_=;" \\\n.', "required", "user_x", "org.Module"))
def test_jaas_any_text(text: str) -> None:
    with contextlib.suppress(JaasConfigError):
        parse_jaas_config(text)


_RULE_TEXT = _pieces("RULE:", "DEFAULT", "/", ",", " ", "^CN=(.*)$", "$1", "L", "U", "(")


@settings(max_examples=300, deadline=None)
@given(
    st.one_of(st.text(max_size=60), _RULE_TEXT),
    st.text(max_size=40),
)
def test_mapping_rules_any_text(rules: str, dn: str) -> None:
    try:
        mapper = SslPrincipalMapper(rules)
    except ValueError:
        return
    with contextlib.suppress(ValueError):
        mapper.name(dn)
