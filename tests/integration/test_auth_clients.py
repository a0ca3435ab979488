"""Real clients on SASL and TLS listeners: kafka-python and aiokafka over SASL_PLAINTEXT PLAIN,
confluent-kafka over SASL_SSL PLAIN and over SSL with mutual TLS; wrong passwords fail cleanly on
each; a SASL listener serves nothing before authentication."""

from __future__ import annotations

import struct
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.errors import KafkaError as AioKafkaError
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import AdminClient
from kafka import KafkaConsumer, KafkaProducer
from kafka.errors import KafkaError

from kcoord.protocol.messages import ApiKey, request_class
from tests.harness import socket_server_metrics, track_broker
from tests.secure_broker import CLIENT_DN, USERS, SecureBroker, make_secure_broker
from tests.wire import Conn

N = 50


@pytest.fixture(scope="module")
def _secure(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureBroker]:
    # The failure limit per IP is high here: every client of these tests comes from 127.0.0.1,
    # and the wrong-password tests would otherwise lock out the good clients after them
    # (test_failed_authentications_are_limited_per_ip has a broker of its own).
    sb = make_secure_broker(
        tmp_path_factory.mktemp("secure"),
        {"group.initial.rebalance.delay.ms": "0", "sasl.failed.authentication.max.per.ip": "1000"},
    )
    sb.broker.start()
    yield sb
    sb.broker.stop()


@pytest.fixture
def secure(_secure: SecureBroker, request: pytest.FixtureRequest) -> SecureBroker:
    if not _secure.broker.running:
        _secure.broker.start()
    track_broker(request, _secure.broker)
    return _secure


def _wait_for_log(sb: SecureBroker, text: str, timeout: float = 10.0) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        log = sb.broker.log_text()
        if text in log:
            return log
        time.sleep(0.1)
    raise AssertionError(f"{text!r} not in the broker log")


def _kafka_python_sasl(sb: SecureBroker, password: str = USERS["alice"]) -> dict[str, object]:
    return {
        "bootstrap_servers": sb.bootstrap("SASL_PLAINTEXT"),
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "PLAIN",
        "sasl_plain_username": "alice",
        "sasl_plain_password": password,
    }


def test_kafka_python_sasl_plaintext_plain_with_a_group(secure: SecureBroker, unique_topic: str) -> None:
    producer = KafkaProducer(acks="all", **_kafka_python_sasl(secure))  # type: ignore[arg-type]
    for i in range(N):
        producer.send(unique_topic, f"v{i}".encode())
    producer.flush(30)
    producer.close()
    consumer = KafkaConsumer(
        unique_topic,
        group_id=unique_topic,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        **_kafka_python_sasl(secure),  # type: ignore[arg-type]
    )
    got: list[bytes] = []
    deadline = time.monotonic() + 60
    while len(got) < N and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=500).values():
            got.extend(r.value for r in records)
    consumer.commit()
    consumer.close()
    assert got == [f"v{i}".encode() for i in range(N)]
    log = _wait_for_log(secure, "principal=User:alice")
    assert "listener=SASL_PLAINTEXT mechanism=PLAIN" in log


async def test_aiokafka_sasl_plaintext_plain_with_a_group(secure: SecureBroker, unique_topic: str) -> None:
    common = {
        "bootstrap_servers": secure.bootstrap("SASL_PLAINTEXT"),
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "PLAIN",
        "sasl_plain_username": "bob",
        "sasl_plain_password": USERS["bob"],
    }
    producer = AIOKafkaProducer(acks="all", **common)  # type: ignore[arg-type]
    await producer.start()
    try:
        for i in range(N):
            await producer.send(unique_topic, f"v{i}".encode())
        await producer.flush()
    finally:
        await producer.stop()
    consumer = AIOKafkaConsumer(
        unique_topic,
        group_id=unique_topic,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        **common,  # type: ignore[arg-type]
    )
    await consumer.start()
    try:
        got: list[bytes] = []
        deadline = time.monotonic() + 60
        while len(got) < N and time.monotonic() < deadline:
            for records in (await consumer.getmany(timeout_ms=500)).values():
                got.extend(r.value for r in records)
        await consumer.commit()
    finally:
        await consumer.stop()
    assert got == [f"v{i}".encode() for i in range(N)]
    _wait_for_log(secure, "principal=User:bob")


def _confluent_sasl_ssl(sb: SecureBroker, password: str = USERS["alice"]) -> dict[str, object]:
    return {
        "bootstrap.servers": sb.bootstrap("SASL_SSL"),
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "PLAIN",
        "sasl.username": "alice",
        "sasl.password": password,
        "ssl.ca.location": str(sb.ca_file),
    }


