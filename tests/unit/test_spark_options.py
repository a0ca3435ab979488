"""Option parsing and micro-batch planning of the kcoord PySpark source (no Spark needed)."""

from __future__ import annotations

import json

import pytest

from kcoord.spark.options import (
    EARLIEST,
    LATEST,
    OffsetLimit,
    OptionError,
    default_group_id,
    parse_sink_options,
    parse_source_options,
    partition_map_from_json,
    partition_map_to_json,
    rate_limit,
)

BS = {"kafka.bootstrap.servers": "h:9092"}


def src(streaming: bool = False, **opts: str) -> object:
    return parse_source_options({**BS, **opts}, streaming=streaming)


def test_keys_are_case_insensitive_as_spark_lowercases_them() -> None:
    o = parse_source_options(
        {
            "Kafka.Bootstrap.Servers": "h:9092",
            "subscribe": "a, b",
            "includeHeaders": "TRUE",
            "startingOffsets": "Earliest",
        },
        streaming=True,
    )
    assert o.bootstrap_servers == "h:9092"
    assert o.subscribe == ("a", "b")
    assert o.include_headers is True
    assert o.starting == OffsetLimit("earliest")
    lowered = parse_source_options(
        {"kafka.bootstrap.servers": "h:9092", "subscribepattern": "ev.*"}, streaming=False
    )
    assert lowered.subscribe_pattern == "ev.*"


def test_defaults_follow_sparks_kafka_source() -> None:
    batch = src(subscribe="t")
    assert batch.starting.kind == "earliest" and batch.ending.kind == "latest"
    assert not batch.include_headers and batch.fail_on_data_loss and not batch.read_committed
    stream = src(streaming=True, subscribe="t")
    assert stream.starting.kind == "latest"
    assert stream.commit_offsets and stream.max_offsets_per_trigger is None
    assert stream.isolation_level == "read_uncommitted"
    assert (
        src(subscribe="t", **{"kafka.isolation.level": "read_committed"}).isolation_level == "read_committed"
    )


def test_offsets_json_round_trip_with_string_keys() -> None:
    offsets = {("t", 0): 5, ("t", 10): 7, ("u", 1): 0}
    as_json = partition_map_to_json(offsets)
    assert as_json == {"t": {"0": 5, "10": 7}, "u": {"1": 0}}
    assert partition_map_from_json(json.loads(json.dumps(as_json))) == offsets
    o = src(
        subscribe="t", startingOffsets='{"t": {"0": -2, "1": 42}}', endingOffsets='{"t": {"0": -1, "1": 50}}'
    )
    assert o.starting == OffsetLimit("offsets", {("t", 0): EARLIEST, ("t", 1): 42})
    assert o.ending.offsets == {("t", 0): LATEST, ("t", 1): 50}


def test_timestamp_options_take_precedence() -> None:
    o = src(subscribe="t", startingOffsets="earliest", startingOffsetsByTimestamp='{"t": {"0": 1000}}')
    assert o.starting == OffsetLimit("timestamps", {("t", 0): 1000})
    o = src(subscribe="t", startingTimestamp="2000", startingOffsetsByTimestamp='{"t": {"0": 1000}}')
    assert o.starting == OffsetLimit("timestamp", timestamp=2000)
    assert src(subscribe="t", endingTimestamp="3000").ending == OffsetLimit("timestamp", timestamp=3000)
    assert not src(subscribe="t").starting_no_match_latest
    assert src(subscribe="t", startingOffsetsByTimestampStrategy="latest").starting_no_match_latest


def test_assign() -> None:
    assert src(assign='{"t": [1, 0], "u": [2]}').assign == (("t", 0), ("t", 1), ("u", 2))


