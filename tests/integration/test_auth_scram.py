"""SCRAM users created through Kafka's own API, then used: confluent-kafka's AdminClient
alter_user_scram_credentials, then confluent-kafka over SASL_SSL with SCRAM-SHA-512 and
SCRAM-SHA-256, kafka-python and aiokafka over SASL_PLAINTEXT; a wrong SCRAM password and an
unknown user fail with Kafka's message, which does not tell which of the two it was."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from confluent_kafka import Producer
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)
from kafka import KafkaProducer

from tests.harness import track_broker
from tests.integration.test_auth_clients import _confluent_round_trip
from tests.secure_broker import SecureBroker, make_secure_broker

N = 50
GENERIC = "Authentication failed during authentication due to invalid credentials with SASL mechanism {}"


@pytest.fixture(scope="module")
def _scram(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureBroker]:
    sb = make_secure_broker(
        tmp_path_factory.mktemp("scram"),
        {"group.initial.rebalance.delay.ms": "0", "sasl.failed.authentication.max.per.ip": "1000"},
    )
    sb.broker.start()
    admin = AdminClient({"bootstrap.servers": sb.bootstrap("PLAINTEXT")})
    futures = admin.alter_user_scram_credentials(
        [
            UserScramCredentialUpsertion(
                "carol",
                ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192),
                b"carol-secret",
                b"carol-salt",
            ),
            UserScramCredentialUpsertion(
                "dave", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), b"dave-secret"
            ),
        ]
    )
    for future in futures.values():
        future.result(timeout=10)
    yield sb
    sb.broker.stop()


@pytest.fixture
def scram(_scram: SecureBroker, request: pytest.FixtureRequest) -> SecureBroker:
    track_broker(request, _scram.broker)
    return _scram


def _confluent(sb: SecureBroker, mechanism: str, user: str, password: str) -> dict[str, object]:
    return {
        "bootstrap.servers": sb.bootstrap("SASL_SSL"),
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": mechanism,
        "sasl.username": user,
        "sasl.password": password,
        "ssl.ca.location": str(sb.ca_file),
    }


@pytest.mark.parametrize(
    ("mechanism", "user", "password"),
    [("SCRAM-SHA-512", "carol", "carol-secret"), ("SCRAM-SHA-256", "dave", "dave-secret")],
)
def test_confluent_sasl_ssl_scram(
    scram: SecureBroker, unique_topic: str, mechanism: str, user: str, password: str
) -> None:
    got = _confluent_round_trip(_confluent(scram, mechanism, user, password), unique_topic)
    assert got == [f"v{i}".encode() for i in range(N)]
    assert f"mechanism={mechanism} peer=" in scram.broker.log_text()
    assert f"principal=User:{user}" in scram.broker.log_text()


@pytest.mark.parametrize(("user", "password"), [("carol", "wrong"), ("mallory", "carol-secret")])
def test_confluent_scram_refused_without_telling_why(
    scram: SecureBroker, unique_topic: str, user: str, password: str
) -> None:
    errors: list[object] = []
    producer = Producer({**_confluent(scram, "SCRAM-SHA-512", user, password), "error_cb": errors.append})
    producer.produce(unique_topic, b"never")
    deadline = time.monotonic() + 15
    while not errors and time.monotonic() < deadline:
        producer.poll(0.2)
    assert any(GENERIC.format("SCRAM-SHA-512") in str(e) for e in errors), errors
    # The broker's log says why (never the password).
    reason = "Invalid client credentials" if user == "carol" else "Invalid user credentials"
    assert reason in scram.broker.log_text()


def test_kafka_python_scram_sha_512(scram: SecureBroker, unique_topic: str) -> None:
    producer = KafkaProducer(
        bootstrap_servers=scram.bootstrap("SASL_PLAINTEXT"),
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="SCRAM-SHA-512",
        sasl_plain_username="carol",
        sasl_plain_password="carol-secret",
    )
    producer.send(unique_topic, b"scram").get(30)
    producer.close()


async def test_aiokafka_scram_sha_256(scram: SecureBroker, unique_topic: str) -> None:
    common = {
        "bootstrap_servers": scram.bootstrap("SASL_PLAINTEXT"),
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "SCRAM-SHA-256",
        "sasl_plain_username": "dave",
        "sasl_plain_password": "dave-secret",
    }
    producer = AIOKafkaProducer(**common)  # type: ignore[arg-type]
    await producer.start()
    try:
        await producer.send_and_wait(unique_topic, b"scram")
    finally:
        await producer.stop()
    consumer = AIOKafkaConsumer(unique_topic, group_id=unique_topic, auto_offset_reset="earliest", **common)  # type: ignore[arg-type]
    await consumer.start()
    try:
        got = []
        deadline = time.monotonic() + 30
        while not got and time.monotonic() < deadline:
            for records in (await consumer.getmany(timeout_ms=500)).values():
                got.extend(r.value for r in records)
    finally:
        await consumer.stop()
    assert got == [b"scram"]
