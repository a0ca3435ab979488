"""ACLs and SCRAM credentials through confluent-kafka's AdminClient and kafka-python's
KafkaAdminClient, persisted in ``__cluster_metadata``: across a clean restart and a kill -9;
librdkafka's consumer and producer held to them.

The broker runs the StandardAuthorizer with ``super.users=User:ANONYMOUS`` (every PLAINTEXT
client), so the admin clients may manage everything; to hold a client to ACLs, a test restarts
the broker without super users (as tests/integration/test_security_java.py does).
"""

from __future__ import annotations

import threading
import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)
from kafka import KafkaAdminClient
from kafka import errors as kafka_errors
from kafka.admin import (
    ACLFilter,
    ACLOperation,
    ACLPermissionType,
    ACLResourcePatternType,
    ResourcePatternFilter,
)
from kafka.admin import ResourceType as KResourceType
from kafka.admin import ScramMechanism as KScramMechanism
from kafka.admin import UserScramCredentialUpsertion as KUpsertion

from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.messages import request_class
from tests.harness import BrokerFactory
from tests.wire import ApiKey, Conn

_Creation = request_class(ApiKey.CreateAcls).AclCreation
_Upsertion = request_class(ApiKey.AlterUserScramCredentials).ScramCredentialUpsertion
AUTHORIZER = ["--authorizer-class-name", "org.apache.kafka.metadata.authorizer.StandardAuthorizer"]
SUPER = ["--super-users", "User:ANONYMOUS"]


def acl(
    name: str, pattern: ResourcePatternType, op: AclOperation, principal: str = "User:alice"
) -> AclBinding:
    return AclBinding(ResourceType.TOPIC, name, pattern, principal, "*", op, AclPermissionType.ALLOW)


ANY = AclBindingFilter(
    ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY, AclPermissionType.ANY
)


def test_acls_and_credentials_through_python_admins(broker_factory: BrokerFactory) -> None:
    b = broker_factory(AUTHORIZER + SUPER)
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    bindings = [
        acl("orders", ResourcePatternType.LITERAL, AclOperation.READ),
        acl("orders-", ResourcePatternType.PREFIXED, AclOperation.WRITE),
        acl("*", ResourcePatternType.LITERAL, AclOperation.DESCRIBE, "User:bob"),
    ]
    for f in admin.create_acls(bindings).values():
        assert f.result(timeout=10) is None
    assert set(admin.describe_acls(ANY).result(timeout=10)) == set(bindings)
    # MATCH: what applies to the literal topic orders-eu (the prefix and the wildcard).
    match = AclBindingFilter(
        ResourceType.TOPIC,
        "orders-eu",
        ResourcePatternType.MATCH,
        None,
        None,
        AclOperation.ANY,
        AclPermissionType.ANY,
    )
    assert set(admin.describe_acls(match).result(timeout=10)) == {bindings[1], bindings[2]}

    # kafka-python reads them too, and deletes by filter.
    kadmin = KafkaAdminClient(bootstrap_servers=b.bootstrap)
    try:
        kfilter = ACLFilter(
            principal="User:alice",
            host=None,
            operation=ACLOperation.ANY,
            permission_type=ACLPermissionType.ANY,
            resource_pattern=ResourcePatternFilter(KResourceType.TOPIC, None, ACLResourcePatternType.ANY),
        )
        found, error = kadmin.describe_acls(kfilter)
        assert error is not None and error.errno == 0
        assert sorted(a.resource_pattern.resource_name for a in found) == ["orders", "orders-"]
        kfilter.operation = ACLOperation.WRITE
        deleted = kadmin.delete_acls([kfilter])
        [(_filter, matched, err)] = deleted
        assert err is None or err.errno == 0
        assert [m.resource_pattern.resource_name for m in matched] == ["orders-"]

        # SCRAM credentials: kafka-python salts and hashes on the client side, the broker keeps
        # StoredKey and ServerKey.
        result = kadmin.alter_user_scram_credentials(
            [KUpsertion("kp-user", KScramMechanism.SCRAM_SHA_256, "pw")]
        )
        assert result == {"kp-user": None}
    finally:
        kadmin.close()
    assert set(admin.describe_acls(ANY).result(timeout=10)) == {bindings[0], bindings[2]}

    futures = admin.alter_user_scram_credentials(
        [
            UserScramCredentialUpsertion(
                "alice", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192), b"alice-secret", b"salt-1"
            ),
            UserScramCredentialUpsertion(
                "bob", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 1000), b"bob-secret", b"salt-2"
            ),
        ]
    )
    assert futures["alice"].result(timeout=10) is None
    with pytest.raises(KafkaException) as e:
        futures["bob"].result(timeout=10)
    assert e.value.args[0].code() == KafkaError.UNACCEPTABLE_CREDENTIAL
    described = admin.describe_user_scram_credentials().result(timeout=10)
    assert {
        u: [(c.mechanism, c.iterations) for c in d.scram_credential_infos] for u, d in described.items()
    } == {
        "alice": [(ScramMechanism.SCRAM_SHA_512, 8192)],
        "kp-user": [(ScramMechanism.SCRAM_SHA_256, 4096)],
    }
    # Never the password, nor the salted password, on disk.
    data = b"".join(p.read_bytes() for p in (b.data_dir / "__cluster_metadata-0").glob("*.log"))
    assert b"alice-secret" not in data and b"salt-1" in data

    b.restart()
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    assert set(admin.describe_acls(ANY).result(timeout=10)) == {bindings[0], bindings[2]}
    after = admin.describe_user_scram_credentials(["alice"])["alice"].result(timeout=10)
    assert [(c.mechanism, c.iterations) for c in after.scram_credential_infos] == [
        (ScramMechanism.SCRAM_SHA_512, 8192)
    ]
    fs = admin.alter_user_scram_credentials(
        [UserScramCredentialDeletion("alice", ScramMechanism.SCRAM_SHA_512)]
    )
    assert fs["alice"].result(timeout=10) is None
    with pytest.raises(KafkaException) as e:
        admin.describe_user_scram_credentials(["alice"])["alice"].result(timeout=10)
    assert e.value.args[0].code() == KafkaError.RESOURCE_NOT_FOUND


def test_no_authorizer_is_security_disabled(broker_factory: BrokerFactory) -> None:
    b = broker_factory()
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    binding = acl("t", ResourcePatternType.LITERAL, AclOperation.READ)
    with pytest.raises(KafkaException) as e:
        admin.create_acls([binding])[binding].result(timeout=10)
    assert e.value.args[0].code() == KafkaError.SECURITY_DISABLED
    # librdkafka reads DescribeAcls' error as no ACLs; kafka-python hands it over.
    kadmin = KafkaAdminClient(bootstrap_servers=b.bootstrap)
    try:
        everything = ACLFilter(
            principal=None,
            host=None,
            operation=ACLOperation.ANY,
            permission_type=ACLPermissionType.ANY,
            resource_pattern=ResourcePatternFilter(KResourceType.ANY, None, ACLResourcePatternType.ANY),
        )
        with pytest.raises(kafka_errors.SecurityDisabledError):
            kadmin.describe_acls(everything)
    finally:
        kadmin.close()


def test_cluster_metadata_is_never_a_topic(broker_factory: BrokerFactory) -> None:
    """A topic named __cluster_metadata would share the security metadata's log directory."""
    b = broker_factory()
    with b.connect() as c:
        creatable = request_class(ApiKey.CreateTopics).CreatableTopic
        created = c.request(
            ApiKey.CreateTopics,
            7,
            topics=[
                creatable(
                    name="__cluster_metadata",
                    num_partitions=1,
                    replication_factor=1,
                    assignments=[],
                    configs=[],
                )
            ],
            timeout_ms=10_000,
            validate_only=False,
        )
        assert created.topics[0].error_code == ErrorCode.INVALID_REQUEST
        topic = request_class(ApiKey.Metadata).MetadataRequestTopic
        md = c.request(
            ApiKey.Metadata,
            12,
            topics=[topic(topic_id=uuid.UUID(int=0), name="__cluster_metadata")],
            allow_auto_topic_creation=True,
            include_topic_authorized_operations=False,
        )
        assert md.topics[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    fs = admin.alter_user_scram_credentials(
        [
            UserScramCredentialUpsertion(
                "u", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), b"p", b"s"
            )
        ]
    )
    assert fs["u"].result(timeout=10) is None
    b.restart()
    assert "u" in AdminClient({"bootstrap.servers": b.bootstrap}).describe_user_scram_credentials().result(
        timeout=10
    )


def test_unknown_authorizer_is_refused(broker_factory: BrokerFactory) -> None:
    b = broker_factory(["--authorizer-class-name", "kafka.security.authorizer.AclAuthorizer"], start=False)
    with pytest.raises(RuntimeError, match="StandardAuthorizer"):
        b.start()


