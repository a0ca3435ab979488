"""Each listener's security, built from the configuration once at start-up.

A listener's protocol (``listener.security.protocol.map``) decides what its connections go
through: TLS (SSL, SASL_SSL) with the listener's ``ssl.*`` settings, SASL (SASL_PLAINTEXT,
SASL_SSL) with its mechanisms and users; ``listener.name.<listener>.*`` overrides the
broker-wide settings, as in Kafka.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass

import structlog

from kcoord.config import BrokerConfig
from kcoord.security.authenticator import FailedAuthentications, SaslSettings
from kcoord.security.credentials import ScramCredentialSource
from kcoord.security.listeners import SASL_PROTOCOLS, TLS_PROTOCOLS
from kcoord.security.sasl_plain import plain_users
from kcoord.security.ssl_principal import SslPrincipalMapper
from kcoord.security.tls import TlsSettings, server_context

log = structlog.get_logger(__name__)


@dataclass(frozen=True)
class ListenerSecurity:
    name: str
    protocol: str
    ssl_context: ssl.SSLContext | None
    principal_mapper: SslPrincipalMapper | None  # names mutual-TLS clients on SSL listeners
    sasl: SaslSettings | None
    sasl_max_receive_size: int
    failed_authentication_delay_s: float


def _client_auth(config: BrokerConfig, listener: str, protocol: str) -> str:
    """``ssl.client.auth``; on SASL_SSL only its listener-prefixed form counts, as in Kafka
    (ChannelBuilders), which warns when the broker-wide one would have asked for more."""
    if protocol != "SASL_SSL":
        return str(config.listener_setting(listener, "ssl_client_auth"))
    prefixed = config.listener_name.get(f"{listener.lower()}.ssl.client.auth")
    if prefixed is not None:
        return str(config.listener_setting(listener, "ssl_client_auth"))
    if config.ssl_client_auth != "none":
        log.warning(
            "ssl.client.auth applies only to SSL listeners; use listener.name.<listener>.ssl.client.auth "
            "for a SASL_SSL listener",
            listener=listener,
        )
    return "none"


def _tls(config: BrokerConfig, listener: str, protocol: str) -> ssl.SSLContext:
    def get(field: str) -> object:
        return config.listener_setting(listener, field)

    settings = TlsSettings(
        keystore_type=str(get("ssl_keystore_type")),
        keystore_location=get("ssl_keystore_location"),  # type: ignore[arg-type]
        keystore_key=get("ssl_keystore_key"),  # type: ignore[arg-type]
        keystore_certificate_chain=get("ssl_keystore_certificate_chain"),  # type: ignore[arg-type]
        key_password=get("ssl_key_password"),  # type: ignore[arg-type]
        truststore_type=str(get("ssl_truststore_type")),
        truststore_location=get("ssl_truststore_location"),  # type: ignore[arg-type]
        truststore_certificates=get("ssl_truststore_certificates"),  # type: ignore[arg-type]
        client_auth=_client_auth(config, listener, protocol),
        enabled_protocols=str(get("ssl_enabled_protocols")),
        cipher_suites=str(get("ssl_cipher_suites")),
    )
    return server_context(settings, listener)


def _plain_users(config: BrokerConfig, listener: str) -> dict[str, str]:
    jaas = config.listener_setting(listener, "sasl_jaas_config", "PLAIN")
    if jaas is None:
        log.warning("PLAIN is enabled but no users are configured", listener=listener)
        return {}
    try:
        return plain_users(jaas)
    except ValueError as e:
        log.warning("PLAIN is enabled but has no users", listener=listener, reason=str(e))
        return {}


def build_listener_security(
    config: BrokerConfig, scram_credentials: ScramCredentialSource
) -> dict[str, ListenerSecurity]:
    """Every listener's security; ValueError naming the setting that cannot be used."""
    failures = FailedAuthentications(
        config.sasl_failed_authentication_max_per_ip, config.sasl_failed_authentication_window_ms
    )
    out = {}
    for name, protocol in config.listener_protocols().items():
        ctx = _tls(config, name, protocol) if protocol in TLS_PROTOCOLS else None
        sasl = None
        if protocol in SASL_PROTOCOLS:
            mechanisms = tuple(str(config.listener_setting(name, "sasl_enabled_mechanisms")).split(","))
            users = _plain_users(config, name) if "PLAIN" in mechanisms else {}
            lifetimes = {
                m: int(config.listener_setting(name, "connections_max_reauth_ms", m)) for m in mechanisms
            }
            sasl = SaslSettings(name, mechanisms, users, scram_credentials, failures, lifetimes)
        mapper = None
        if protocol == "SSL":
            mapper = SslPrincipalMapper(str(config.listener_setting(name, "ssl_principal_mapping_rules")))
        out[name] = ListenerSecurity(
            name=name,
            protocol=protocol,
            ssl_context=ctx,
            principal_mapper=mapper,
            sasl=sasl,
            sasl_max_receive_size=int(config.listener_setting(name, "sasl_server_max_receive_size")),
            failed_authentication_delay_s=config.connection_failed_authentication_delay_ms / 1000,
        )
    return out
