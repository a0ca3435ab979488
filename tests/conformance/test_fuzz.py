"""Mutated and fragmented requests: every one is answered or its connection closed, the broker
stays up, and the log only ever holds what valid requests wrote."""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
import time
import uuid
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kcoord.protocol.messages import request_class
from tests.harness import BrokerProcess, api_versions_ok
from tests.unit.logutil import decode
from tests.wire import ApiKey, Conn, build_batch, request_header

# Derandomized: the same examples every run, so a failure against the broker reproduces.
FUZZ = settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))


def produce_payload(topic: str, records: bytes, version: int = 9) -> bytes:
    req = request_class(ApiKey.Produce)
    td = req.TopicProduceData(
        name=topic, partition_data=[req.TopicProduceData.PartitionProduceData(index=0, records=records)]
    )
    body = req(transactional_id=None, acks=-1, timeout_ms=5000, topic_data=[td]).encode(version=version)
    return request_header(ApiKey.Produce, version, 1, "fuzz", flexible=version >= 9) + body


def metadata_payload(topic: str) -> bytes:
    req = request_class(ApiKey.Metadata)
    body = req(
        topics=[req.MetadataRequestTopic(name=topic)],
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    ).encode(version=12)
    return request_header(ApiKey.Metadata, 12, 1, "fuzz", flexible=True) + body


def answered_or_closed(c: Conn, timeout: float = 10.0) -> bool:
    """True if the broker answered (one frame) or closed the connection within ``timeout``
    seconds; False if it kept the connection open without answering (a hang)."""
    c.sock.settimeout(timeout)
    try:
        c.recv_frame()
    except TimeoutError:  # first: socket.timeout is TimeoutError, itself an OSError
        return False
    except OSError:  # closed or reset (ConnectionError is an OSError too)
        return True
    return True


@contextlib.contextmanager
def one_connection_server(behaviour: str) -> Iterator[tuple[str, int]]:
    """A local server for one connection that ``answer``s one frame, ``close``s it at once, or
    ``hang``s: keeps it open without reading or writing until the block ends."""
    srv = socket.create_server(("127.0.0.1", 0))
    held: list[socket.socket] = []

    def serve() -> None:
        conn, _ = srv.accept()
        held.append(conn)
        if behaviour == "close":
            conn.close()
        elif behaviour == "answer":
            (size,) = struct.unpack(">i", conn.recv(4, socket.MSG_WAITALL))
            conn.recv(size, socket.MSG_WAITALL)
            conn.sendall(struct.pack(">i", 4) + b"\0\0\0\1")

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield srv.getsockname()[:2]
    finally:
        thread.join(timeout=5)
        for conn in held:
            conn.close()
        srv.close()


@pytest.mark.parametrize(("behaviour", "expected"), [("hang", False), ("close", True), ("answer", True)])
def test_answered_or_closed_fails_a_hanging_peer(behaviour: str, expected: bool) -> None:
    with one_connection_server(behaviour) as (host, port), Conn(host, port) as c:
        c.send_frame(b"request")
        started = time.monotonic()
        assert answered_or_closed(c, timeout=0.3) is expected
        assert time.monotonic() - started < 1


@pytest.fixture(scope="module")
def fuzz_topic(_broker_started: BrokerProcess) -> str:
    topic = f"fuzz-{uuid.uuid4().hex[:8]}"
    _broker_started.create_topic(topic)
    return topic


@given(data=st.data())
@FUZZ
def test_mutated_requests_are_answered_or_refused(
    broker: BrokerProcess, fuzz_topic: str, data: st.DataObject
) -> None:
    topic = fuzz_topic
    kind = data.draw(st.sampled_from(["produce", "metadata"]))
    payload = bytearray(
        produce_payload(topic, build_batch(count=3)) if kind == "produce" else metadata_payload(topic)
    )
    flips = data.draw(
        st.lists(st.tuples(st.integers(0, len(payload) - 1), st.integers(1, 255)), min_size=1, max_size=4)
    )
    for pos, x in flips:
        payload[pos] ^= x
    cut = data.draw(st.integers(0, 8))
    if cut:
        payload = payload[:-cut]
    with broker.connect() as c:
        c.send_frame(bytes(payload))
        assert answered_or_closed(c)
    assert api_versions_ok(broker)
    # Whatever got in is whole, valid batches: the partition reads back cleanly from offset 0.
    with broker.connect() as c:
        hw = c.list_offsets(topic, 0, -1).offset
        offset = 0
        while offset < hw:
            part = c.fetch(topic, 0, offset)
            assert part.error_code == 0
            recs = [r for r in decode(part.records) if r[0] >= offset]
            assert recs and recs[0][0] == offset
            offset = recs[-1][0] + 1


@given(sizes=st.lists(st.integers(1, 9), min_size=1, max_size=400))
@settings(max_examples=15, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
def test_requests_arriving_in_fragments(broker: BrokerProcess, sizes: list[int]) -> None:
    frames = []
    for corr in range(1, 6):
        payload = request_header(ApiKey.ApiVersions, 0, corr, "frag")
        frames.append(struct.pack(">i", len(payload)) + payload)
    stream = b"".join(frames)
    with broker.connect() as c:
        c.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        pos, i = 0, 0
        while pos < len(stream):
            n = sizes[i % len(sizes)]
            c.send_raw(stream[pos : pos + n])
            pos += n
            i += 1
        got = [struct.unpack_from(">ih", c.recv_frame(), 0) for _ in range(5)]
    assert got == [(corr, 0) for corr in range(1, 6)]
