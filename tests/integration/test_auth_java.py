"""The Java client (kafka-clients 4.3) on secured listeners: SASL_SSL with PLAIN, SSL with mutual
TLS (PEM stores on both sides), SASL_SSL with SCRAM-SHA-512 and SCRAM-SHA-256 for users the Java
Admin created (alterUserScramCredentials), and wrong passwords (SaslAuthenticationException with
Kafka's message, the broker stays up)."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.harness import track_broker
from tests.integration.test_java import classpath, probe_command
from tests.secure_broker import CLIENT_DN, USERS, SecureBroker, make_secure_broker

pytestmark = pytest.mark.java


@pytest.fixture(scope="module")
def java() -> str:
    exe = shutil.which("java")
    if exe is None:
        pytest.skip("java is not installed")
    return exe


@pytest.fixture(scope="module")
def secure(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureBroker]:
    sb = make_secure_broker(
        tmp_path_factory.mktemp("secure-java"),
        {"group.initial.rebalance.delay.ms": "0", "sasl.failed.authentication.max.per.ip": "1000"},
    )
    sb.broker.start()
    yield sb
    sb.broker.stop()


def probe(java: str, *args: str) -> str:
    proc = subprocess.run(
        [*probe_command(java, classpath("4.3.0"), "AuthProbe.java"), *args],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert proc.returncode == 0 and "PROBE OK" in proc.stdout, (proc.stdout + proc.stderr)[-8000:]
    return proc.stdout


def sasl_ssl(sb: SecureBroker, password: str) -> list[str]:
    return [
        "security.protocol=SASL_SSL",
        "sasl.mechanism=PLAIN",
        "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required "
        f'username="alice" password="{password}";',
        "ssl.truststore.type=PEM",
        f"ssl.truststore.location={sb.ca_file}",
    ]


@pytest.mark.timeout(900)  # the first run on a machine downloads the client jars
def test_java_sasl_ssl_plain(
    java: str, secure: SecureBroker, unique_topic: str, request: pytest.FixtureRequest
) -> None:
    track_broker(request, secure.broker)
    probe(java, "roundtrip", secure.bootstrap("SASL_SSL"), unique_topic, *sasl_ssl(secure, USERS["alice"]))
    assert "listener=SASL_SSL mechanism=PLAIN" in secure.broker.log_text()


def test_java_ssl_mutual_tls(
    java: str, secure: SecureBroker, unique_topic: str, request: pytest.FixtureRequest
) -> None:
    track_broker(request, secure.broker)
    probe(
        java,
        "roundtrip",
        secure.bootstrap("SSL"),
        unique_topic,
        "security.protocol=SSL",
        "ssl.truststore.type=PEM",
        f"ssl.truststore.location={secure.ca_file}",
        "ssl.keystore.type=PEM",
        f"ssl.keystore.location={secure.client_pem_file}",
    )
    assert f"principal='User:{CLIENT_DN}'" in secure.broker.log_text()


def test_java_wrong_password(
    java: str, secure: SecureBroker, unique_topic: str, request: pytest.FixtureRequest
) -> None:
    track_broker(request, secure.broker)
    out = probe(java, "badauth", secure.bootstrap("SASL_SSL"), *sasl_ssl(secure, "wrong"))
    assert "@@ AUTHFAIL Authentication failed: Invalid username or password" in out
    assert "SASL authentication failed" in secure.broker.log_text()
    # The broker stays up and a good client still works.
    probe(java, "roundtrip", secure.bootstrap("SASL_SSL"), unique_topic, *sasl_ssl(secure, USERS["alice"]))


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-512", "SCRAM-SHA-256"])
def test_java_scram_user_created_through_admin(
    java: str, secure: SecureBroker, unique_topic: str, request: pytest.FixtureRequest, mechanism: str
) -> None:
    track_broker(request, secure.broker)
    user = "erin-" + mechanism[-3:]
    probe(java, "scram-user", secure.bootstrap("PLAINTEXT"), user, "erin-secret", mechanism)

    def scram(password: str) -> list[str]:
        return [
            "security.protocol=SASL_SSL",
            f"sasl.mechanism={mechanism}",
            "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
            f'username="{user}" password="{password}";',
            "ssl.truststore.type=PEM",
            f"ssl.truststore.location={secure.ca_file}",
        ]

    probe(java, "roundtrip", secure.bootstrap("SASL_SSL"), unique_topic, *scram("erin-secret"))
    assert f"principal=User:{user}" in secure.broker.log_text()
    out = probe(java, "badauth", secure.bootstrap("SASL_SSL"), *scram("wrong"))
    assert (
        "@@ AUTHFAIL Authentication failed during authentication due to invalid credentials with SASL "
        f"mechanism {mechanism}" in out
    )


@pytest.mark.timeout(600)
def test_spark_connector_pattern_over_sasl_ssl(
    java: str, secure: SecureBroker, request: pytest.FixtureRequest
) -> None:
    """Spark's Kafka connector call sequences (tests/java/SparkConnectorProbe.java) with the
    kafka.* options a Spark job passes for SASL_SSL, on the client Spark 4.0 ships (3.9). The 4.3
    client's SASL_SSL is every AuthProbe test's, and its Spark call sequence test_spark_java's."""
    version = "3.9.0"
    track_broker(request, secure.broker)
    proc = subprocess.run(
        [
            *probe_command(java, classpath(version), "SparkConnectorProbe.java"),
            secure.bootstrap("SASL_SSL"),
            f"spark-sasl-{version}",
            *sasl_ssl(secure, USERS["alice"]),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0 and "PROBE OK" in proc.stdout, (proc.stdout + proc.stderr)[-8000:]


def test_java_reauthenticates(java: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    """KIP-368: with connections.max.reauth.ms=2000 the Java client re-authenticates on its
    connections and its requests keep being served (none is closed for an expired session)."""
    sb = make_secure_broker(tmp_path / "reauth", {"connections.max.reauth.ms": "2000"})
    sb.broker.start()
    track_broker(request, sb.broker)
    try:
        probe(java, "slowproduce", sb.bootstrap("SASL_SSL"), "reauth-java", *sasl_ssl(sb, USERS["alice"]))
        log = sb.broker.log_text()
        assert "SASL client re-authenticated" in log and "principal=User:alice" in log
        assert "SASL session expired" not in log
    finally:
        sb.broker.stop()