def _confluent_round_trip(conf: dict[str, object], topic: str) -> list[bytes]:
    errors: list[object] = []
    producer = Producer({**conf, "acks": "all", "error_cb": errors.append})
    for i in range(N):
        producer.produce(topic, f"v{i}".encode())
    assert producer.flush(30) == 0, errors
    consumer = Consumer(
        {**conf, "group.id": topic, "auto.offset.reset": "earliest", "enable.auto.commit": False}
    )
    consumer.subscribe([topic])
    got: list[bytes] = []
    deadline = time.monotonic() + 60
    try:
        while len(got) < N and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                got.append(msg.value())
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    return got


def test_confluent_sasl_ssl_plain(secure: SecureBroker, unique_topic: str) -> None:
    got = _confluent_round_trip(_confluent_sasl_ssl(secure), unique_topic)
    assert got == [f"v{i}".encode() for i in range(N)]
    assert "listener=SASL_SSL mechanism=PLAIN" in _wait_for_log(secure, "principal=User:alice")


def test_confluent_ssl_mutual_tls_principal(secure: SecureBroker, unique_topic: str) -> None:
    conf = {
        "bootstrap.servers": secure.bootstrap("SSL"),
        "security.protocol": "SSL",
        "ssl.ca.location": str(secure.ca_file),
        "ssl.certificate.location": str(secure.client_cert_file),
        "ssl.key.location": str(secure.client_key_file),
    }
    got = _confluent_round_trip(conf, unique_topic)
    assert got == [f"v{i}".encode() for i in range(N)]
    # The principal Kafka's DEFAULT mapping rule names: the DN as Java's X500Principal renders it.
    log = _wait_for_log(secure, f"principal='User:{CLIENT_DN}'")
    assert "TLS client authenticated" in log


def test_ssl_listener_refuses_a_client_without_certificate(secure: SecureBroker) -> None:
    # ssl.client.auth=required on the SSL listener: the handshake fails, nothing is served.
    admin = AdminClient(
        {
            "bootstrap.servers": secure.bootstrap("SSL"),
            "security.protocol": "SSL",
            "ssl.ca.location": str(secure.ca_file),
            "socket.timeout.ms": 3000,
        }
    )
    with pytest.raises(KafkaException):
        admin.list_topics(timeout=3)


def _assert_broker_serves(sb: SecureBroker) -> None:
    with Conn("127.0.0.1", sb.ports["PLAINTEXT"]) as c:
        assert c.api_versions(version=3).error_code == 0


def test_wrong_password_kafka_python(
    secure: SecureBroker, unique_topic: str, caplog: pytest.LogCaptureFixture
) -> None:
    listener = frozenset({("listener", "SASL_PLAINTEXT"), ("networkprocessor", "0")})
    before = socket_server_metrics(secure.http_port)
    # kafka-python retries the bootstrap connection until its timeout and reports each refusal.
    with pytest.raises(KafkaError):
        KafkaProducer(bootstrap_timeout_ms=2000, **_kafka_python_sasl(secure, "wrong"))  # type: ignore[arg-type]
    assert "SaslAuthenticationFailedError: Authentication failed: Invalid username or password" in caplog.text
    _wait_for_log(secure, "SASL authentication failed")
    _assert_broker_serves(secure)
    producer = KafkaProducer(**_kafka_python_sasl(secure))  # type: ignore[arg-type]
    producer.send(unique_topic, b"after").get(30)
    producer.close()
    # Kafka's socket-server-metrics count both outcomes on the listener.
    after = socket_server_metrics(secure.http_port)
    failed = ("failed_authentication_total", listener)
    succeeded = ("successful_authentication_total", listener)
    assert after[failed] >= before.get(failed, 0) + 1
    assert after[succeeded] >= before.get(succeeded, 0) + 1


async def test_wrong_password_aiokafka(secure: SecureBroker, caplog: pytest.LogCaptureFixture) -> None:
    producer = AIOKafkaProducer(
        bootstrap_servers=secure.bootstrap("SASL_PLAINTEXT"),
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="PLAIN",
        sasl_plain_username="bob",
        sasl_plain_password="wrong",
    )
    with pytest.raises(AioKafkaError) as e:
        await producer.start()
    await producer.stop()
    assert "Unable to bootstrap" in str(e.value)
    assert (
        "[Error 58] SaslAuthenticationFailed: Authentication failed: Invalid username or password"
        in caplog.text
    )
    _assert_broker_serves(secure)


