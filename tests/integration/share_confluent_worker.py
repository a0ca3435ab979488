"""One confluent-kafka (librdkafka) ShareConsumer in its own process, so that a crash of the
native client (e.g. a segfault in close()) fails the test instead of killing pytest.

    python -m tests.integration.share_confluent_worker BOOTSTRAP GROUP TOPIC RECORDS MODE [RELEASE_ONCE]

MODE is ``explicit`` (acknowledge every record, RELEASE for values in RELEASE_ONCE=v1,v2 on
their first delivery, ACCEPT otherwise, then commit_sync after each poll), ``implicit``, or
``delete-topic`` (implicit, and the topic is deleted before the final commit_sync).
Polls until RECORDS distinct offsets have been accepted, then close(). Prints one JSON line
per event: {"rec": [partition, offset, delivery count, value]}, {"commit": [partition, offsets, error]},
{"poll_error": message} (then exit status 1) and finally {"closed": true}.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any


def emit(obj: object) -> None:
    print(json.dumps(obj), flush=True)


def main(argv: list[str]) -> int:
    from confluent_kafka import ShareConsumer

    bootstrap, group, topic, records, mode = argv[:5]
    release_once = set(argv[5].split(",")) if len(argv) > 5 and argv[5] else set()
    explicit = mode == "explicit"
    consumer = ShareConsumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "share.acknowledgement.mode": "explicit" if explicit else "implicit",
        }
    )

    def on_commit(offsets: dict, exc: object) -> None:
        for tp, offs in offsets.items():
            emit({"commit": [tp.partition, sorted(offs), None if exc is None else str(exc)]})

    consumer.set_acknowledgement_commit_callback(on_commit)
    # Whatever ends the worker, the consumer is closed before the interpreter exits: CI saw a
    # worker whose poll() had raised (a corrupt batch) still running 120 s later, its handle left
    # to be destroyed during the interpreter's finalization.
    try:
        return consume(consumer, bootstrap, topic, int(records), mode, release_once)
    finally:
        consumer.close()
        emit({"closed": True})


def consume(
    consumer: Any, bootstrap: str, topic: str, records: int, mode: str, release_once: set[str]
) -> int:
    from confluent_kafka import AcknowledgeType, KafkaException

    explicit = mode == "explicit"
    consumer.subscribe([topic])
    accepted: set[tuple[int, int]] = set()
    released: set[str] = set()
    deadline = time.monotonic() + 60
    while len(accepted) < records and time.monotonic() < deadline:
        try:
            msgs = consumer.poll(0.5)
        except KafkaException as e:  # e.g. CORRUPT_MESSAGE: the worker fails, naming it
            print(f"poll raised: {e}", file=sys.stderr, flush=True)
            emit({"poll_error": str(e)})
            return 1
        for m in msgs:
            if m.error() is not None:
                emit({"error": str(m.error())})
                continue
            value = m.value().decode()
            emit({"rec": [m.partition(), m.offset(), m.delivery_count(), value]})
            if not explicit:
                accepted.add((m.partition(), m.offset()))
                continue
            if value in release_once and value not in released:
                released.add(value)
                consumer.acknowledge(m, AcknowledgeType.RELEASE)
            else:
                consumer.acknowledge(m, AcknowledgeType.ACCEPT)
                accepted.add((m.partition(), m.offset()))
        if explicit and len(msgs):
            consumer.commit_sync()
    if mode == "delete-topic":
        from confluent_kafka.admin import AdminClient

        admin = AdminClient({"bootstrap.servers": bootstrap})  # kept alive until its futures resolve
        for fut in admin.delete_topics([topic]).values():
            fut.result(timeout=30)
        emit({"deleted": topic})
    if not explicit:
        try:
            consumer.commit_sync()  # accepts the records of the last poll
        except Exception as e:  # the acknowledgements of a deleted topic fail
            emit({"commit_sync": str(e)})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
