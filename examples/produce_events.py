"""Write JSON click events to a Kafka topic (kcoord or any Kafka), for the Spark examples.

    BOOTSTRAP=localhost:9092 TOPIC=events python examples/produce_events.py

Environment: BOOTSTRAP (localhost:9092), TOPIC (events), PARTITIONS (3, used when the topic is
created here), COUNT (events to write, 0 = forever), INTERVAL_MS (pause between events, 100).
A secured listener: SECURITY_PROTOCOL (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL), SASL_MECHANISM,
SASL_USERNAME, SASL_PASSWORD, SSL_CAFILE.
"""

from __future__ import annotations

import json
import os
import random
import time

from kafka import KafkaAdminClient, KafkaProducer
from kafka.admin import NewTopic
from kafka.errors import TopicAlreadyExistsError

ACTIONS = ["view", "click", "add_to_cart", "purchase"]


def security() -> dict[str, str]:
    """kafka-python's security settings from the environment (none for PLAINTEXT)."""
    names = {
        "SECURITY_PROTOCOL": "security_protocol",
        "SASL_MECHANISM": "sasl_mechanism",
        "SASL_USERNAME": "sasl_plain_username",
        "SASL_PASSWORD": "sasl_plain_password",
        "SSL_CAFILE": "ssl_cafile",
    }
    return {arg: os.environ[env] for env, arg in names.items() if os.environ.get(env)}


def ensure_topic(bootstrap: str, topic: str, partitions: int) -> None:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="events-producer", **security())
    try:
        admin.create_topics([NewTopic(topic, partitions, 1)])
        print(f"created topic {topic} with {partitions} partitions", flush=True)
    except TopicAlreadyExistsError:
        pass
    finally:
        admin.close()


def main() -> None:
    bootstrap = os.environ.get("BOOTSTRAP", "localhost:9092")
    topic = os.environ.get("TOPIC", "events")
    count = int(os.environ.get("COUNT", "0"))
    interval = int(os.environ.get("INTERVAL_MS", "100")) / 1000
    ensure_topic(bootstrap, topic, int(os.environ.get("PARTITIONS", "3")))
    producer = KafkaProducer(
        bootstrap_servers=bootstrap,
        client_id="events-producer",
        enable_idempotence=True,
        linger_ms=20,
        **security(),
    )
    rng = random.Random(42)
    n = 0
    try:
        while count == 0 or n < count:
            user = f"user-{rng.randrange(50)}"
            event = {"id": n, "user": user, "action": rng.choice(ACTIONS), "ts": int(time.time() * 1000)}
            producer.send(
                topic, key=user.encode(), value=json.dumps(event).encode(), headers=[("source", b"example")]
            )
            n += 1
            if n % 100 == 0:
                print(f"sent {n} events", flush=True)
            if interval:
                time.sleep(interval)
        producer.flush()
    finally:
        producer.close()
    print(f"sent {n} events to {topic}", flush=True)


if __name__ == "__main__":
    main()