def test_wrong_password_confluent(secure: SecureBroker, unique_topic: str) -> None:
    errors: list[object] = []
    producer = Producer({**_confluent_sasl_ssl(secure, "wrong"), "error_cb": errors.append})
    producer.produce(unique_topic, b"never")
    deadline = time.monotonic() + 15
    while not errors and time.monotonic() < deadline:
        producer.poll(0.2)
    assert errors, "no authentication error reported"
    assert any("Invalid username or password" in str(err) for err in errors), errors
    log = secure.broker.log_text()
    assert "SASL authentication failed" in log and "wrong" not in log.split("SASL authentication failed")[-1]
    _assert_broker_serves(secure)
    got = _confluent_round_trip(_confluent_sasl_ssl(secure), unique_topic + "-ok")
    assert len(got) == N


def _frame(api_key: int, version: int, body: bytes = b"", correlation_id: int = 1) -> bytes:
    client_id = b"raw"
    header = struct.pack(">hhih", api_key, version, correlation_id, len(client_id)) + client_id
    return header + body


def test_metadata_before_authentication_closes_the_connection(secure: SecureBroker) -> None:
    with Conn("127.0.0.1", secure.ports["SASL_PLAINTEXT"]) as c:
        assert c.api_versions(version=3).error_code == 0  # ApiVersions is served before SASL
        c.send_frame(_frame(3, 1, struct.pack(">i", -1)))  # Metadata v1, all topics
        assert c.is_closed_by_peer()
    assert "Unexpected Kafka request of type Metadata during SASL handshake" in _wait_for_log(
        secure, "Unexpected Kafka request"
    )


def test_oversize_frame_before_authentication_closes(secure: SecureBroker) -> None:
    with Conn("127.0.0.1", secure.ports["SASL_PLAINTEXT"]) as c:
        c.send_raw(struct.pack(">i", 524289))  # sasl.server.max.receive.size + 1
        assert c.is_closed_by_peer()
    _wait_for_log(secure, "sasl.server.max.receive.size")


def test_unknown_mechanism_lists_the_enabled_ones(secure: SecureBroker) -> None:
    with Conn("127.0.0.1", secure.ports["SASL_PLAINTEXT"]) as c:
        resp = c.request(17, 1, mechanism="GSSAPI")
        assert resp.error_code == 33  # UNSUPPORTED_SASL_MECHANISM
        assert list(resp.mechanisms) == ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
        assert c.is_closed_by_peer()


def test_sasl_requests_on_a_plaintext_listener_are_illegal(secure: SecureBroker) -> None:
    with Conn("127.0.0.1", secure.ports["PLAINTEXT"]) as c:
        assert c.request(17, 1, mechanism="PLAIN").error_code == 34  # ILLEGAL_SASL_STATE
        assert c.request(36, 2, auth_bytes=b"\0a\0b").error_code == 34


def test_failed_authentications_are_limited_per_ip(tmp_path: Path, request: pytest.FixtureRequest) -> None:
    sb = make_secure_broker(
        tmp_path / "limited",
        {"sasl.failed.authentication.max.per.ip": "2", "connection.failed.authentication.delay.ms": "0"},
    )
    sb.broker.start()
    track_broker(request, sb.broker)
    try:

        def attempt(password: str) -> int:
            with Conn("127.0.0.1", sb.ports["SASL_PLAINTEXT"]) as c:
                assert c.request(17, 1, mechanism="PLAIN").error_code == 0
                return c.request(36, 2, auth_bytes=b"\0alice\0" + password.encode()).error_code

        assert attempt("guess-1") == 58 and attempt("guess-2") == 58  # SASL_AUTHENTICATION_FAILED
        assert attempt(USERS["alice"]) == 58  # blocked for the window, even with the password
        assert "too many failed authentications" in sb.broker.log_text()
    finally:
        sb.broker.stop()


def test_client_closes_after_failure_delay(secure: SecureBroker) -> None:
    with Conn("127.0.0.1", secure.ports["SASL_PLAINTEXT"]) as c:
        assert c.request(17, 1, mechanism="PLAIN").error_code == 0
        start = time.monotonic()
        resp = c.request(36, 1, auth_bytes=b"\0alice\0nope")
        assert resp.error_code == 58
        assert resp.error_message == "Authentication failed: Invalid username or password"
        assert c.is_closed_by_peer()
        assert time.monotonic() - start >= 0.09  # connection.failed.authentication.delay.ms=100