@pytest.mark.parametrize(
    ("opts", "streaming", "message"),
    [
        ({"subscribe": "t", "kafka.bootstrap.servers": ""}, False, "bootstrap"),
        ({}, False, "exactly one of"),
        ({"subscribe": "t", "assign": '{"t":[0]}'}, False, "exactly one of"),
        ({"subscribe": " , "}, False, "names no topic"),
        ({"subscribePattern": "("}, False, "regular expression"),
        ({"assign": "[0]"}, False, "assign must be JSON"),
        ({"subscribe": "t", "startingOffsets": "latest"}, False, "not valid for a batch"),
        ({"subscribe": "t", "endingOffsets": "earliest"}, False, "endingOffsets=earliest"),
        ({"subscribe": "t", "endingOffsets": '{"t":{"0":-2}}'}, False, "-2"),
        ({"subscribe": "t", "startingOffsets": '{"t":{"0":-1}}'}, False, "-1"),
        ({"subscribe": "t", "endingOffsets": "latest"}, True, "streaming"),
        ({"subscribe": "t", "startingOffsets": "{bad"}, False, "JSON"),
        ({"subscribe": "t", "startingOffsets": '{"t":[1]}'}, False, "must be an object"),
        ({"subscribe": "t", "maxOffsetsPerTrigger": "0"}, True, "at least 1"),
        ({"subscribe": "t", "kafka.isolation.level": "dirty"}, False, "isolation"),
        ({"subscribe": "t", "includeHeaders": "maybe"}, False, "true or false"),
        ({"subscribe": "t", "startingOffsetsByTimestampStrategy": "x"}, False, "Strategy"),
    ],
)
def test_bad_options_are_refused(opts: dict[str, str], streaming: bool, message: str) -> None:
    with pytest.raises(OptionError, match=message):
        parse_source_options({**BS, **opts}, streaming=streaming)


def test_group_id() -> None:
    assert src(streaming=True, subscribe="a,b").group_id == "kcoord-spark-a,b"
    assert src(streaming=True, subscribe="a", groupIdPrefix="etl").group_id == "etl-a"
    assert src(streaming=True, subscribe="a", **{"kafka.group.id": "mine"}).group_id == "mine"
    pattern = src(streaming=True, subscribePattern="ev.*").group_id
    assert pattern.startswith("kcoord-spark-") and pattern == default_group_id("pattern:ev.*")
    assert len(pattern) == len("kcoord-spark-") + 12


def test_client_configs_map_kafka_options() -> None:
    o = src(
        subscribe="t",
        **{
            "kafka.security.protocol": "PLAINTEXT",
            "kafka.request.timeout.ms": "5000",
            "kafka.check.crcs": "false",
            "kafka.group.id": "g",  # not a client setting: the commit group
            "kafka.key.deserializer": "x",
        },
    )
    assert o.client_configs == {
        "security_protocol": "PLAINTEXT",
        "request_timeout_ms": 5000,
        "check_crcs": False,
    }


def test_sink_options() -> None:
    s = parse_sink_options({**BS, "Topic": "out"})
    assert s.topic == "out" and s.include_headers
    assert parse_sink_options(BS).topic is None
    with pytest.raises(OptionError):
        parse_sink_options({"topic": "x"})


def test_rate_limit_shares_the_limit_by_backlog() -> None:
    start = {("t", 0): 0, ("t", 1): 100, ("t", 2): 7}
    latest = {("t", 0): 300, ("t", 1): 200, ("t", 2): 7}
    assert rate_limit(start, latest, 1000) == latest  # everything fits
    capped = rate_limit(start, latest, 40)
    assert capped == {("t", 0): 30, ("t", 1): 110, ("t", 2): 7}  # 3:1 of the backlog
    assert sum(capped[tp] - start[tp] for tp in start) <= 40
    # A share below one record still moves (rounded up), as Spark does.
    tiny = rate_limit({("t", 0): 0, ("t", 1): 0}, {("t", 0): 10_000, ("t", 1): 1}, 100)
    assert tiny == {("t", 0): 99, ("t", 1): 1}
    # No start offset known: not limited (the reader supplies new partitions' earliest offsets).
    assert rate_limit({}, {("n", 0): 5}, 2) == {("n", 0): 5}
