"""A minimal raw Kafka client for tests: frames, headers, record batches, nothing hidden.

Requests are encoded with kafka-python's schema-driven classes (the same codecs the broker
uses), but everything around them (framing, correlation ids, reading the answer) is done here,
so tests can also send bytes no client library would.
"""

from __future__ import annotations

import socket
import struct
import time
from typing import Any

from kafka.record.default_records import DefaultRecordBatchBuilder

from kcoord.protocol.messages import ApiKey, register_schema_pair, request_class, response_class

__all__ = ["ApiKey", "Conn", "api", "build_batch", "fetch_request", "request_header"]


def api(key: int, name: str) -> Any:
    """The request class of an API key, registering kcoord's schema pair ``name`` for the APIs
    kafka-python has no classes for (share groups, KIP-848 consumer groups); looked up at each
    use, as other test modules register them too."""
    cls = request_class(key)
    if cls is None:
        register_schema_pair(name)
        cls = request_class(key)
    return cls


def request_header(
    api_key: int,
    version: int,
    correlation_id: int,
    client_id: str | None = "kcoord-tests",
    flexible: bool = False,
) -> bytes:
    """Request header v1 (v2 adds an empty tagged-field section for flexible versions)."""
    head = struct.pack(">hhi", api_key, version, correlation_id)
    if client_id is None:
        head += struct.pack(">h", -1)
    else:
        raw = client_id.encode()
        head += struct.pack(">h", len(raw)) + raw
    return head + (b"\x00" if flexible else b"")


def build_batch(
    records: list[tuple[bytes | None, bytes | None, int]] | None = None,
    *,
    count: int | None = None,
    timestamp: int = 1_700_000_000_000,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    headers: list[tuple[str, bytes]] | None = None,
    transactional: bool = False,
) -> bytes:
    """One v2 record batch. ``records``: (key, value, timestamp); or ``count`` generated records."""
    if records is None:
        n = 1 if count is None else count
        records = [(f"k{i}".encode(), f"v{i}".encode(), timestamp + i) for i in range(n)]
    b = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=transactional,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        batch_size=1 << 30,
    )
    for i, (key, value, ts) in enumerate(records):
        b.append(i, timestamp=ts, key=key, value=value, headers=headers or [])
    return bytes(b.build())


def fetch_request(
    topic: str,
    partitions: list[tuple[int, int]],
    session_id: int = 0,
    epoch: int = -1,
    forgotten: list[int] | None = None,
    max_wait_ms: int = 0,
    isolation: int = 0,
    partition_max_bytes: int = 1 << 20,
    max_bytes: int = 1 << 22,
) -> dict[str, Any]:
    """The fields of a Fetch request (any version) for ``(partition, offset)`` pairs of one topic."""
    req = request_class(ApiKey.Fetch)
    ft = req.FetchTopic(
        topic=topic,
        partitions=[
            req.FetchTopic.FetchPartition(
                partition=p,
                current_leader_epoch=-1,
                fetch_offset=off,
                last_fetched_epoch=-1,
                log_start_offset=-1,
                partition_max_bytes=partition_max_bytes,
            )
            for p, off in partitions
        ],
    )
    return {
        "replica_id": -1,
        "max_wait_ms": max_wait_ms,
        "min_bytes": 1,
        "max_bytes": max_bytes,
        "isolation_level": isolation,
        "session_id": session_id,
        "session_epoch": epoch,
        "topics": [ft] if partitions else [],
        "forgotten_topics_data": [req.ForgottenTopic(topic=topic, partitions=forgotten)] if forgotten else [],
        "rack_id": "",
    }