def test_describe_configs_hides_secrets(secure: SecureBroker) -> None:
    from confluent_kafka.admin import ConfigResource

    admin = AdminClient({"bootstrap.servers": secure.bootstrap("PLAINTEXT")})
    resource = ConfigResource(ConfigResource.Type.BROKER, "1")
    configs = admin.describe_configs([resource])[resource].result(timeout=10)
    for name in ("listener.name", "sasl.jaas.config", "ssl.key.password", "ssl.keystore.key"):
        assert configs[name].is_sensitive and configs[name].value is None, name
    assert configs["ssl.keystore.location"].value.endswith("server.pem")
    # Typed PASSWORD (9), as Kafka's password configs (confluent's client does not show types).
    with Conn("127.0.0.1", secure.ports["PLAINTEXT"]) as c:
        req = request_class(ApiKey.DescribeConfigs)
        resource = req.DescribeConfigsResource(
            resource_type=4, resource_name="1", configuration_keys=["sasl.jaas.config"]
        )
        resp = c.request(
            ApiKey.DescribeConfigs,
            4,
            resources=[resource],
            include_synonyms=False,
            include_documentation=False,
        )
        (entry,) = resp.results[0].configs
        assert (entry.name, entry.value, entry.config_type) == ("sasl.jaas.config", None, 9)