@pytest.mark.slow
def test_acknowledged_changes_survive_kill_9(broker_factory: BrokerFactory) -> None:
    """CreateAcls and AlterUserScramCredentials answered while the broker is killed: each one
    answered is there after the restart."""
    b = broker_factory(AUTHORIZER + SUPER)
    acked_acls: list[str] = []
    acked_users: list[str] = []
    stop = threading.Event()
    errors: list[Exception] = []

    def create_acls() -> None:
        try:
            with Conn(b.host, b.port) as c:
                i = 0
                while not stop.is_set():
                    name = f"t{i}"
                    resp = c.request(
                        ApiKey.CreateAcls,
                        3,
                        creations=[
                            _Creation(
                                resource_type=2,
                                resource_name=name,
                                resource_pattern_type=3,
                                principal="User:alice",
                                host="*",
                                operation=3,
                                permission_type=3,
                            )
                        ],
                    )
                    assert resp.results[0].error_code == 0
                    acked_acls.append(name)
                    i += 1
        except (OSError, ConnectionError, EOFError):
            pass  # the kill
        except Exception as e:
            errors.append(e)

    def alter_credentials() -> None:
        try:
            with Conn(b.host, b.port) as c:
                i = 0
                while not stop.is_set():
                    user = f"u{i}"
                    resp = c.request(
                        ApiKey.AlterUserScramCredentials,
                        0,
                        deletions=[],
                        upsertions=[
                            _Upsertion(
                                name=user, mechanism=2, iterations=4096, salt=b"s", salted_password=b"x" * 64
                            )
                        ],
                    )
                    assert resp.results[0].error_code == 0
                    acked_users.append(user)
                    i += 1
        except (OSError, ConnectionError, EOFError):
            pass  # the kill
        except Exception as e:
            errors.append(e)

    threads = [threading.Thread(target=create_acls), threading.Thread(target=alter_credentials)]
    for t in threads:
        t.start()
    time.sleep(1.5)
    b.kill()
    stop.set()
    for t in threads:
        t.join(10)
    assert not errors
    assert acked_acls and acked_users
    b.start()
    with Conn(b.host, b.port) as c:
        described = c.request(
            ApiKey.DescribeAcls,
            3,
            resource_type_filter=1,
            resource_name_filter=None,
            pattern_type_filter=1,
            principal_filter=None,
            host_filter=None,
            operation=1,
            permission_type=1,
        )
        assert described.error_code == 0
        names = {r.resource_name for r in described.resources}
        assert set(acked_acls) <= names
        creds = c.request(ApiKey.DescribeUserScramCredentials, 0, users=None)
        assert creds.error_code == 0
        users = {r.user for r in creds.results if r.error_code == 0}
        assert set(acked_users) <= users


def test_librdkafka_clients_held_to_acls(broker_factory: BrokerFactory) -> None:
    """confluent-kafka's consumer and producer under ACLs made by its AdminClient: Read on one topic
    with one group; another group, another topic and producing are refused with Kafka's errors."""
    b = broker_factory(AUTHORIZER + SUPER)
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    for f in admin.create_topics([NewTopic("rk-t", 1, 1), NewTopic("rk-u", 1, 1)]).values():
        f.result(timeout=10)
    producer = Producer({"bootstrap.servers": b.bootstrap})
    for i in range(3):
        producer.produce("rk-t", value=f"v{i}".encode())
        producer.produce("rk-u", value=f"v{i}".encode())
    assert producer.flush(10) == 0
    grants = [
        AclBinding(
            ResourceType.TOPIC,
            "rk-t",
            ResourcePatternType.LITERAL,
            "User:ANONYMOUS",
            "*",
            AclOperation.READ,
            AclPermissionType.ALLOW,
        ),
        AclBinding(
            ResourceType.GROUP,
            "rk-",
            ResourcePatternType.PREFIXED,
            "User:ANONYMOUS",
            "*",
            AclOperation.READ,
            AclPermissionType.ALLOW,
        ),
        AclBinding(
            ResourceType.GROUP,
            "rk-denied",
            ResourcePatternType.LITERAL,
            "User:*",
            "*",
            AclOperation.ALL,
            AclPermissionType.DENY,
        ),
    ]
    for f in admin.create_acls(grants).values():
        assert f.result(timeout=10) is None
    b.extra_args = list(AUTHORIZER)
    b.restart()

    def consumer(group: str) -> Consumer:
        return Consumer(
            {
                "bootstrap.servers": b.bootstrap,
                "group.id": group,
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
            }
        )

    def poll_until(c: Consumer, want: int, seconds: float = 20) -> tuple[list[bytes], list[int]]:
        values: list[bytes] = []
        errors: list[int] = []
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline and len(values) < want and not errors:
            msg = c.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                errors.append(msg.error().code())
            else:
                values.append(msg.value())
        return values, errors

    c = consumer("rk-ok")
    c.subscribe(["rk-t"])
    values, errors = poll_until(c, 3)
    assert (values, errors) == ([b"v0", b"v1", b"v2"], [])
    c.commit(asynchronous=False)
    c.close()

    c = consumer("rk-denied")  # Read by the prefix, but the DENY of ALL wins
    c.subscribe(["rk-t"])
    assert poll_until(c, 1)[1] == [KafkaError.GROUP_AUTHORIZATION_FAILED]
    c.close()

    c = consumer("rk-ok2")
    c.subscribe(["rk-u"])
    assert poll_until(c, 1)[1] == [KafkaError.TOPIC_AUTHORIZATION_FAILED]
    c.close()

    reports: list[int] = []
    producer = Producer({"bootstrap.servers": b.bootstrap, "message.timeout.ms": 10_000})
    producer.produce(
        "rk-t", value=b"forbidden", on_delivery=lambda err, _msg: reports.append(err.code() if err else 0)
    )
    producer.flush(15)
    assert reports == [KafkaError.TOPIC_AUTHORIZATION_FAILED]
    with b.connect() as conn:
        assert conn.list_offsets("rk-t", 0, -1).offset == 3  # nothing was written