class Conn:
    """One blocking connection to a broker."""

    def __init__(self, host: str, port: int, timeout: float = 10.0) -> None:
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._corr = 0

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> Conn:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- bytes --------------------------------------------------------------------------------
    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def send_frame(self, payload: bytes) -> None:
        self.sock.sendall(struct.pack(">i", len(payload)) + payload)

    def _recv_exact(self, n: int) -> bytes:
        out = bytearray()
        while len(out) < n:
            chunk = self.sock.recv(n - len(out))
            if not chunk:
                raise ConnectionError(f"connection closed after {len(out)} of {n} bytes")
            out += chunk
        return bytes(out)

    def recv_frame(self) -> bytes:
        (size,) = struct.unpack(">i", self._recv_exact(4))
        return self._recv_exact(size)

    def is_closed_by_peer(self, timeout: float = 5.0) -> bool:
        """True once the broker closed the connection (EOF or reset) within ``timeout``."""
        deadline = time.monotonic() + timeout
        self.sock.settimeout(0.2)
        try:
            while time.monotonic() < deadline:
                try:
                    data = self.sock.recv(65536)
                except TimeoutError:
                    continue
                except (ConnectionResetError, BrokenPipeError):
                    return True
                if not data:
                    return True
            return False
        finally:
            self.sock.settimeout(10.0)

    # --- requests -----------------------------------------------------------------------------
    def next_correlation_id(self) -> int:
        self._corr += 1
        return self._corr

    def send(self, api_key: int, version: int, client_id: str | None = "kcoord-tests", **fields: Any) -> int:
        cls = request_class(api_key)
        assert cls is not None
        body = cls(**fields).encode(version=version)
        corr = self.next_correlation_id()
        head = request_header(api_key, version, corr, client_id, cls.flexible_version_q(version))
        self.send_frame(head + body)
        return corr

    def recv(self, api_key: int, version: int, correlation_id: int) -> Any:
        frame = self.recv_frame()
        (corr,) = struct.unpack_from(">i", frame, 0)
        assert corr == correlation_id, f"correlation id {corr}, expected {correlation_id}"
        cls = response_class(api_key)
        assert cls is not None
        pos = 4
        if cls.flexible_version_q(version) and api_key != ApiKey.ApiVersions:
            assert frame[pos] == 0, "response header v1 should carry no tagged fields"
            pos += 1
        return cls.decode(frame[pos:], version=version)

    def request(self, api_key: int, version: int, **fields: Any) -> Any:
        corr = self.send(api_key, version, **fields)
        return self.recv(api_key, version, corr)

    # --- conveniences -------------------------------------------------------------------------
    def api_versions(self, version: int = 3) -> Any:
        fields = {}
        if version >= 3:
            fields = {"client_software_name": "kcoord-tests", "client_software_version": "1.0"}
        return self.request(ApiKey.ApiVersions, version, **fields)

    def create_topic(self, name: str, partitions: int = 1, configs: dict[str, str] | None = None) -> Any:
        req = request_class(ApiKey.CreateTopics)
        topic = req.CreatableTopic(
            name=name,
            num_partitions=partitions,
            replication_factor=1,
            assignments=[],
            configs=[
                req.CreatableTopic.CreatableTopicConfig(name=k, value=v) for k, v in (configs or {}).items()
            ],
        )
        resp = self.request(ApiKey.CreateTopics, 7, topics=[topic], timeout_ms=10_000, validate_only=False)
        assert resp.topics[0].error_code == 0, resp
        return resp

    def produce(self, topic: str, partition: int, batches: bytes, acks: int = -1, version: int = 9) -> Any:
        req = request_class(ApiKey.Produce)
        td = req.TopicProduceData(
            name=topic,
            partition_data=[req.TopicProduceData.PartitionProduceData(index=partition, records=batches)],
        )
        resp = self.request(
            ApiKey.Produce, version, transactional_id=None, acks=acks, timeout_ms=10_000, topic_data=[td]
        )
        return resp.responses[0].partition_responses[0]

    def fetch(
        self,
        topic: str,
        partition: int,
        offset: int,
        max_bytes: int = 1 << 20,
        version: int = 12,
        max_wait_ms: int = 0,
    ) -> Any:
        fields = fetch_request(
            topic,
            [(partition, offset)],
            max_wait_ms=max_wait_ms,
            partition_max_bytes=max_bytes,
            max_bytes=max_bytes,
        )
        resp = self.request(ApiKey.Fetch, version, **fields)
        return resp.responses[0].partitions[0]

    def list_offsets(
        self, topic: str, partition: int, timestamp: int, isolation: int = 0, version: int = 7
    ) -> Any:
        req = request_class(ApiKey.ListOffsets)
        lt = req.ListOffsetsTopic(
            name=topic,
            partitions=[
                req.ListOffsetsTopic.ListOffsetsPartition(
                    partition_index=partition, current_leader_epoch=-1, timestamp=timestamp, max_num_offsets=1
                )
            ],
        )
        resp = self.request(
            ApiKey.ListOffsets, version, replica_id=-1, isolation_level=isolation, topics=[lt], timeout_ms=0
        )
        return resp.topics[0].partitions[0]
