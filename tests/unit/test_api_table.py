"""The version table and the dispatcher's version gate, without sockets."""

from __future__ import annotations

import struct
from collections.abc import Iterator

import pytest

from kcoord.config import BrokerConfig
from kcoord.protocol.errors import CloseConnection, ErrorCode
from kcoord.protocol.messages import ApiKey, null_violation, request_class, response_class
from kcoord.server.api_table import ApiSpec, ApiTable, build_table
from kcoord.server.app import Broker
from kcoord.server.dispatcher import Dispatcher
from tests.wire import request_header

TABLE = build_table()
SPECS = list(TABLE)


@pytest.fixture(scope="module")
def dispatcher(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Dispatcher]:
    # Only ApiVersions is dispatched here: its handler needs nothing but the table's answer (and
    # the dispatcher the request metrics it counts every request in). A broker's own services,
    # made without starting it: only its flusher's directory handle is opened.
    broker = Broker(BrokerConfig(log_dirs=str(tmp_path_factory.mktemp("broker"))))
    yield Dispatcher(broker.services, TABLE)
    broker.flusher.close()


def unframe(frame: bytes) -> tuple[int, bytes]:
    (size, corr) = struct.unpack_from(">ii", frame, 0)
    assert size == len(frame) - 4
    return corr, frame[8:]


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name)
def test_every_served_range_is_within_its_schemas(spec: ApiSpec) -> None:
    req, resp = request_class(spec.key), response_class(spec.key)
    assert req is spec.request_cls and resp is spec.response_cls
    assert 0 <= spec.min_version <= spec.max_version
    assert req.min_version <= spec.min_version and spec.max_version <= req.max_version
    assert resp.min_version <= spec.min_version and spec.max_version <= resp.max_version


def test_table_refuses_a_range_beyond_the_schema_and_duplicates() -> None:
    with pytest.raises(ValueError):
        ApiSpec(ApiKey.ApiVersions, 0, 99, lambda *a: None, None)
    spec = ApiSpec(ApiKey.ApiVersions, 0, 3, lambda *a: None, None)
    with pytest.raises(ValueError):
        ApiTable([spec, spec])


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_api_versions_lists_exactly_the_table(version: int, dispatcher: Dispatcher) -> None:
    body = request_class(ApiKey.ApiVersions)(
        client_software_name="kcoord-tests", client_software_version="1.0"
    ).encode(version=version)
    head = request_header(ApiKey.ApiVersions, version, 77, "t", flexible=version >= 3)
    frame = dispatcher.dispatch(head + body, None)
    assert isinstance(frame, bytes)
    corr, payload = unframe(frame)
    assert corr == 77
    resp = response_class(ApiKey.ApiVersions).decode(payload, version=version)  # header v0 always
    assert resp.error_code == 0
    listed = {(k.api_key, k.min_version, k.max_version) for k in resp.api_keys}
    assert listed == {(int(s.key), s.min_version, s.max_version) for s in SPECS}
    assert len(resp.api_keys) == len(SPECS)


def test_api_versions_v3_tags_only_the_features() -> None:
    """Kafka's tags 0-2 (supported features, finalized epoch, finalized features) and no
    default-valued one (ZkMigrationReady): old librdkafka (kcat 1.7 on librdkafka 2.0) reads them
    as Kafka 4 writes them; transaction.version is finalized at 1 (kcoord's transactions)."""
    resp = TABLE.api_versions()
    body = resp.encode(version=3)
    # error_code, compact array of (key, min, max, tagged=0), throttle, tagged fields
    pos = 2
    n = body[pos] - 1
    pos += 1
    assert n == len(SPECS)
    for _ in range(n):
        assert body[pos + 6] == 0
        pos += 7
    pos += 4
    count = body[pos]
    pos += 1
    tags = []
    for _ in range(count):
        tags.append(body[pos])
        pos += 2 + body[pos + 1]
    assert tags == [0, 1, 2]
    assert pos == len(body)
    decoded = response_class(ApiKey.ApiVersions).decode(body, version=3)
    assert [(f.name, f.min_version, f.max_version) for f in decoded.supported_features] == [
        ("transaction.version", 0, 1)
    ]
    assert [(f.name, f.min_version_level, f.max_version_level) for f in decoded.finalized_features] == [
        ("transaction.version", 1, 1)
    ]
    assert decoded.finalized_features_epoch >= 0


