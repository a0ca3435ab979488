"""SASL principals meet the authorizer: an admin (a super user) creates ACLs through confluent's
AdminClient over SASL, and alice, authenticated with PLAIN, reads the one topic with the one
group they allow and nothing else, neither producing nor granting herself more."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from tests.harness import track_broker
from tests.secure_broker import SecureBroker, make_secure_broker

PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule required"


@pytest.fixture
def acl_broker(
    tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[SecureBroker]:
    sb = make_secure_broker(
        tmp_path_factory.mktemp("acls"),
        {
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users": "User:admin",
            "group.initial.rebalance.delay.ms": "0",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": (
                f'{PLAIN} user_admin="admin-secret" user_alice="alice-secret";'
            ),
        },
    )
    sb.broker.start()
    track_broker(request, sb.broker)
    yield sb
    sb.broker.stop()


def _conf(sb: SecureBroker, user: str) -> dict[str, object]:
    return {
        "bootstrap.servers": sb.bootstrap("SASL_PLAINTEXT"),
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.username": user,
        "sasl.password": f"{user}-secret",
    }


def _consume(
    sb: SecureBroker, topic: str, group: str, expected: int
) -> tuple[list[bytes], KafkaError | None]:
    consumer = Consumer({**_conf(sb, "alice"), "group.id": group, "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    got: list[bytes] = []
    error = None
    deadline = time.monotonic() + 20
    try:
        while time.monotonic() < deadline and len(got) < expected and error is None:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error() is not None:
                error = msg.error()
            else:
                got.append(msg.value())
    finally:
        consumer.close()
    return got, error


def test_acls_bind_sasl_principals(acl_broker: SecureBroker) -> None:
    admin = AdminClient(_conf(acl_broker, "admin"))
    for future in admin.create_topics([NewTopic("allowed", 1, 1), NewTopic("other", 1, 1)]).values():
        future.result(timeout=10)
    producer = Producer(_conf(acl_broker, "admin"))
    for topic in ("allowed", "other"):
        for i in range(5):
            producer.produce(topic, f"{topic}-{i}".encode())
    assert producer.flush(20) == 0
    acls = [
        AclBinding(
            ResourceType.TOPIC,
            "allowed",
            ResourcePatternType.LITERAL,
            "User:alice",
            "*",
            AclOperation.READ,
            AclPermissionType.ALLOW,
        ),
        AclBinding(
            ResourceType.GROUP,
            "alice-group",
            ResourcePatternType.LITERAL,
            "User:alice",
            "*",
            AclOperation.READ,
            AclPermissionType.ALLOW,
        ),
    ]
    for future in admin.create_acls(acls).values():
        future.result(timeout=10)

    got, error = _consume(acl_broker, "allowed", "alice-group", 5)
    assert error is None and got == [f"allowed-{i}".encode() for i in range(5)]

    _, error = _consume(acl_broker, "other", "alice-group", 5)
    assert error is not None and error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, error

    _, error = _consume(acl_broker, "allowed", "another-group", 5)
    assert error is not None and error.code() == KafkaError.GROUP_AUTHORIZATION_FAILED, error

    errors: list[KafkaError] = []
    alice_producer = Producer({**_conf(acl_broker, "alice"), "acks": "all"})
    alice_producer.produce("allowed", b"forbidden", on_delivery=lambda err, _msg: errors.append(err))
    alice_producer.flush(20)
    assert errors and errors[0] is not None and errors[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED

    # Alice cannot create ACLs for herself.
    with pytest.raises(KafkaException) as e:
        grant = AclBinding(
            ResourceType.TOPIC,
            "other",
            ResourcePatternType.LITERAL,
            "User:alice",
            "*",
            AclOperation.READ,
            AclPermissionType.ALLOW,
        )
        alice_admin = AdminClient(_conf(acl_broker, "alice"))  # kept alive until the answer
        next(iter(alice_admin.create_acls([grant]).values())).result(timeout=10)
    assert e.value.args[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED
