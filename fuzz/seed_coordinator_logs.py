"""Seed the coordinator_logs target's corpus with real coordinator segments: an in-process broker
(authorizer on, so ACLs are stored) driven by confluent-kafka through a classic group, a KIP-848
consumer group, a share group, a transaction with offsets, SCRAM credentials and ACLs; then each
coordinator partition's segment (and snapshot) becomes seeds, prefixed with the target's two
choice bytes (coordinator, mode).

    PYTHONPATH=. python fuzz/seed_coordinator_logs.py fuzz/corpus/coordinator_logs
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from kcoord.testing.broker import BrokerThread

TOPICS = ("__consumer_offsets", "__transaction_state", "__cluster_metadata")


def drive(bootstrap: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic("seed", 2, 1)]).values():
        f.result()
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": "seed-tx"})
    p.init_transactions(30)
    p.begin_transaction()
    for i in range(10):
        p.produce("seed", str(i).encode(), partition=i % 2)
    p.send_offsets_to_transaction(
        [TopicPartition("seed", 0, 3)],
        Consumer({"bootstrap.servers": bootstrap, "group.id": "seed-txn-group"}).consumer_group_metadata(),
    )
    p.commit_transaction(30)
    for protocol in ("classic", "consumer"):
        c = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": f"seed-{protocol}",
                "group.protocol": protocol,
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
            }
        )
        c.subscribe(["seed"])
        deadline = time.monotonic() + 20
        while not c.assignment() and time.monotonic() < deadline:
            c.poll(0.2)
        c.commit(offsets=[TopicPartition("seed", 0, 5), TopicPartition("seed", 1, 2)], asynchronous=False)
        c.close()
    scram = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096)
    upsert = UserScramCredentialUpsertion("alice", scram, b"secret")
    admin.alter_user_scram_credentials([upsert])["alice"].result()
    acl = AclBinding(
        ResourceType.TOPIC,
        "seed",
        ResourcePatternType.PREFIXED,
        "User:alice",
        "*",
        AclOperation.READ,
        AclPermissionType.ALLOW,
    )
    for f in admin.create_acls([acl]).values():
        f.result()


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as d:
        data = Path(d)
        broker = BrokerThread(
            data,
            {
                "offsets.topic.num.partitions": 1,
                "transaction.state.log.num.partitions": 1,
                "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                "allow.everyone.if.no.acl.found": True,
            },
        ).start()
        try:
            drive(broker.bootstrap)
        finally:
            broker.stop()
        made = 0
        for which, topic in enumerate(TOPICS):
            for segment in sorted((data / f"{topic}-0").glob("*.log")):
                body = segment.read_bytes()
                for mode in (0, 1):
                    (out / f"{topic}-{segment.stem}-m{mode}").write_bytes(bytes([which, mode]) + body)
                    made += 1
                snapshots = sorted((data / f"{topic}-0").glob("*.coordinator-snapshot"))
                if snapshots:
                    # Mode 2 reads what follows the batches as the snapshot.
                    snap = snapshots[-1].read_bytes()
                    (out / f"{topic}-{segment.stem}-m2").write_bytes(bytes([which, 2]) + body + snap)
                    made += 1
    print(f"{made} seeds in {out}")


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "fuzz/corpus/coordinator_logs"))
