"""Bad input over raw sockets: answered as Kafka answers it, or the connection is closed, and the
broker keeps serving everybody else."""

from __future__ import annotations

import os
import struct
import threading
from collections.abc import Callable

import pytest

from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.messages import request_class, response_class
from tests.harness import BrokerProcess, api_versions_ok
from tests.wire import ApiKey, Conn, build_batch, fetch_request, request_header

INT32_MAX = 2**31 - 1


def metadata_frame(correlation_id: int = 1) -> bytes:
    body = request_class(ApiKey.Metadata)(
        topics=None,
        allow_auto_topic_creation=False,
        include_cluster_authorized_operations=False,
        include_topic_authorized_operations=False,
    ).encode(version=12)
    return request_header(ApiKey.Metadata, 12, correlation_id, "t", flexible=True) + body


def framed(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


BAD_INPUTS: dict[str, Callable[[], bytes]] = {
    "http-request": lambda: b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n",
    "tls-client-hello": lambda: bytes.fromhex("160301020001") + os.urandom(40),
    "random-frame": lambda: framed(b"\x7f\xf0" + os.urandom(30)),
    "size-int32-max": lambda: struct.pack(">i", INT32_MAX) + b"\x00" * 16,
    "size-negative": lambda: struct.pack(">i", -1) + b"\x00" * 16,
    "size-int32-min": lambda: struct.pack(">i", -(2**31)),
    "size-zero": lambda: struct.pack(">i", 0),
    "shorter-than-a-header": lambda: framed(b"\x00\x03\x00"),
    "unknown-api-key": lambda: framed(request_header(1000, 0, 1) + b"\x00" * 8),
    "negative-api-key": lambda: framed(request_header(-5, 0, 1) + b"\x00" * 8),
    "metadata-v999": lambda: framed(request_header(ApiKey.Metadata, 999, 1) + b"\x00" * 8),
    "produce-v999": lambda: framed(request_header(ApiKey.Produce, 999, 1) + b"\x00" * 8),
    "fetch-negative-version": lambda: framed(request_header(ApiKey.Fetch, -1, 1) + b"\x00" * 8),
    "client-id-past-end": lambda: framed(struct.pack(">hhih", ApiKey.Metadata, 12, 1, 500) + b"abc"),
    "truncated-metadata-body": lambda: framed(metadata_frame()[:-3]),
    "truncated-tagged-fields": lambda: framed(request_header(ApiKey.Metadata, 12, 1, "t") + b"\x05\x01"),
    "truncated-produce-body": lambda: framed(produce_payload()[:-20]),
    "bad-varint-in-header": lambda: framed(request_header(ApiKey.Metadata, 12, 1, "t") + b"\xff" * 8),
}


def produce_payload() -> bytes:
    req = request_class(ApiKey.Produce)
    td = req.TopicProduceData(
        name="whatever",
        partition_data=[req.TopicProduceData.PartitionProduceData(index=0, records=build_batch())],
    )
    body = req(transactional_id=None, acks=-1, timeout_ms=1000, topic_data=[td]).encode(version=9)
    return request_header(ApiKey.Produce, 9, 1, "t", flexible=True) + body


@pytest.mark.parametrize("name", list(BAD_INPUTS))
def test_bad_input_closes_only_that_connection(broker: BrokerProcess, name: str) -> None:
    with broker.connect() as bystander:
        assert bystander.api_versions().error_code == 0
        with broker.connect() as bad:
            bad.send_raw(BAD_INPUTS[name]())
            assert bad.is_closed_by_peer(), f"{name}: connection still open"
        # The connection that was open all along and a brand-new one both still work.
        assert bystander.api_versions().error_code == 0
        resp = bystander.request(
            ApiKey.Metadata,
            12,
            topics=None,
            allow_auto_topic_creation=False,
            include_cluster_authorized_operations=False,
            include_topic_authorized_operations=False,
        )
        assert resp.brokers[0].port == broker.port
    assert api_versions_ok(broker)


def test_a_good_request_before_the_bad_one_is_still_answered(broker: BrokerProcess) -> None:
    with broker.connect() as c:
        corr = c.next_correlation_id()
        payload = request_header(ApiKey.ApiVersions, 0, corr, "t")
        c.send_raw(framed(payload) + struct.pack(">i", -7))
        frame = c.recv_frame()
        assert struct.unpack_from(">ih", frame, 0) == (corr, 0)
        assert c.is_closed_by_peer()


def test_a_pending_produce_before_the_bad_frame_is_still_answered(
    broker: BrokerProcess, unique_topic: str
) -> None:
    """acks=-1 waits for the fsync (an asynchronous answer); the bad frame behind it must not
    swallow it."""
    with broker.connect() as c:
        c.create_topic(unique_topic)
        req = request_class(ApiKey.Produce)
        td = req.TopicProduceData(
            name=unique_topic,
            partition_data=[req.TopicProduceData.PartitionProduceData(index=0, records=build_batch(count=3))],
        )
        body = req(transactional_id=None, acks=-1, timeout_ms=5000, topic_data=[td]).encode(version=9)
        corr = c.next_correlation_id()
        bad = framed(request_header(1000, 0, corr + 1) + b"\x00" * 8)
        c.send_raw(framed(request_header(ApiKey.Produce, 9, corr, "t", flexible=True) + body) + bad)
        frame = c.recv_frame()
        assert struct.unpack_from(">i", frame, 0)[0] == corr
        assert c.is_closed_by_peer()
    with broker.connect() as c:
        assert c.list_offsets(unique_topic, 0, -1).offset == 3


def test_a_partial_frame_does_not_block_other_clients(broker: BrokerProcess) -> None:
    with broker.connect() as slow:
        slow.send_raw(struct.pack(">i", 100) + b"\x7f\x00\x00\x00")  # 4 of 100 bytes, then silence
        assert api_versions_ok(broker)
        assert not slow.is_closed_by_peer(timeout=0.3)
        slow.send_raw(b"\x00" * 96)  # the rest: garbage header -> closed
        assert slow.is_closed_by_peer()
    assert api_versions_ok(broker)


# --- ApiVersions ---------------------------------------------------------------------------------
@pytest.mark.parametrize("version", [5, 6, 100, INT32_MAX >> 16])
def test_api_versions_above_v4_gets_error_35_in_a_v0_response(broker: BrokerProcess, version: int) -> None:
    with broker.connect() as c:
        corr = c.next_correlation_id()
        body = request_class(ApiKey.ApiVersions)(
            client_software_name="future-client", client_software_version="9.9"
        ).encode(version=4)
        c.send_frame(request_header(ApiKey.ApiVersions, version, corr, "t", flexible=True) + body)
        frame = c.recv_frame()
        # Header v0 (correlation id only) and body v0: error, int32 array of one ApiVersions entry.
        assert frame == struct.pack(
            ">ihihhh", corr, ErrorCode.UNSUPPORTED_VERSION, 1, ApiKey.ApiVersions, 0, 4
        )
        # The client may retry on the same connection at a version we share.
        assert c.api_versions(version=3).error_code == 0


@pytest.mark.parametrize(
    ("name", "version"),
    [
        ("bad name", "1.0"),
        ("-leading-dash", "1.0"),
        ("trailing.", "1.0"),
        ("", "1.0"),
        ("kafka-python", "1.0 beta"),
        ("kafka-python", "_1"),
    ],
)
def test_api_versions_v3_with_invalid_software_name_is_invalid_request(
    broker: BrokerProcess, name: str, version: str
) -> None:
    with broker.connect() as c:
        corr = c.next_correlation_id()
        body = request_class(ApiKey.ApiVersions)(
            client_software_name=name, client_software_version=version
        ).encode(version=3)
        c.send_frame(request_header(ApiKey.ApiVersions, 3, corr, "t", flexible=True) + body)
        frame = c.recv_frame()
        # As Kafka's ApiVersionsRequest.getErrorResponse: a v3 body, no versions listed.
        assert struct.unpack_from(">i", frame, 0)[0] == corr
        assert _parse_api_versions_v3(frame[4:]) == (ErrorCode.INVALID_REQUEST, [], 0, b"\x00")
        assert c.api_versions(version=3).error_code == 0  # connection still usable
    assert api_versions_ok(broker)


@pytest.mark.parametrize("name", ["librdkafka", "apache-kafka-java", "a", "A.b-C.9"])
def test_api_versions_v3_valid_software_names(broker: BrokerProcess, name: str) -> None:
    with broker.connect() as c:
        resp = c.request(ApiKey.ApiVersions, 3, client_software_name=name, client_software_version="2.16.1")
        assert resp.error_code == 0


def _parse_api_versions_v3(body: bytes) -> tuple[int, list[tuple[int, int, int]], int, bytes]:
    """Decode by hand: error, entries, throttle, and whatever follows as raw bytes."""
    (error,) = struct.unpack_from(">h", body, 0)
    pos = 2
    n = body[pos] - 1  # compact array length (small enough for one varint byte)
    pos += 1
    entries = []
    for _ in range(n):
        key, lo, hi = struct.unpack_from(">hhh", body, pos)
        pos += 6
        assert body[pos] == 0, "an ApiVersion entry carries tagged fields"
        pos += 1
        entries.append((key, lo, hi))
    (throttle,) = struct.unpack_from(">i", body, pos)
    pos += 4
    return error, entries, throttle, body[pos:]


@pytest.mark.parametrize("version", [3, 4])
def test_api_versions_flexible_response_tags_only_the_features(broker: BrokerProcess, version: int) -> None:
    """Kafka 4's tags 0-2 (SupportedFeatures, FinalizedFeaturesEpoch, FinalizedFeatures) and no
    default-valued one (ZkMigrationReady): what Kafka writes, which kcat (librdkafka 2.0) reads
    (tests/integration/test_kcat.py)."""
    with broker.connect() as c:
        corr = c.next_correlation_id()
        body = request_class(ApiKey.ApiVersions)(
            client_software_name="kcoord-tests", client_software_version="1"
        ).encode(version=version)
        c.send_frame(request_header(ApiKey.ApiVersions, version, corr, "t", flexible=True) + body)
        frame = c.recv_frame()
    assert struct.unpack_from(">i", frame, 0)[0] == corr
    error, entries, throttle, rest = _parse_api_versions_v3(frame[4:])  # response header v0
    assert (error, throttle) == (0, 0)
    tags, pos = [], 1
    for _ in range(rest[0]):
        tags.append(rest[pos])
        pos += 2 + rest[pos + 1]
    assert tags == [0, 1, 2]
    assert pos == len(rest)
    assert (ApiKey.ApiVersions, 0, 4) in entries
    assert len({e[0] for e in entries}) == len(entries)


def test_pipelined_requests_are_answered_in_order(broker: BrokerProcess) -> None:
    with broker.connect() as c:
        corrs = []
        out = b""
        for i in range(50):
            corr = c.next_correlation_id()
            corrs.append(corr)
            if i % 2:
                out += framed(request_header(ApiKey.ApiVersions, 0, corr, "t"))
            else:
                out += framed(metadata_frame(corr))
        c.send_raw(out)
        got = [struct.unpack_from(">i", c.recv_frame(), 0)[0] for _ in corrs]
    assert got == corrs


# --- Produce input validation ------------------------------------------------------------------------
def test_corrupt_batch_is_corrupt_message(broker: BrokerProcess, unique_topic: str) -> None:
    with broker.connect() as c:
        c.create_topic(unique_topic)
        batch = bytearray(build_batch(count=3))
        batch[-2] ^= 0xFF
        resp = c.produce(unique_topic, 0, bytes(batch))
        assert resp.error_code == ErrorCode.CORRUPT_MESSAGE
        garbage = c.produce(unique_topic, 0, os.urandom(80))
        assert garbage.error_code in (ErrorCode.CORRUPT_MESSAGE, ErrorCode.INVALID_RECORD)
        # Nothing was appended, and good data still goes in at offset 0.
        assert c.produce(unique_topic, 0, build_batch(count=2)).base_offset == 0
        assert c.list_offsets(unique_topic, 0, -1).offset == 2


def test_acks0_produce_that_fails_closes_the_connection(broker: BrokerProcess, unique_topic: str) -> None:
    """The client reads no response to acks=0, so Kafka closes the connection to signal failure."""
    with broker.connect() as c:
        c.create_topic(unique_topic)
        batch = bytearray(build_batch(count=1))
        batch[-1] ^= 1
        req = request_class(ApiKey.Produce)
        td = req.TopicProduceData(
            name=unique_topic,
            partition_data=[req.TopicProduceData.PartitionProduceData(index=0, records=bytes(batch))],
        )
        c.send(ApiKey.Produce, 9, transactional_id=None, acks=0, timeout_ms=1000, topic_data=[td])
        assert c.is_closed_by_peer()
    assert api_versions_ok(broker)


def test_unknown_topic_and_partition(broker: BrokerProcess, unique_topic: str) -> None:
    with Conn(broker.host, broker.port) as c:
        assert c.produce(unique_topic, 0, build_batch()).error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        c.create_topic(unique_topic, partitions=2)
        assert c.produce(unique_topic, 2, build_batch()).error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert c.fetch(unique_topic, 5, 0).error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert c.fetch(unique_topic, 0, 1).error_code == ErrorCode.OFFSET_OUT_OF_RANGE
        assert c.list_offsets(unique_topic, 3, -1).error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_a_client_that_does_not_read_is_throttled_not_dropped(
    broker: BrokerProcess, unique_topic: str
) -> None:
    """Thousands of pipelined requests whose answers are not read: the broker stops reading that
    connection (bounded memory) but answers all of them, in order, once the client reads."""
    with broker.connect() as c:
        c.create_topic(unique_topic)
        c.produce(unique_topic, 0, build_batch(count=50, headers=[("pad", b"x" * 200)]))
        c.sock.settimeout(60)
        body = request_class(ApiKey.Fetch)(**fetch_request(unique_topic, [(0, 0)])).encode(version=4)
        corrs = [c.next_correlation_id() for _ in range(3000)]  # ~12 KB answers: ~36 MB in all
        frames = b"".join(framed(request_header(ApiKey.Fetch, 4, corr, "t") + body) for corr in corrs)
        # The sender may block once the broker stops reading; the answers are read further down.
        sender = threading.Thread(target=c.send_raw, args=(frames,), daemon=True)
        sender.start()
        assert api_versions_ok(broker)  # meanwhile everybody else is served
        got = [struct.unpack_from(">i", c.recv_frame(), 0)[0] for _ in corrs]
        sender.join(timeout=60)
        assert got == corrs


@pytest.mark.parametrize("version", [3, 9])
def test_null_array_where_none_is_allowed_closes_the_connection(broker: BrokerProcess, version: int) -> None:
    """Kafka's parser refuses a null for a non-nullable field and closes the connection; the
    handler never sees it (it used to crash on it, error path included)."""
    req = request_class(ApiKey.Produce)
    body = req(
        transactional_id=None,
        acks=-1,
        timeout_ms=1000,
        topic_data=[req.TopicProduceData(name="t", partition_data=None)],
    ).encode(version=version)
    with broker.connect() as c:
        c.send_frame(request_header(ApiKey.Produce, version, 1, "t", flexible=version >= 9) + body)
        assert c.is_closed_by_peer()
    assert api_versions_ok(broker)
    assert "Fatal error" not in broker.log_text()


def test_deferred_and_immediate_answers_keep_request_order(broker: BrokerProcess, unique_topic: str) -> None:
    """Commits (answered after their fsync) pipelined with ApiVersions (answered at once) in one
    write: the answers come back in request order, each once."""
    commit = request_class(ApiKey.OffsetCommit)
    with broker.connect() as c:
        c.create_topic(unique_topic)
        frames, corrs, kinds = [], [], []
        for i in range(200):
            corr = c.next_correlation_id()
            if i % 3 == 1:
                frames.append(framed(request_header(ApiKey.ApiVersions, 0, corr, "t")))
                kinds.append(ApiKey.ApiVersions)
            else:
                body = commit(
                    group_id=f"{unique_topic}-g{i % 7}",
                    generation_id_or_member_epoch=-1,
                    member_id="",
                    retention_time_ms=-1,
                    topics=[
                        commit.OffsetCommitRequestTopic(
                            name=unique_topic,
                            partitions=[
                                commit.OffsetCommitRequestTopic.OffsetCommitRequestPartition(
                                    partition_index=0, committed_offset=i, committed_metadata=""
                                )
                            ],
                        )
                    ],
                ).encode(version=2)
                frames.append(framed(request_header(ApiKey.OffsetCommit, 2, corr, "t") + body))
                kinds.append(ApiKey.OffsetCommit)
            corrs.append(corr)
        c.send_raw(b"".join(frames))
        got = []
        for kind in kinds:
            frame = c.recv_frame()
            got.append(struct.unpack_from(">i", frame, 0)[0])
            if kind == ApiKey.OffsetCommit:
                resp = response_class(ApiKey.OffsetCommit).decode(frame[4:], version=2)
                assert resp.topics[0].partitions[0].error_code == 0
        assert got == corrs
