"""Topic configs kcoord does not act on: a value other than the default is INVALID_CONFIG and
changes nothing, and SKIPPED.md names each of them (the list there is the code's list)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kcoord.config import BrokerConfig
from kcoord.dataplane.topic_config import TOPIC_CONFIGS, InvalidTopicConfig, validate_topic_configs

UNHONOURED = sorted(n for n, d in TOPIC_CONFIGS.items() if not d.honoured)
SKIPPED = (Path(__file__).resolve().parents[2] / "SKIPPED.md").read_text()


def test_the_unhonoured_are_only_what_one_node_cannot_do() -> None:
    assert (
        sorted(
            [
                "file.delete.delay.ms",
                "follower.replication.throttled.replicas",
                "leader.replication.throttled.replicas",
                "local.retention.bytes",
                "local.retention.ms",
                "min.insync.replicas",
                "remote.log.copy.disable",
                "remote.log.delete.on.disable",
                "remote.storage.enable",
                "segment.index.bytes",
                "unclean.leader.election.enable",
            ]
        )
        == UNHONOURED
    )


@pytest.mark.parametrize("name", UNHONOURED)
def test_a_non_default_value_is_refused_and_listed_in_skipped(name: str) -> None:
    broker = BrokerConfig()
    default = TOPIC_CONFIGS[name].default(broker)
    assert validate_topic_configs({name: default}, broker) == {name: default}
    other = {"true": "false", "false": "true"}.get(default, "1" if default != "1" else "2")
    if name.endswith("throttled.replicas"):
        other = "0:1"
    with pytest.raises(InvalidTopicConfig, match=f"kcoord does not implement {name}"):
        validate_topic_configs({name: other}, broker)
    short = (
        "remote.*"
        if name.startswith("remote.")
        else "local.retention.*"
        if name.startswith("local.")
        else name
    )
    assert f"`{short}`" in SKIPPED or (
        name.endswith("throttled.replicas") and "throttled.replicas`" in SKIPPED
    )
