"""Security settings under Kafka's names: listeners and their protocols, per-listener overrides
from a server.properties translated line by line, and the clear refusals."""

from __future__ import annotations

import json
import os
import ssl
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from pydantic import ValidationError

from kcoord import cli
from kcoord.config import BrokerConfig, load_toml
from kcoord.security.credentials import ScramCredential
from kcoord.server.listeners import build_listener_security

JAAS = 'org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="alice-secret";'


class NoScramCredentials:
    def scram_credential(self, mechanism: str, user: str) -> ScramCredential | None:
        return None


@pytest.fixture
def served(monkeypatch: pytest.MonkeyPatch) -> list[BrokerConfig]:
    got: list[BrokerConfig] = []
    import kcoord.logsetup
    import kcoord.server.app

    monkeypatch.setattr(kcoord.server.app, "run_broker", got.append)
    monkeypatch.setattr(kcoord.logsetup, "configure_logging", lambda *a, **k: None)
    for name in list(os.environ):
        if name.startswith("KCOORD_"):
            monkeypatch.delenv(name)
    return got


def serve(args: list[str], env: dict[str, str] | None = None) -> Any:
    return CliRunner().invoke(cli.main, ["serve", *args], env=env, catch_exceptions=False)


def test_server_properties_translate_line_by_line(served: list[BrokerConfig], tmp_path: Path) -> None:
    toml = tmp_path / "server.toml"
    toml.write_text(
        'listeners = "CLIENT://127.0.0.1:9093,INTERNAL://127.0.0.1:9094,SSL://127.0.0.1:9095"\n'
        'listener.security.protocol.map = "CLIENT:SASL_SSL,INTERNAL:SASL_PLAINTEXT"\n'
        'inter.broker.listener.name = "INTERNAL"\n'
        'sasl.enabled.mechanisms = "PLAIN,SCRAM-SHA-512"\n'
        f'"listener.name.client.plain.sasl.jaas.config" = {JAAS!r}\n'.replace("'", "'''")
        + '"listener.name.internal.sasl.enabled.mechanisms" = "SCRAM-SHA-512"\n'
        '"listener.name.ssl.ssl.client.auth" = "required"\n'
        '"ssl.keystore.location" = "/etc/kcoord/server.pem"\n'
    )
    result = serve(["--config", str(toml)])
    assert result.exit_code == 0, result.output
    (cfg,) = served
    assert cfg.listener_protocols() == {"CLIENT": "SASL_SSL", "INTERNAL": "SASL_PLAINTEXT", "SSL": "SSL"}
    assert cfg.listener_setting("CLIENT", "sasl_jaas_config", "PLAIN") == JAAS
    assert cfg.listener_setting("INTERNAL", "sasl_jaas_config", "PLAIN") is None
    assert cfg.listener_setting("INTERNAL", "sasl_enabled_mechanisms") == "SCRAM-SHA-512"
    assert cfg.listener_setting("CLIENT", "sasl_enabled_mechanisms") == "PLAIN,SCRAM-SHA-512"
    assert cfg.listener_setting("SSL", "ssl_client_auth") == "required"
    assert cfg.listener_setting("CLIENT", "ssl_client_auth") == "none"


def test_listener_overrides_as_a_flag_take_json(served: list[BrokerConfig]) -> None:
    overrides = json.dumps({"sasl_plaintext.sasl.jaas.config": JAAS})
    result = serve(["--listeners", "SASL_PLAINTEXT://127.0.0.1:0", "--listener-name", overrides])
    assert result.exit_code == 0, result.output
    (cfg,) = served
    assert cfg.listener_setting("SASL_PLAINTEXT", "sasl_jaas_config", "PLAIN") == JAAS


