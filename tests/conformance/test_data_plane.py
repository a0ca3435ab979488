"""Produce, Fetch (sessions, long poll) and ListOffsets over raw sockets, checked byte-exact."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from kcoord.protocol import records
from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.messages import request_class, response_class
from tests.harness import BrokerProcess
from tests.unit.logutil import decode
from tests.wire import ApiKey, Conn, build_batch, fetch_request

T0 = 1_700_000_000_000


@pytest.fixture
def topic3(broker: BrokerProcess, unique_topic: str) -> str:
    """Three batches of four records, record i at T0 + 10*i; then one batch of one at T0 + 200."""
    with broker.connect() as c:
        c.create_topic(unique_topic, partitions=2)
        for b in range(3):
            recs = [
                (f"k{4 * b + i}".encode(), f"v{4 * b + i}".encode(), T0 + 10 * (4 * b + i)) for i in range(4)
            ]
            assert c.produce(unique_topic, 0, build_batch(recs)).base_offset == 4 * b
        assert c.produce(unique_topic, 0, build_batch([(None, b"last", T0 + 200)])).base_offset == 12
    return unique_topic


# --- ListOffsets --------------------------------------------------------------------------------------
@pytest.mark.parametrize("version", [1, 4, 7, 11])
def test_list_offsets_earliest_latest(broker: BrokerProcess, topic3: str, version: int) -> None:
    with broker.connect() as c:
        for isolation in (0, 1):
            latest = c.list_offsets(topic3, 0, -1, isolation=isolation, version=version)
            assert (latest.error_code, latest.offset) == (0, 13)
            earliest = c.list_offsets(topic3, 0, -2, isolation=isolation, version=version)
            assert (earliest.error_code, earliest.offset) == (0, 0)
            empty = c.list_offsets(topic3, 1, -1, isolation=isolation, version=version)
            assert empty.offset == 0


@pytest.mark.parametrize(
    ("target", "offset", "ts"),
    [
        (0, 0, T0),
        (T0, 0, T0),
        (T0 + 1, 1, T0 + 10),
        (T0 + 25, 3, T0 + 30),
        (T0 + 31, 4, T0 + 40),
        (T0 + 55, 6, T0 + 60),
        (T0 + 110, 11, T0 + 110),
        (T0 + 111, 12, T0 + 200),
        (T0 + 200, 12, T0 + 200),
        (T0 + 201, -1, -1),
    ],
)
def test_list_offsets_by_timestamp_finds_the_first_record(
    broker: BrokerProcess, topic3: str, target: int, offset: int, ts: int
) -> None:
    with broker.connect() as c:
        for isolation in (0, 1):
            r = c.list_offsets(topic3, 0, target, isolation=isolation)
            assert (r.error_code, r.offset, r.timestamp) == (0, offset, ts)
            assert r.leader_epoch == (0 if offset >= 0 else -1)


def test_list_offsets_max_timestamp(broker: BrokerProcess, topic3: str) -> None:
    with broker.connect() as c:
        r = c.list_offsets(topic3, 0, -3, version=7)
        assert (r.error_code, r.offset, r.timestamp) == (0, 12, T0 + 200)
        assert c.list_offsets(topic3, 0, -3, version=6).error_code == ErrorCode.UNSUPPORTED_VERSION
        assert c.list_offsets(topic3, 1, -3, version=7).offset == -1
        assert c.list_offsets(topic3, 0, -4, version=8).offset == 0  # earliest local
        r = c.list_offsets(topic3, 0, -5, version=9)  # latest tiered: no tiered storage
        assert (r.error_code, r.offset) == (0, -1)
        assert c.list_offsets(topic3, 0, -99, version=9).error_code == ErrorCode.UNSUPPORTED_VERSION


# --- Fetch --------------------------------------------------------------------------------------------
def test_fetch_returns_whole_batches_and_exact_records(broker: BrokerProcess, topic3: str) -> None:
    with broker.connect() as c:
        p = c.fetch(topic3, 0, 5)
        assert (p.error_code, p.high_watermark, p.last_stable_offset, p.log_start_offset) == (0, 13, 13, 0)
        got = decode(p.records)
        assert got[0][0] == 4  # the batch holding offset 5 starts at 4
        assert [(o, t, k, v) for o, t, k, v in got] == [
            (
                i,
                T0 + 10 * i if i < 12 else T0 + 200,
                f"k{i}".encode() if i < 12 else None,
                f"v{i}".encode() if i < 12 else b"last",
            )
            for i in range(4, 13)
        ]
        assert c.fetch(topic3, 0, 13).records in (b"", None)


def test_incremental_fetch_session(broker: BrokerProcess, topic3: str) -> None:
    with broker.connect() as c:
        full = c.request(ApiKey.Fetch, 12, **fetch_request(topic3, [(0, 0), (1, 0)], epoch=0))
        assert full.error_code == 0 and full.session_id != 0
        sid = full.session_id
        assert sorted(p.partition_index for p in full.responses[0].partitions) == [0, 1]
        # Nothing changed: the incremental response leaves both partitions out.
        inc = c.request(ApiKey.Fetch, 12, **fetch_request(topic3, [(0, 13)], session_id=sid, epoch=1))
        assert (inc.error_code, inc.session_id) == (0, sid)
        assert inc.responses == []
        c.produce(topic3, 1, build_batch(count=2))
        inc = c.request(ApiKey.Fetch, 12, **fetch_request(topic3, [], session_id=sid, epoch=2))
        assert [p.partition_index for p in inc.responses[0].partitions] == [1]
        assert [r[0] for r in decode(inc.responses[0].partitions[0].records)] == [0, 1]
        # Wrong epoch, unknown session.
        bad = c.request(ApiKey.Fetch, 12, **fetch_request(topic3, [], session_id=sid, epoch=7))
        assert bad.error_code == ErrorCode.INVALID_FETCH_SESSION_EPOCH
        bad = c.request(ApiKey.Fetch, 12, **fetch_request(topic3, [], session_id=sid ^ 0x5A5A, epoch=1))
        assert bad.error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
        # Forgetting every partition ends the session; so does FINAL (-1).
        inc = c.request(
            ApiKey.Fetch, 12, **fetch_request(topic3, [], session_id=sid, epoch=3, forgotten=[0, 1])
        )
        assert inc.error_code == 0 and inc.session_id == 0
        again = c.request(ApiKey.Fetch, 12, **fetch_request(topic3, [], session_id=sid, epoch=4))
        assert again.error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
        full = c.request(ApiKey.Fetch, 12, **fetch_request(topic3, [(0, 0)], epoch=0))
        c.request(ApiKey.Fetch, 12, **fetch_request(topic3, [(0, 0)], session_id=full.session_id, epoch=-1))
        gone = c.request(ApiKey.Fetch, 12, **fetch_request(topic3, [], session_id=full.session_id, epoch=1))
        assert gone.error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND


def test_long_poll_is_woken_by_a_produce(broker: BrokerProcess, unique_topic: str) -> None:
    with broker.connect() as c:
        c.create_topic(unique_topic)
    result: list[Any] = []

    def poll() -> None:
        with broker.connect() as c:
            result.append(
                c.request(ApiKey.Fetch, 12, **fetch_request(unique_topic, [(0, 0)], max_wait_ms=30_000))
            )

    t = threading.Thread(target=poll)
    t.start()
    with broker.connect() as c:
        c.produce(unique_topic, 0, build_batch(count=3))
    t.join(timeout=60)
    assert not t.is_alive(), "long poll was not woken by the produce"
    (resp,) = result
    part = resp.responses[0].partitions[0]
    assert part.high_watermark == 3
    assert [r[0] for r in decode(part.records)] == [0, 1, 2]


# --- idempotent Produce -----------------------------------------------------------------------------
def test_idempotent_retry_is_answered_with_the_original_offset(
    broker: BrokerProcess, unique_topic: str
) -> None:
    with broker.connect() as c:
        c.create_topic(unique_topic)
        pid_resp = c.request(
            ApiKey.InitProducerId,
            4,
            transactional_id=None,
            transaction_timeout_ms=60000,
            producer_id=-1,
            producer_epoch=-1,
        )
        pid, epoch = pid_resp.producer_id, pid_resp.producer_epoch
        assert pid >= 0 and epoch == 0

        def batch(seq: int, n: int) -> bytes:
            return build_batch(count=n, producer_id=pid, producer_epoch=epoch, base_sequence=seq)

        assert c.produce(unique_topic, 0, batch(0, 3)).base_offset == 0
        assert c.produce(unique_topic, 0, batch(3, 2)).base_offset == 3
        retry = c.produce(unique_topic, 0, batch(0, 3))
        assert (retry.error_code, retry.base_offset) == (0, 0)
        gap = c.produce(unique_topic, 0, batch(9, 1))
        assert gap.error_code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
        # A new epoch starts at sequence 0; after it the old epoch is fenced.
        bump = build_batch(count=1, producer_id=pid, producer_epoch=epoch + 1, base_sequence=0)
        assert c.produce(unique_topic, 0, bump).base_offset == 5
        old = c.produce(unique_topic, 0, batch(5, 1))
        assert old.error_code == ErrorCode.INVALID_PRODUCER_EPOCH
        assert c.list_offsets(unique_topic, 0, -1).offset == 6
        assert [r[0] for r in decode(c.fetch(unique_topic, 0, 0).records)] == [0, 1, 2, 3, 4, 5]


def test_create_and_delete_topics(broker: BrokerProcess, unique_topic: str) -> None:
    with Conn(broker.host, broker.port) as c:
        c.create_topic(unique_topic, partitions=3)
        req = request_class(ApiKey.CreateTopics)
        again = c.request(
            ApiKey.CreateTopics,
            7,
            topics=[
                req.CreatableTopic(
                    name=unique_topic, num_partitions=1, replication_factor=1, assignments=[], configs=[]
                )
            ],
            timeout_ms=1000,
            validate_only=False,
        )
        assert again.topics[0].error_code == ErrorCode.TOPIC_ALREADY_EXISTS
        deleted = c.request(ApiKey.DeleteTopics, 5, topic_names=[unique_topic], timeout_ms=1000)
        assert deleted.responses[0].error_code == 0
        assert c.produce(unique_topic, 0, build_batch()).error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


# --- large requests read in pieces ---------------------------------------------------------------------
def test_large_produce_requests_in_pieces_are_stored_as_sent(
    broker: BrokerProcess, unique_topic: str
) -> None:
    """Produce requests from a few KiB to 600 KiB (a request of 64 KiB or more is gathered into a
    buffer of its own, server/connection.py), pipelined with small requests and sent in pieces that split
    every frame's size prefix, body and batch at odd places: each is answered once, in order, and
    the batches are stored byte for byte as sent (but for the offsets the broker stamps in)."""
    import random
    import socket
    import struct
    import time

    from tests.wire import request_header

    rng = random.Random(7)
    req = request_class(ApiKey.Produce)
    with broker.connect() as c:
        c.create_topic(unique_topic)
        frames, expected, batches = [], [], []
        for i, size in enumerate([3_000, 65_000, 70_000, 100_000, 1, 600_000, 131_072, 2_000]):
            corr = c.next_correlation_id()
            if size == 1:  # a small request between the large ones
                frames.append(request_header(ApiKey.ApiVersions, 0, corr, "t"))
                expected.append((corr, None))
                continue
            batch = build_batch([(b"k%d" % i, rng.randbytes(size), T0)])
            batches.append(batch)
            td = req.TopicProduceData(
                name=unique_topic,
                partition_data=[req.TopicProduceData.PartitionProduceData(index=0, records=batch)],
            )
            body = req(transactional_id=None, acks=1, timeout_ms=1000, topic_data=[td]).encode(version=9)
            frames.append(request_header(ApiKey.Produce, 9, corr, "t", flexible=True) + body)
            expected.append((corr, len(batches) - 1))
        stream = b"".join(struct.pack(">i", len(f)) + f for f in frames)
        c.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        pos = 0
        while pos < len(stream):
            step = rng.choice([1, 2, 3, 5, 4096, 30_000, 65_536, 200_000])
            c.send_raw(stream[pos : pos + step])
            pos += step
            if rng.random() < 0.3:
                time.sleep(0.002)  # lets the broker read what came so far on its own
        offsets = []
        for corr, which in expected:
            frame = c.recv_frame()
            assert struct.unpack_from(">i", frame, 0)[0] == corr
            if which is not None:
                answer = response_class(ApiKey.Produce).decode(frame[5:], version=9)
                part = answer.responses[0].partition_responses[0]
                assert part.error_code == 0
                offsets.append(part.base_offset)
        assert offsets == list(range(len(batches)))
        stored: list[bytes] = []
        while len(stored) < len(batches):
            # acks=1 answers come before the flush round that moves the high watermark: the fetch
            # waits for it, as a consumer's does (an empty answer lost the race under load once).
            got = c.fetch(unique_topic, 0, len(stored), max_bytes=4 << 20, max_wait_ms=5000)
            assert got.error_code == 0 and got.records
            data = bytes(got.records)
            stored += [
                data[h.position : h.position + h.size] for h in records.iter_headers(data, partial_ok=True)
            ]
        for i, (batch, kept) in enumerate(zip(batches, stored, strict=True)):
            assert struct.unpack_from(">q", kept, 0)[0] == i  # the base offset the broker assigned
            assert kept[16:] == batch[16:] and kept[8:12] == batch[8:12]  # all but offset and epoch


def test_an_answer_is_not_held_back_by_a_large_request_still_arriving(
    broker: BrokerProcess, unique_topic: str
) -> None:
    """An answer made while the next large request is being read is held only until the loop has
    read what it can: a client that sends one request and half of the next still gets the first
    answer, before it sends the rest."""
    import struct

    from tests.wire import request_header

    req = request_class(ApiKey.Produce)
    with broker.connect() as c:
        c.create_topic(unique_topic)
        frames, corrs = [], []
        for i in range(2):
            td = req.TopicProduceData(
                name=unique_topic,
                partition_data=[
                    req.TopicProduceData.PartitionProduceData(
                        index=0, records=build_batch([(b"k", bytes(200_000), T0 + i)])
                    )
                ],
            )
            body = req(transactional_id=None, acks=1, timeout_ms=1000, topic_data=[td]).encode(version=9)
            corrs.append(c.next_correlation_id())
            head = request_header(ApiKey.Produce, 9, corrs[-1], "t", flexible=True)
            frames.append(struct.pack(">i", len(head) + len(body)) + head + body)
        c.send_raw(frames[0] + frames[1][: len(frames[1]) // 2])
        c.sock.settimeout(5)
        first = c.recv_frame()
        assert struct.unpack_from(">i", first, 0)[0] == corrs[0]
        c.send_raw(frames[1][len(frames[1]) // 2 :])
        assert struct.unpack_from(">i", c.recv_frame(), 0)[0] == corrs[1]
