"""The operations endpoint with real clients: /metrics moves as clients commit, rebalance and
share-acknowledge; lag is the high watermark minus the committed offset; /health, /api/ and the
HTTP listener setting.

Metrics are read the way Prometheus reads them: the text of /metrics parsed with
prometheus_client's parser, samples looked up by name and labels.
"""

from __future__ import annotations

import asyncio
import json
import time
import urllib.error
import urllib.request
from typing import Any

import pytest
from kafka import KafkaConsumer, TopicPartition
from kafka.structs import OffsetAndMetadata
from prometheus_client.parser import text_string_to_metric_families

from kcoord.config import BrokerConfig
from kcoord.http.server import OpsHttp
from kcoord.server.app import Broker
from kcoord.testing.broker import BrokerThread
from tests.harness import BrokerProcess, free_port, shared_broker, wait_assigned
from tests.integration.test_share_confluent import produce, run_worker, set_earliest, start_offsets
from tests.wire import ApiKey, Conn

HTTP_PORT = free_port()
_started, obroker = shared_broker(
    "obroker", [f"--http-listeners=http://127.0.0.1:{HTTP_PORT}", "--group-initial-rebalance-delay-ms=0"]
)
URL = f"http://127.0.0.1:{HTTP_PORT}"

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def get(path: str, method: str = "GET") -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(urllib.request.Request(URL + path, method=method), timeout=10) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def scrape() -> Samples:
    status, body = get("/metrics")
    assert status == 200
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(body.decode())
        for s in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


GC = "kafka_server_group_coordinator_metrics_"


def test_commits_rebalances_and_lag(obroker: BrokerProcess, unique_topic: str) -> None:
    topic, group = unique_topic, unique_topic + "-g"
    obroker.create_topic(topic, 2)
    produce(obroker, topic, 0, 10)
    produce(obroker, topic, 1, 20)
    before = scrape()

    consumer = KafkaConsumer(
        topic, bootstrap_servers=obroker.bootstrap, group_id=group, enable_auto_commit=False,
        auto_offset_reset="earliest",
    )  # fmt: skip
    wait_assigned(consumer, 2)
    consumer.commit({TopicPartition(topic, 0): OffsetAndMetadata(6, "", -1),
                     TopicPartition(topic, 1): OffsetAndMetadata(20, "", -1)})  # fmt: skip
    during = scrape()
    consumer.close()
    after = scrape()

    # Kafka's group-coordinator-metrics: two offsets committed, one completed rebalance, the group
    # Stable while the consumer is in it and Empty once it left.
    commits = GC + "offset_commit_count"
    assert value(during, commits) - value(before, commits) == 2
    rebalances = GC + "group_completed_rebalance_count"
    assert value(during, rebalances) - value(before, rebalances) >= 1
    assert value(during, GC + "classic_group_count", state="Stable") >= 1
    empty = GC + "classic_group_count"
    assert value(after, empty, state="Empty") - value(during, empty, state="Empty") == 1
    assert value(after, GC + "group_count", protocol="classic") >= 1
    assert value(after, GC + "offset_count") - value(before, GC + "offset_count") == 2

    # kafka-exporter's lag: high watermark - committed offset, per partition and per topic.
    g = {"consumergroup": group, "topic": topic}
    assert value(after, "kafka_consumergroup_current_offset", **g, partition="0") == 6
    assert value(after, "kafka_consumergroup_lag", **g, partition="0") == 10 - 6
    assert value(after, "kafka_consumergroup_lag", **g, partition="1") == 0
    assert value(after, "kafka_consumergroup_lag_sum", **g) == 4
    assert value(during, "kafka_consumergroup_members", consumergroup=group) == 1
    assert value(after, "kafka_consumergroup_members", consumergroup=group) == 0

    # The logs, as the JMX exporter names kafka.log:type=Log.
    assert value(after, "kafka_log_log_logendoffset", topic=topic, partition="1") == 20
    assert value(after, "kafka_log_log_logstartoffset", topic=topic, partition="1") == 0
    assert value(after, "kafka_log_log_size", topic=topic, partition="1") > 0

    # RequestMetrics: the commit was counted by name and version, with its error and its time.
    requests = "kafka_network_requestmetrics_requests_total"
    commit_versions = [dict(labels)["version"] for name, labels in after if name == requests
                       and dict(labels)["request"] == "OffsetCommit"]  # fmt: skip
    assert commit_versions
    assert sum(value(after, requests, request="OffsetCommit", version=v) for v in commit_versions) >= 1
    errors = "kafka_network_requestmetrics_errors_total"
    assert value(after, errors, request="JoinGroup", error="NONE") >= 1
    assert value(after, "kafka_network_requestmetrics_totaltimems_count", request="OffsetCommit") >= 1

    # The JSON API tells the same.
    status, body = get(f"/api/groups/{group}")
    assert status == 200
    described = json.loads(body)
    assert described["type"] == "classic" and described["state"] == "Empty"
    assert {(o["partition"], o["offset"], o["lag"]) for o in described["offsets"]} == {(0, 6, 4), (1, 20, 0)}
    listed = json.loads(get("/api/groups")[1])["groups"]
    assert {"group_id": group, "type": "classic", "state": "Empty", "protocol_type": "consumer",
            "members": 0, "lag": 4} in listed  # fmt: skip
    topics = {t["name"]: t for t in json.loads(get("/api/topics")[1])["topics"]}
    assert [p["high_watermark"] for p in topics[topic]["partitions"]] == [10, 20]


