"""A coordinator log written by an earlier kcoord replays to the state that version served.

tests/data/legacy-coordinator-log/ is the data directory of a broker stopped cleanly by
tests/data/make_legacy_coordinator_log.py (kcoord as of the commit that added it), and
legacy-coordinator-log.expected.json what clients saw of it right before the stop. A broker of
this version started on a copy must serve the same: offsets (values v1 and v3, overwritten and
deleted ones), classic groups (Stable with a static and a dynamic member, Empty, standalone,
deleted), the share group's start offsets, lags and config overrides, and the same records to a
new share member (released ones with their delivery counts, in-flight ones again).

Members of a Stable classic group are reloaded with fresh session timers, as Kafka's coordinator
does: right after the start both members are listed, and the group is Stable. (Their session
timeout is 300 s, so they are still there when the test looks.)

Only the wire protocol and the fixture's files are used, never kcoord.broker: its modules move,
the bytes on disk must not change meaning. Never regenerate the fixture to make this pass.
"""

from __future__ import annotations

import json
import shutil
import struct
import uuid
from typing import Any

from tests.coordinator_log import parse_group_value, parse_offset_value
from tests.harness import BrokerFactory
from tests.legacy_log import (
    BROKER_ARGS,
    EXPECTED_JSON,
    FIXTURE_DIR,
    SHARE,
    STABLE,
    census,
    coordinator_records,
    missing_kinds,
    observe,
    redeliveries,
)

EXPECTED: dict[str, Any] = json.loads(EXPECTED_JSON.read_text())


def test_fixture_holds_every_record_kind() -> None:
    """The fixture cannot silently lose coverage: every record kind kcoord writes is there."""
    counts = census(FIXTURE_DIR)
    assert counts == EXPECTED["records"]
    assert missing_kinds(counts) == [], counts
    assert counts.get("type 0", 0) + counts.get("type 1", 0) >= 1
    assert counts.get("type 1 value v3", 0) >= 1 and counts.get("type 1 value v1", 0) >= 1
    assert counts.get("type 2 value v3", 0) >= 1 and counts.get("type 2 tombstone", 0) >= 1
    for kind in (100, 101, 102, 103):
        assert counts.get(f"type {kind} value v0", 0) >= 1, kind

    # Kafka's types decode with the tests' own decoder (tests/coordinator_log.py) to the last byte.
    groups = []
    for _, key, value in coordinator_records(FIXTURE_DIR):
        (kind,) = struct.unpack_from(">h", key, 0)
        if value is None:
            continue
        if kind in (0, 1):
            parse_offset_value(value)
        elif kind == 2:
            groups.append(parse_group_value(value))
    assert any(len(g["members"]) == 2 and any(m["group_instance_id"] for m in g["members"]) for g in groups)
    assert any(g["members"] == [] and g["protocol_type"] == "consumer" for g in groups)


def test_replays_to_the_state_it_was_written_in(broker_factory: BrokerFactory) -> None:
    b = broker_factory(BROKER_ARGS, start=False)
    shutil.copytree(FIXTURE_DIR, b.data_dir)
    b.start()
    with b.connect() as c:
        seen = json.loads(json.dumps(observe(c)))
        assert set(EXPECTED) == {*seen, "redeliveries", "records"}
        # Reloaded members are listed at once (fresh session timers), the group still Stable.
        stable = seen["describe_groups"][STABLE]
        assert stable["state"] == "Stable"
        assert sorted(m["group_instance_id"] or "" for m in stable["members"]) == ["", "legacy-static-1"]
        for section, value in seen.items():
            assert value == EXPECTED[section], section
        topic_ids = {uuid.UUID(t["topic_id"]): name for name, t in EXPECTED["share_offsets"][SHARE].items()}
        assert redeliveries(c, topic_ids, partitions=2) == EXPECTED["redeliveries"]
