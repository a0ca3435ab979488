"""A broker with every kind of listener, and the certificates and users its tests share.

Certificates are made in the test run (trustme): a CA, the broker's certificate for 127.0.0.1
and localhost, and a client certificate whose subject Kafka would render as CLIENT_DN. The broker
has four listeners: PLAINTEXT (the harness's readiness probe), SASL_PLAINTEXT, SASL_SSL and SSL
with required client certificates, configured from a TOML file written as a server.properties
translates (quoted listener.name.* keys).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import trustme
from cryptography.hazmat.primitives import serialization

from tests.harness import BrokerProcess, free_port

USERS = {"alice": "alice-secret", "bob": "bob-secret"}
# openssl x509 -noout -subject -nameopt RFC2253 prints the same (Java's X500Principal order).
CLIENT_DN = "CN=alice,OU=clients,O=kcoord tests"


@dataclass
class SecureBroker:
    broker: BrokerProcess
    ports: dict[str, int]  # listener -> port
    ca_file: Path
    client_cert_file: Path  # certificate chain of the client
    client_key_file: Path
    client_pem_file: Path  # key and chain in one file
    http_port: int  # the operations endpoint (/metrics)

    def bootstrap(self, listener: str) -> str:
        return f"127.0.0.1:{self.ports[listener]}"


def _toml_string(value: str) -> str:
    return json.dumps(value)  # a JSON string is a TOML basic string


def make_secure_broker(root: Path, extra: dict[str, str] | None = None) -> SecureBroker:
    root.mkdir(parents=True, exist_ok=True)
    ca = trustme.CA(organization_name="kcoord test CA")
    server = ca.issue_cert("127.0.0.1", "localhost")
    client = ca.issue_cert(
        "alice.clients.test",
        common_name="alice",
        organization_name="kcoord tests",
        organization_unit_name="clients",
    )
    ca_file, server_pem = root / "ca.pem", root / "server.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    server.private_key_and_cert_chain_pem.write_to_path(str(server_pem))
    client_cert, client_key, client_pem = root / "client.crt", root / "client.key", root / "client.pem"
    # PKCS#8, the one PEM key format Java's client reads (trustme writes EC keys as SEC1).
    key = serialization.load_pem_private_key(client.private_key_pem.bytes(), None).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    chain = b"".join(blob.bytes() for blob in client.cert_chain_pems)
    client_key.write_bytes(key)
    client_cert.write_bytes(chain)
    client_pem.write_bytes(key + chain)

    b = BrokerProcess(root / "data", root / "broker.log")
    ports = {
        "PLAINTEXT": b.port,
        "SASL_PLAINTEXT": free_port(),
        "SASL_SSL": free_port(),
        "SSL": free_port(),
    }
    listeners = ",".join(f"{name}://127.0.0.1:{port}" for name, port in ports.items())
    jaas = (
        "org.apache.kafka.common.security.plain.PlainLoginModule required "
        + " ".join(f'user_{u}="{p}"' for u, p in USERS.items())
        + ";"
    )
    lines = {
        "listeners": listeners,
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(server_pem),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(ca_file),
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": jaas,
        "listener.name.sasl_ssl.plain.sasl.jaas.config": jaas,
        "listener.name.ssl.ssl.client.auth": "required",
        "inter.broker.listener.name": "PLAINTEXT",
        **(extra or {}),
    }
    config = root / "server.toml"
    config.write_text("".join(f"{_toml_string(k)} = {_toml_string(v)}\n" for k, v in lines.items()))
    http_port = free_port()
    b.extra_args = [
        "--config",
        str(config),
        "--listeners",
        listeners,
        f"--http-listeners=http://127.0.0.1:{http_port}",
    ]
    return SecureBroker(b, ports, ca_file, client_cert, client_key, client_pem, http_port)