@pytest.mark.parametrize(
    ("settings", "error"),
    [
        ({"listeners": "CLIENT://:9092"}, "No security protocol defined for listener CLIENT"),
        ({"listener_security_protocol_map": "A:TLS"}, "'TLS' is not a security protocol"),
        (
            {"inter_broker_listener_name": "REPLICATION"},
            "inter.broker.listener.name REPLICATION is not a listener",
        ),
        (
            {"security_inter_broker_protocol": "SSL"},
            "security.inter.broker.protocol SSL: no listener uses it",
        ),
        (
            {"inter_broker_listener_name": "PLAINTEXT", "security_inter_broker_protocol": "PLAINTEXT"},
            "Only one of inter.broker.listener.name and security.inter.broker.protocol",
        ),
        ({"listener_name": {"sasl_ssl.ssl.client.auth": "required"}}, "sasl_ssl is not a listener"),
        ({"listener_name": {"plaintext.log.dirs": "/x"}}, "log.dirs is not a per-listener setting"),
        ({"listener_name": {"plaintext.ssl.client.auth": "sometimes"}}, "ssl_client_auth"),
        ({"ssl_keystore_type": "JKS"}, "ssl.keystore.type=JKS is not supported"),
        ({"ssl_truststore_type": "PKCS12"}, "ssl.truststore.type=PKCS12 is not supported"),
        ({"ssl_enabled_protocols": "TLSv1.1"}, "older TLS versions are insecure"),
        ({"sasl_enabled_mechanisms": "GSSAPI"}, "GSSAPI is not supported by kcoord"),
        ({"sasl_enabled_mechanisms": "OAUTHBEARER"}, "OAUTHBEARER is not supported by kcoord"),
        ({"sasl_enabled_mechanisms": "DIGEST-MD5"}, "unknown SASL mechanism"),
        ({"sasl_jaas_config": "PlainLoginModule required user_a=1"}, "expected ';'"),
        ({"connections_max_reauth_ms": -1}, "greater than or equal to 0"),
        ({"ssl_principal_mapping_rules": "RULE:x"}, "Invalid rule"),
    ],
)
def test_refused_clearly(settings: dict[str, Any], error: str) -> None:
    with pytest.raises(ValidationError, match=error):
        BrokerConfig(**settings)


def test_inter_broker_settings_accepted_when_they_name_what_exists() -> None:
    BrokerConfig(listeners="PLAINTEXT://:0,SSL://:0", inter_broker_listener_name="ssl")
    BrokerConfig(listeners="PLAINTEXT://:0,SSL://:0", security_inter_broker_protocol="SSL")
    BrokerConfig(listeners="SASL_SSL://:0", sasl_mechanism_inter_broker_protocol="PLAIN")
    with pytest.raises(ValidationError, match="PLAIN is not enabled on listener SASL_SSL"):
        BrokerConfig(
            listeners="SASL_SSL://:0",
            inter_broker_listener_name="SASL_SSL",
            sasl_mechanism_inter_broker_protocol="PLAIN",
            listener_name={"sasl_ssl.sasl.enabled.mechanisms": "SCRAM-SHA-512"},
        )
    with pytest.raises(ValidationError, match="GSSAPI is not enabled on any SASL listener"):
        BrokerConfig(listeners="PLAINTEXT://:0", sasl_mechanism_inter_broker_protocol="GSSAPI")


def test_tls_listener_without_a_key_is_refused_at_start() -> None:
    cfg = BrokerConfig(listeners="SSL://127.0.0.1:0")
    with pytest.raises(ValueError, match="listener SSL uses TLS but has no key"):
        build_listener_security(cfg, NoScramCredentials())
    cfg = BrokerConfig(listeners="SSL://127.0.0.1:0", ssl_keystore_location="/nonexistent.pem")
    with pytest.raises(ValueError, match=r"ssl\.keystore\.location"):
        build_listener_security(cfg, NoScramCredentials())


def test_inline_pem_key_with_password_and_client_auth_needs_a_truststore(tmp_path: Path) -> None:
    trustme = pytest.importorskip("trustme")
    from cryptography.hazmat.primitives import serialization

    ca = trustme.CA()
    cert = ca.issue_cert("localhost")
    key = serialization.load_pem_private_key(cert.private_key_pem.bytes(), None)
    encrypted = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(b"key-pass"),
    ).decode()
    chain = b"".join(c.bytes() for c in cert.cert_chain_pems).decode()
    base = {
        "listeners": "SSL://127.0.0.1:0",
        "ssl_keystore_key": encrypted,
        "ssl_keystore_certificate_chain": chain,
        "ssl_key_password": "key-pass",
    }
    security = build_listener_security(BrokerConfig(**base), NoScramCredentials())
    assert security["SSL"].ssl_context is not None
    with pytest.raises(ValueError, match=r"ssl\.client\.auth=required needs ssl\.truststore"):
        build_listener_security(BrokerConfig(**base, ssl_client_auth="required"), NoScramCredentials())
    security = build_listener_security(
        BrokerConfig(
            **base, ssl_client_auth="requested", ssl_truststore_certificates=ca.cert_pem.bytes().decode()
        ),
        NoScramCredentials(),
    )
    assert security["SSL"].principal_mapper is not None
    with pytest.raises(ValueError, match=r"ssl\.keystore\.key"):
        build_listener_security(BrokerConfig(**{**base, "ssl_key_password": "wrong"}), NoScramCredentials())