def test_unknown_api_key_closes_the_connection(dispatcher: Dispatcher) -> None:
    with pytest.raises(CloseConnection):
        dispatcher.dispatch(request_header(9999, 0, 1), None)
    with pytest.raises(CloseConnection):
        dispatcher.dispatch(request_header(-1, 0, 1), None)


@pytest.mark.parametrize("key", [ApiKey.Produce, ApiKey.Metadata, ApiKey.Fetch])
def test_version_beyond_the_schema_closes_the_connection(key: ApiKey, dispatcher: Dispatcher) -> None:
    with pytest.raises(CloseConnection):
        dispatcher.dispatch(request_header(key, 999, 1) + b"\x00" * 40, None)
    with pytest.raises(CloseConnection):
        dispatcher.dispatch(request_header(key, -1, 1) + b"\x00" * 40, None)


@pytest.mark.parametrize("version", [5, 6, 127, 999, 32767])
def test_api_versions_above_the_table_gets_unsupported_version_in_v0(
    version: int, dispatcher: Dispatcher
) -> None:
    frame = dispatcher.dispatch(request_header(ApiKey.ApiVersions, version, 5, "x", flexible=True), None)
    assert isinstance(frame, bytes)
    corr, body = unframe(frame)
    assert corr == 5
    spec = TABLE.get(ApiKey.ApiVersions)
    assert spec is not None
    # v0 body: error_code int16, api_keys int32 count, (key, min, max) int16s; no header tags.
    assert body == struct.pack(
        ">hihhh", ErrorCode.UNSUPPORTED_VERSION, 1, 18, spec.min_version, spec.max_version
    )


def test_truncated_header_closes_the_connection(dispatcher: Dispatcher) -> None:
    for frame in (b"", b"\x00\x12", b"\x00\x12\x00\x03\x00\x00\x00\x01\x00\x10abc"):
        with pytest.raises(CloseConnection):
            dispatcher.dispatch(frame, None)


def _versions() -> list[tuple[ApiSpec, int]]:
    return [(s, v) for s in SPECS for v in range(s.min_version, s.max_version + 1)]


@pytest.mark.parametrize(
    ("spec", "version"), _versions(), ids=lambda x: x.name if isinstance(x, ApiSpec) else str(x)
)
def test_default_requests_have_no_forbidden_nulls(spec: ApiSpec, version: int) -> None:
    """The null check in the dispatcher must not refuse what a client legitimately sends."""
    request = spec.request_cls.decode(spec.request_cls().encode(version=version), version=version)
    assert null_violation(request, version) is None


def test_null_where_the_schema_forbids_it_closes_the_connection(dispatcher: Dispatcher) -> None:
    req = request_class(ApiKey.Produce)
    nulls = req(
        transactional_id=None,
        acks=-1,
        timeout_ms=1000,
        topic_data=[req.TopicProduceData(name="t", partition_data=None)],
    )
    for version in (3, 9, 12):
        request = req.decode(nulls.encode(version=version), version=version)
        assert null_violation(request, version) == "ProduceRequest.topic_data[0].partition_data"
        head = request_header(ApiKey.Produce, version, 1, "t", flexible=version >= 9)
        with pytest.raises(CloseConnection, match="non-nullable"):
            dispatcher.dispatch(head + nulls.encode(version=version), None)
    # Nullable fields may be null: Records and TransactionalId.
    ok = req(
        transactional_id=None,
        acks=-1,
        timeout_ms=1000,
        topic_data=[
            req.TopicProduceData(
                name="t", partition_data=[req.TopicProduceData.PartitionProduceData(index=0, records=None)]
            )
        ],
    )
    assert null_violation(req.decode(ok.encode(version=9), version=9), 9) is None
