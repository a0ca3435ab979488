"""The TLS side of SSL and SASL_SSL listeners under Kafka's ``ssl.*`` names, PEM only.

The key and certificate chain come from ``ssl.keystore.location`` (one PEM file holding both) or
inline from ``ssl.keystore.key`` + ``ssl.keystore.certificate.chain``; an encrypted key takes
``ssl.key.password``. Client certificates are checked against ``ssl.truststore.location`` or
inline ``ssl.truststore.certificates`` when ``ssl.client.auth`` is requested or required.
JKS and PKCS12 stores are refused (SKIPPED.md): convert them to PEM with keytool/openssl.
"""

from __future__ import annotations

import os
import ssl
import tempfile
from dataclasses import dataclass

TLS_VERSIONS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}


@dataclass(frozen=True)
class TlsSettings:
    keystore_type: str
    keystore_location: str | None
    keystore_key: str | None
    keystore_certificate_chain: str | None
    key_password: str | None
    truststore_type: str
    truststore_location: str | None
    truststore_certificates: str | None
    client_auth: str
    enabled_protocols: str
    cipher_suites: str


def check_store_type(name: str, value: str) -> str:
    if value.upper() != "PEM":
        raise ValueError(
            f"{name}={value} is not supported: kcoord reads PEM stores only (set {name}=PEM; "
            "convert a JKS or PKCS12 store with keytool -importkeystore and openssl pkcs12)"
        )
    return "PEM"


def enabled_versions(protocols: str) -> tuple[ssl.TLSVersion, ssl.TLSVersion]:
    names = [p.strip() for p in protocols.split(",") if p.strip()]
    unknown = [n for n in names if n not in TLS_VERSIONS]
    if unknown or not names:
        raise ValueError(
            f"ssl.enabled.protocols={protocols!r}: kcoord serves {', '.join(TLS_VERSIONS)} "
            "(older TLS versions are insecure)"
        )
    versions = sorted(TLS_VERSIONS[n] for n in names)
    return versions[0], versions[-1]


def server_context(settings: TlsSettings, listener: str) -> ssl.SSLContext:
    """The listener's SSLContext; ValueError naming the setting when it cannot be built."""
    check_store_type("ssl.keystore.type", settings.keystore_type)
    check_store_type("ssl.truststore.type", settings.truststore_type)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version, ctx.maximum_version = enabled_versions(settings.enabled_protocols)
    if settings.cipher_suites:
        try:
            ctx.set_ciphers(settings.cipher_suites)
        except ssl.SSLError as e:
            raise ValueError(f"listener {listener}: ssl.cipher.suites: {e}") from None
    _load_key(ctx, settings, listener)
    if settings.client_auth != "none":
        if settings.truststore_location:
            try:
                ctx.load_verify_locations(cafile=settings.truststore_location)
            except (OSError, ssl.SSLError) as e:
                raise ValueError(f"listener {listener}: ssl.truststore.location: {e}") from None
        elif settings.truststore_certificates:
            try:
                ctx.load_verify_locations(cadata=settings.truststore_certificates)
            except ssl.SSLError as e:
                raise ValueError(f"listener {listener}: ssl.truststore.certificates: {e}") from None
        else:
            raise ValueError(
                f"listener {listener}: ssl.client.auth={settings.client_auth} needs "
                "ssl.truststore.location or ssl.truststore.certificates"
            )
        ctx.verify_mode = ssl.CERT_REQUIRED if settings.client_auth == "required" else ssl.CERT_OPTIONAL
    return ctx


def _load_key(ctx: ssl.SSLContext, settings: TlsSettings, listener: str) -> None:
    password = settings.key_password
    if settings.keystore_location:
        try:
            ctx.load_cert_chain(settings.keystore_location, password=password)
        except (OSError, ssl.SSLError) as e:
            raise ValueError(f"listener {listener}: ssl.keystore.location: {e}") from None
        return
    if not (settings.keystore_key and settings.keystore_certificate_chain):
        raise ValueError(
            f"listener {listener} uses TLS but has no key: set ssl.keystore.location, or "
            "ssl.keystore.key and ssl.keystore.certificate.chain (PEM)"
        )
    # The ssl module loads keys from files only: a private file, removed at once.
    fd, path = tempfile.mkstemp(prefix="kcoord-key-", suffix=".pem")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(settings.keystore_key.strip() + "\n" + settings.keystore_certificate_chain.strip() + "\n")
        ctx.load_cert_chain(path, password=password)
    except ssl.SSLError as e:
        raise ValueError(
            f"listener {listener}: ssl.keystore.key / ssl.keystore.certificate.chain: {e}"
        ) from None
    finally:
        os.unlink(path)