def test_kip43_v0_handshake_raw_tokens(
    secure: SecureBroker, unique_topic: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """kafka-python told it talks to Kafka 0.11 uses SaslHandshake v0 and raw tokens (KIP-43)."""
    import kafka.net.connection

    raw_tokens: list[bytes] = []
    real = kafka.net.connection.SaslBytesRequest

    class Spy(real):  # type: ignore[misc, valid-type]
        def __init__(self, data: bytes) -> None:
            raw_tokens.append(data)
            super().__init__(data)

    monkeypatch.setattr(kafka.net.connection, "SaslBytesRequest", Spy)
    producer = KafkaProducer(api_version=(0, 11), **_kafka_python_sasl(secure))  # type: ignore[arg-type]
    producer.send(unique_topic, b"v0").get(30)
    producer.close()
    assert raw_tokens and all(t == b"alice\0alice\0alice-secret" for t in raw_tokens)

    # The same by hand: the answer is a size-framed (empty) token, then requests are served; a
    # wrong password closes the connection without an answer.
    with Conn("127.0.0.1", secure.ports["SASL_PLAINTEXT"]) as c:
        assert c.request(17, 0, mechanism="PLAIN").error_code == 0
        c.send_frame(b"\0alice\0alice-secret")
        assert c.recv_frame() == b""
        assert c.api_versions(version=3).error_code == 0
        c.send_frame(_frame(3, 1, struct.pack(">i", -1)))
        assert c.recv_frame()[:4] == struct.pack(">i", 1)  # Metadata answered
        # Sessions without an end (connections.max.reauth.ms 0): a second handshake is illegal.
        assert c.request(17, 1, mechanism="PLAIN").error_code == 34
    with Conn("127.0.0.1", secure.ports["SASL_PLAINTEXT"]) as c:
        assert c.request(17, 0, mechanism="PLAIN").error_code == 0
        c.send_frame(b"\0alice\0wrong")
        assert c.is_closed_by_peer()


def test_mutual_tls_principal_mapping_rules(tmp_path: Path, request: pytest.FixtureRequest) -> None:
    """listener.name.ssl.ssl.principal.mapping.rules: Kafka's RULE syntax names the principal."""
    sb = make_secure_broker(
        tmp_path / "rules",
        {"listener.name.ssl.ssl.principal.mapping.rules": "RULE:^CN=([^,]*),.*$/$1/U,DEFAULT"},
    )
    sb.broker.start()
    track_broker(request, sb.broker)
    try:
        admin = AdminClient(
            {
                "bootstrap.servers": sb.bootstrap("SSL"),
                "security.protocol": "SSL",
                "ssl.ca.location": str(sb.ca_file),
                "ssl.certificate.location": str(sb.client_cert_file),
                "ssl.key.location": str(sb.client_key_file),
            }
        )
        assert admin.list_topics(timeout=10).brokers
        assert "principal=User:ALICE" in _wait_for_log(sb, "TLS client authenticated")
    finally:
        sb.broker.stop()


def test_requested_client_auth_serves_clients_without_certificates(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """ssl.client.auth=requested: a client without a certificate is served as User:ANONYMOUS, one
    with a certificate is named by it."""
    sb = make_secure_broker(tmp_path / "requested", {"listener.name.ssl.ssl.client.auth": "requested"})
    sb.broker.start()
    track_broker(request, sb.broker)
    try:
        base = {
            "bootstrap.servers": sb.bootstrap("SSL"),
            "security.protocol": "SSL",
            "ssl.ca.location": str(sb.ca_file),
        }
        assert AdminClient(base).list_topics(timeout=10).brokers
        time.sleep(0.3)
        assert "TLS client authenticated" not in sb.broker.log_text()  # no certificate: ANONYMOUS
        with_cert = {
            **base,
            "ssl.certificate.location": str(sb.client_cert_file),
            "ssl.key.location": str(sb.client_key_file),
        }
        assert AdminClient(with_cert).list_topics(timeout=10).brokers
        assert f"principal='User:{CLIENT_DN}'" in _wait_for_log(sb, "TLS client authenticated")
    finally:
        sb.broker.stop()


def test_reauthentication_kip368(tmp_path: Path, request: pytest.FixtureRequest) -> None:
    """connections.max.reauth.ms: SaslAuthenticate tells the session's lifetime; the client may
    re-authenticate on its connection (same mechanism and principal), and a connection whose
    session expired is closed at its next request."""
    sb = make_secure_broker(tmp_path / "reauth", {"connections.max.reauth.ms": "1500"})
    sb.broker.start()
    track_broker(request, sb.broker)

    def authenticate(c: Conn, user: str, password: str) -> Any:
        assert c.request(17, 1, mechanism="PLAIN").error_code == 0
        return c.request(36, 2, auth_bytes=f"\0{user}\0{password}".encode())

    def metadata(c: Conn) -> None:
        c.send_frame(_frame(3, 1, struct.pack(">i", -1), correlation_id=7))
        assert c.recv_frame()[:4] == struct.pack(">i", 7)

    try:
        with Conn("127.0.0.1", sb.ports["SASL_PLAINTEXT"]) as c:
            resp = authenticate(c, "alice", USERS["alice"])
            assert (resp.error_code, resp.session_lifetime_ms) == (0, 1500)
            metadata(c)
            time.sleep(1.1)
            resp = authenticate(c, "alice", USERS["alice"])  # re-authentication on the connection
            assert (resp.error_code, resp.session_lifetime_ms) == (0, 1500)
            time.sleep(1.0)  # past the first session's end, within the second one's
            metadata(c)
            time.sleep(1.6)  # the second session expires
            c.send_frame(_frame(3, 1, struct.pack(">i", -1)))
            assert c.is_closed_by_peer()
        assert "SASL client re-authenticated" in sb.broker.log_text()
        assert "SASL session expired" in sb.broker.log_text()
        with Conn("127.0.0.1", sb.ports["SASL_PLAINTEXT"]) as c:
            # A handshake still begins re-authentication after the session ended, as in Kafka.
            assert authenticate(c, "alice", USERS["alice"]).error_code == 0
            time.sleep(1.6)
            assert authenticate(c, "alice", USERS["alice"]).error_code == 0
            metadata(c)
        with Conn("127.0.0.1", sb.ports["SASL_PLAINTEXT"]) as c:
            assert authenticate(c, "alice", USERS["alice"]).error_code == 0
            time.sleep(1.1)
            resp = authenticate(c, "bob", USERS["bob"])
            assert resp.error_code == 58
            assert (
                resp.error_message
                == "Cannot change principals during re-authentication from User.alice: User.bob"
            )
            assert c.is_closed_by_peer()
    finally:
        sb.broker.stop()


def test_confluent_reauthenticates(tmp_path: Path, request: pytest.FixtureRequest) -> None:
    """librdkafka re-authenticates (KIP-368) on its connection as its sessions near their end."""
    sb = make_secure_broker(tmp_path / "reauth-confluent", {"connections.max.reauth.ms": "2000"})
    sb.broker.start()
    track_broker(request, sb.broker)
    try:
        producer = Producer({**_confluent_sasl_ssl(sb), "acks": "all"})
        errors: list[object] = []
        for _ in range(20):  # 5 s: two sessions and more
            producer.produce(
                "reauth", b"x", on_delivery=lambda err, _msg: errors.append(err) if err else None
            )
            producer.flush(10)
            time.sleep(0.25)
        assert errors == []
        log = sb.broker.log_text()
        assert log.count("SASL client re-authenticated") >= 2 and "SASL session expired" not in log
    finally:
        sb.broker.stop()
