"""Topics, their partitions' leaders (Metadata) and log offsets (ListOffsets), as plain data."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from kcoord.cli.admin import Admin, KafkaRequestError, request
from kcoord.protocol.messages import ApiKey

TopicPartition = tuple[str, int]

# ListOffsets' special timestamps (Kafka's ListOffsetsRequest.EARLIEST_TIMESTAMP, LATEST_TIMESTAMP).
EARLIEST = -2
LATEST = -1
UNKNOWN_TOPIC_OR_PARTITION = 3


@dataclass(frozen=True)
class PartitionInfo:
    partition: int
    leader: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]


@dataclass(frozen=True)
class TopicInfo:
    name: str
    topic_id: str
    internal: bool
    partitions: tuple[PartitionInfo, ...]


def describe_topics(admin: Admin, names: Iterable[str] | None = None) -> dict[str, TopicInfo]:
    """Metadata of ``names`` (every topic when None); never creates a topic. An unknown topic
    is a KafkaRequestError (UNKNOWN_TOPIC_OR_PARTITION)."""
    topics = None if names is None else [{"name": n} for n in dict.fromkeys(names)]
    req = request(
        ApiKey.Metadata,
        topics=topics,
        allow_auto_topic_creation=False,
        include_cluster_authorized_operations=False,
        include_topic_authorized_operations=False,
        min_version=1,
    )
    resp = admin.send(req)
    out = {}
    for t in resp.topics:
        if t.error_code:
            raise KafkaRequestError(t.error_code, None, f"topic {t.name}")
        parts = tuple(
            sorted(
                (
                    PartitionInfo(p.partition_index, p.leader_id, tuple(p.replica_nodes), tuple(p.isr_nodes))
                    for p in t.partitions
                ),
                key=lambda p: p.partition,
            )
        )
        out[t.name] = TopicInfo(t.name, str(getattr(t, "topic_id", "") or ""), bool(t.is_internal), parts)
    return dict(sorted(out.items()))


def partitions_of(admin: Admin, topics: Iterable[str]) -> dict[str, list[int]]:
    return {name: [p.partition for p in t.partitions] for name, t in describe_topics(admin, topics).items()}


def list_offsets(admin: Admin, specs: Mapping[TopicPartition, int]) -> dict[TopicPartition, int]:
    """ListOffsets at each partition's leader: ``spec`` EARLIEST, LATEST or a timestamp in ms.
    A timestamp no record reaches answers -1, as Kafka does."""
    if not specs:
        return {}
    meta = describe_topics(admin, {t for t, _ in specs})
    by_leader: dict[int, dict[str, list[dict[str, int]]]] = defaultdict(lambda: defaultdict(list))
    for (topic, p), spec in sorted(specs.items()):
        parts = {i.partition: i for i in meta[topic].partitions}
        if p not in parts:
            raise KafkaRequestError(UNKNOWN_TOPIC_OR_PARTITION, None, f"partition {topic}-{p}")
        by_leader[parts[p].leader][topic].append(
            {"partition_index": p, "current_leader_epoch": -1, "timestamp": spec}
        )
    out = {}
    for leader, topics in by_leader.items():
        req = request(
            ApiKey.ListOffsets,
            replica_id=-1,
            isolation_level=0,
            topics=[{"name": t, "partitions": ps} for t, ps in topics.items()],
            timeout_ms=30000,
            min_version=1,
        )
        resp = admin.send(req, leader)
        for t in resp.topics:
            for p in t.partitions:
                if p.error_code:
                    raise KafkaRequestError(p.error_code, None, f"partition {t.name}-{p.partition_index}")
                out[(t.name, p.partition_index)] = p.offset
    return out