def test_load_toml_collects_listener_name_keys(tmp_path: Path) -> None:
    toml = tmp_path / "a.toml"
    toml.write_text(
        '"listener.name.a.ssl.client.auth" = "required"\n[listener.name.b]\n"ssl.client.auth" = "none"\n'
    )
    assert load_toml(toml) == {
        "listener_name": {"a.ssl.client.auth": "required", "b.ssl.client.auth": "none"}
    }


def test_jaas_lookup_order_and_mechanisms_per_listener() -> None:
    other = 'org.apache.kafka.common.security.plain.PlainLoginModule required user_bob="b";'
    cfg = BrokerConfig(
        listeners="A://127.0.0.1:0,B://127.0.0.1:0",
        listener_security_protocol_map="A:SASL_PLAINTEXT,B:SASL_PLAINTEXT",
        sasl_jaas_config=other,
        listener_name={
            "a.plain.sasl.jaas.config": JAAS,
            "b.sasl.enabled.mechanisms": "SCRAM-SHA-512",
            "a.plain.connections.max.reauth.ms": "60000",
            "b.connections.max.reauth.ms": "120000",
        },
        connections_max_reauth_ms=30000,
    )
    security = build_listener_security(cfg, NoScramCredentials())
    # listener.name.<l>.<mechanism>.sasl.jaas.config first, then the broker-wide sasl.jaas.config.
    assert security["A"].sasl is not None and security["A"].sasl.plain_users == {"alice": "alice-secret"}
    assert security["A"].sasl.mechanisms == ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
    assert security["B"].sasl is not None and security["B"].sasl.mechanisms == ("SCRAM-SHA-512",)
    # connections.max.reauth.ms: per listener and mechanism, per listener, broker-wide.
    assert security["A"].sasl.session_lifetime_ms == {
        "PLAIN": 60000,
        "SCRAM-SHA-256": 30000,
        "SCRAM-SHA-512": 30000,
    }
    assert security["B"].sasl.session_lifetime_ms == {"SCRAM-SHA-512": 120000}
    cfg = BrokerConfig(listeners="SASL_PLAINTEXT://127.0.0.1:0", sasl_jaas_config=other)
    sasl = build_listener_security(cfg, NoScramCredentials())["SASL_PLAINTEXT"].sasl
    assert sasl is not None and sasl.plain_users == {"bob": "b"}


def test_client_auth_on_sasl_ssl_only_with_the_listener_prefix(tmp_path: Path) -> None:
    trustme = pytest.importorskip("trustme")
    ca = trustme.CA()
    pem = tmp_path / "server.pem"
    ca.issue_cert("localhost").private_key_and_cert_chain_pem.write_to_path(str(pem))
    base = {
        "listeners": "SASL_SSL://127.0.0.1:0,SSL://127.0.0.1:0",
        "ssl_keystore_location": str(pem),
        "ssl_truststore_certificates": ca.cert_pem.bytes().decode(),
    }
    # Broker-wide: the SSL listener asks for certificates, the SASL_SSL one does not (Kafka's rule).
    security = build_listener_security(BrokerConfig(**base, ssl_client_auth="required"), NoScramCredentials())
    assert security["SSL"].ssl_context.verify_mode == ssl.CERT_REQUIRED  # type: ignore[union-attr]
    assert security["SASL_SSL"].ssl_context.verify_mode == ssl.CERT_NONE  # type: ignore[union-attr]
    prefixed = BrokerConfig(**base, listener_name={"sasl_ssl.ssl.client.auth": "requested"})
    security = build_listener_security(prefixed, NoScramCredentials())
    assert security["SASL_SSL"].ssl_context.verify_mode == ssl.CERT_OPTIONAL  # type: ignore[union-attr]
    assert security["SSL"].ssl_context.verify_mode == ssl.CERT_NONE  # type: ignore[union-attr]