def test_errors_are_counted_by_code(obroker: BrokerProcess, unique_topic: str) -> None:
    """A JoinGroup with an empty group id is answered INVALID_GROUP_ID (a top-level error)."""
    before = scrape()
    with obroker.connect() as c:
        c.request(ApiKey.JoinGroup, 5,
                  group_id="", session_timeout_ms=10000, rebalance_timeout_ms=10000, member_id="",
                  group_instance_id=None, protocol_type="consumer", protocols=[])  # fmt: skip
    after = scrape()
    errors = "kafka_network_requestmetrics_errors_total"
    labels = {"request": "JoinGroup", "error": "INVALID_GROUP_ID"}
    assert value(after, errors, **labels) - value(before, errors, **labels) == 1


def test_share_acknowledgements(obroker: BrokerProcess, unique_topic: str) -> None:
    pytest.importorskip("confluent_kafka")
    group, n = unique_topic + "-g", 20
    obroker.create_topic(unique_topic, 1)
    produce(obroker, unique_topic, 0, n)
    set_earliest(obroker, group)
    before = scrape()
    run_worker(obroker, group, unique_topic, n, "explicit", release="p0-3")
    after = scrape()

    acks = GC + "record_acknowledgement_count"
    share = {"protocol": "share"}
    assert (
        value(after, acks, **share, ack_type="accept") - value(before, acks, **share, ack_type="accept") == n
    )
    assert (
        value(after, acks, **share, ack_type="release") - value(before, acks, **share, ack_type="release")
        == 1
    )
    assert value(after, GC + "group_count", protocol="share") >= 1
    labels = {"sharegroup": group, "topic": unique_topic, "partition": "0"}
    assert start_offsets(obroker, group) == {0: n}
    assert value(after, "kafka_sharegroup_start_offset", **labels) == n
    assert value(after, "kafka_sharegroup_lag", **labels) == 0
    described = json.loads(get(f"/api/groups/{group}")[1])
    assert described["type"] == "share" and described["offsets"][0]["offset"] == n


def test_unknown_paths_and_methods(obroker: BrokerProcess) -> None:
    assert get("/nothing-here")[0] == 404
    assert get("/api/groups/no-such-group")[0] == 404
    assert get("/metrics", method="POST")[0] == 405
    status, body = get("/health")
    assert (status, json.loads(body)) == (200, {"status": "ready"})


def test_health_is_503_until_the_broker_is_ready(tmp_path: Any) -> None:
    """The broker's own readiness: not ready before start() has replayed the logs and opened the
    listeners, ready after, not ready again once it stops."""

    async def run() -> list[tuple[int, dict[str, str]]]:
        config = BrokerConfig(listeners="PLAINTEXT://127.0.0.1:0", log_dirs=str(tmp_path), http_listeners="")
        broker = Broker(config)
        seen = []
        for step in ("new", "started", "stopped"):
            if step == "started":
                await broker.start()
            elif step == "stopped":
                await broker.stop()
            response = OpsHttp(broker.services, broker.status).health()
            assert response.body is not None
            seen.append((response.status, json.loads(bytes(response.body))))  # type: ignore[arg-type]
        return seen

    assert asyncio.run(run()) == [
        (503, {"status": "starting"}),
        (200, {"status": "ready"}),
        (503, {"status": "stopping"}),
    ]


def test_empty_http_listeners_binds_nothing(tmp_path: Any) -> None:
    assert BrokerConfig(http_listeners="").http_endpoints() == []
    assert BrokerConfig(http_listeners=" , ").http_endpoints() == []
    broker = BrokerThread(tmp_path, http=False).start()  # http.listeners = ""
    try:
        assert broker.http_url is None  # the broker bound no HTTP address
    finally:
        broker.stop()


def test_a_log_the_cleaner_cannot_clean_is_counted_as_uncleanable(tmp_path: Any, monkeypatch: Any) -> None:
    """kafka.log:type=LogCleanerManager,name=uncleanable-partitions-count, as the JMX exporter
    names it: a compacted topic whose cleaning pass fails (a record the parser refuses; here the
    pass raises) is counted once, and stays counted, not cleaned, until the broker restarts."""
    from kafka import KafkaProducer

    from kcoord.storage import log_cleaner

    def unreadable(*_args: Any) -> Any:
        raise ValueError("a record the cleaner cannot read")

    monkeypatch.setattr(log_cleaner, "compact", unreadable)
    broker = BrokerThread(tmp_path, {"log.cleaner.backoff.ms": 100}, http=True).start()
    name = "kafka_log_logcleanermanager_uncleanable_partitions_count"
    labels = frozenset({("logDirectory", str(tmp_path.resolve()))})
    try:
        assert broker.http_url is not None

        def gauge() -> float:
            with urllib.request.urlopen(broker.http_url + "/metrics", timeout=10) as r:
                families = text_string_to_metric_families(r.read().decode())
            return {(s.name, frozenset(s.labels.items())): s.value for f in families for s in f.samples}[
                (name, labels)
            ]

        assert gauge() == 0
        with Conn(broker.host, broker.port) as conn:
            conn.create_topic(
                "c", partitions=1, configs={"cleanup.policy": "compact", "segment.bytes": "1048576"}
            )
        producer = KafkaProducer(bootstrap_servers=broker.bootstrap, linger_ms=5)
        for i in range(1_400):  # ~1.4 MiB: the first segment rolls, and is all dirty
            producer.send("c", key=b"k%d" % (i % 10), value=b"v" * 1000)
        producer.flush()
        producer.close()
        deadline = time.monotonic() + 20
        while gauge() < 1:
            assert time.monotonic() < deadline, "no cleaning pass failed"
            time.sleep(0.1)
        time.sleep(0.5)  # several more looks of the cleaner: the log is not counted twice
        assert gauge() == 1
    finally:
        broker.stop()
