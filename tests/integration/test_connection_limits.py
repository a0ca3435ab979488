"""Limits under load and abuse: max.connections(.per.ip), connections.max.idle.ms, and the bound on
answers held for a client that does not read them (kcoord/server/connection_quotas.py and the
backlog rule of kcoord/server/connection.py)."""

from __future__ import annotations

import os
import socket
import struct
import time
from pathlib import Path

from kafka import KafkaProducer

from kcoord.protocol.messages import ApiKey, request_class
from tests.harness import BrokerFactory, BrokerProcess, free_port, socket_server_metrics
from tests.wire import Conn, fetch_request, request_header


def host_port(broker: BrokerProcess) -> tuple[str, int]:
    host, port = broker.bootstrap.rsplit(":", 1)
    return host, int(port)


def served(broker: BrokerProcess) -> Conn:
    conn = Conn(*host_port(broker))
    assert conn.api_versions().error_code == 0
    return conn


def refused(broker: BrokerProcess) -> bool:
    conn = Conn(*host_port(broker))
    try:
        return conn.is_closed_by_peer(timeout=5)
    finally:
        conn.close()


def rss_mb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) // 1024
    raise AssertionError("no VmRSS")


def test_max_connections_per_ip_refuses_the_excess_and_serves_the_rest(broker_factory: BrokerFactory) -> None:
    http_port = free_port()
    broker = broker_factory(
        ["--max-connections-per-ip", "3", f"--http-listeners=http://127.0.0.1:{http_port}"]
    )
    held = [served(broker) for _ in range(3)]
    assert refused(broker)
    for conn in held:  # the connections within the limit are still served
        assert conn.api_versions().error_code == 0
    held.pop().close()
    time.sleep(0.2)
    held.append(served(broker))  # a slot freed by a close is usable again
    assert "Too many connections from 127.0.0.1 (maximum = 3)" in broker.log_text()
    # What an operator sees: three connections open; the harness's readiness probe and the one
    # closed above were created and closed; one refused at accept (never created).
    listener = frozenset({("listener", "PLAINTEXT"), ("networkprocessor", "0")})
    m = socket_server_metrics(http_port)
    assert m[("connection_count", listener)] == 3
    assert m[("connection_creation_total", listener)] == 5
    assert m[("connection_close_total", listener)] == 2
    assert m[("connection_refused_total", frozenset({("reason", "per_ip")}))] == 1
    assert m[("connection_refused_total", frozenset({("reason", "broker")}))] == 0
    for conn in held:
        conn.close()


def test_overrides_and_the_broker_wide_limit(broker_factory: BrokerFactory) -> None:
    broker = broker_factory(
        [
            "--max-connections-per-ip",
            "1",
            "--max-connections-per-ip-overrides",
            "127.0.0.1:4",
            "--max-connections",
            "3",
        ]
    )
    held = [served(broker) for _ in range(3)]
    assert refused(broker)  # the override allows 4 from 127.0.0.1, the broker 3 in all
    assert "max.connections = 3" in broker.log_text()
    for conn in held:
        conn.close()


def test_idle_connections_are_closed_and_active_ones_kept(broker_factory: BrokerFactory) -> None:
    broker = broker_factory(["--connections-max-idle-ms", "600"])
    idle, active = served(broker), served(broker)
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline:
        assert active.api_versions().error_code == 0
        time.sleep(0.1)
    assert idle.is_closed_by_peer(timeout=1)
    assert active.api_versions().error_code == 0
    active.close()
    idle.close()


def test_a_client_that_never_reads_its_answers_holds_bounded_memory(broker_factory: BrokerFactory) -> None:
    """600 pipelined Fetches of a 20 MB partition, none read: before the bound the broker held
    every answer (2.7 GB); now it stops taking the client's requests while its answers wait."""
    broker = broker_factory(["--log-flush-policy", "os"])
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, linger_ms=20, batch_size=1 << 20)
    value = os.urandom(1000)
    for _ in range(20_000):
        producer.send("big", value)
    producer.flush()
    producer.close()
    assert broker.proc is not None
    before = rss_mb(broker.proc.pid)

    greedy = socket.create_connection(host_port(broker))
    greedy.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    greedy.setblocking(False)
    req = request_class(ApiKey.Fetch)(
        **fetch_request("big", [(0, 0)], partition_max_bytes=50 << 20, max_bytes=50 << 20)
    )
    body = req.encode(version=11)
    sent = 0
    for i in range(600):
        frame = request_header(ApiKey.Fetch, 11, i) + body
        try:
            greedy.send(struct.pack(">i", len(frame)) + frame)
        except BlockingIOError:
            break
        sent += 1
    time.sleep(3)
    grown = rss_mb(broker.proc.pid) - before
    other = served(broker)  # another client is served meanwhile
    other.close()
    greedy.close()
    assert sent >= 100, sent
    assert grown < 200, f"broker grew {grown} MB holding answers for a client that reads none"


def test_a_slow_sender_holds_only_its_own_connection(broker_factory: BrokerFactory) -> None:
    broker = broker_factory([])
    slow = socket.create_connection(host_port(broker))
    frame = request_header(ApiKey.ApiVersions, 0, 1)
    data = struct.pack(">i", len(frame)) + frame
    for b in data[:-1]:  # one byte at a time, the frame never finished meanwhile
        slow.send(bytes([b]))
        other = served(broker)
        other.close()
        time.sleep(0.02)
    slow.send(data[-1:])
    slow.settimeout(5)
    assert len(slow.recv(65536)) > 4  # and it is answered once its frame is whole
    slow.close()


def test_size_prefixes_alone_make_the_broker_allocate_nothing(broker_factory: BrokerFactory) -> None:
    """A large frame gets a buffer of its own size only once half of it has arrived
    (connection.py's _keep): twenty connections that each announce a 100 MB request and send 1 KB of
    it must not make the broker allocate (and zero) 2 GB for bytes nobody has sent."""
    broker = broker_factory([])
    assert broker.proc is not None
    before = rss_mb(broker.proc.pid)
    announced = 100_000_000  # under socket.request.max.bytes (104857600)
    senders = []
    for _ in range(20):
        s = socket.create_connection(host_port(broker))
        s.sendall(struct.pack(">i", announced) + request_header(ApiKey.Produce, 9, 1) + bytes(1000))
        senders.append(s)
    time.sleep(1)
    other = served(broker)  # the broker still serves others meanwhile
    other.close()
    grown = rss_mb(broker.proc.pid) - before
    for s in senders:
        s.close()
    assert grown < 100, f"broker grew {grown} MB for 20 size prefixes of {announced} bytes"
