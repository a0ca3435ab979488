"""The pytest plugin kcoord ships (kcoord.testing.pytest_plugin), used as the README shows it.

The first test is the README's example, word for word; the others run pytest inside pytest
(``pytester``) to check the session broker's settings: HTTP off unless asked, on with the marker
or the ini option, ``kcoord_settings`` applied. The plugin is loaded here by name: the ``pytest11``
entry point only exists once kcoord is installed (tests/plugin/test_entry_point.py checks it).
"""

from __future__ import annotations

import pytest

pytest_plugins = ["kcoord.testing.pytest_plugin", "pytester"]


# --- README: "Testing your code against kcoord" -------------------------------------------------
from kafka import KafkaConsumer, KafkaProducer  # noqa: E402


def test_orders_round_trip(kcoord_bootstrap, kcoord_names):
    topic, group = kcoord_names("orders"), kcoord_names("billing")
    producer = KafkaProducer(bootstrap_servers=kcoord_bootstrap)
    for i in range(3):
        producer.send(topic, f"order-{i}".encode())
    producer.flush()
    consumer = KafkaConsumer(
        topic,
        bootstrap_servers=kcoord_bootstrap,
        group_id=group,
        auto_offset_reset="earliest",
        consumer_timeout_ms=10000,
    )
    # The first three, as soon as they arrive (iterating to the end waits out the timeout).
    assert [next(consumer).value for _ in range(3)] == [b"order-0", b"order-1", b"order-2"]
    consumer.close()


# --- end of the README's example -----------------------------------------------------------------


def test_names_are_unique_per_call(kcoord_names):
    names = {kcoord_names("t") for _ in range(50)}
    assert len(names) == 50
    assert all(n.startswith("t-test_names_are_unique_per_call-") for n in names)


HTTP_CHECK = """
import json, urllib.request
import pytest

{mark}
def test_http(kcoord_broker):
    if {expect_http}:
        body = json.load(urllib.request.urlopen(kcoord_broker.http_url + "/health"))
        assert body == {{"status": "ready"}}
    else:
        assert kcoord_broker.http_url is None
"""


@pytest.mark.parametrize(
    ("mark", "ini", "expect_http"),
    [
        ("", "", False),
        ("@pytest.mark.kcoord_http", "", True),
        ("", "kcoord_http = true", True),
    ],
)
def test_http_endpoint_only_when_asked(
    pytester: pytest.Pytester, mark: str, ini: str, expect_http: bool
) -> None:
    pytester.makeini(f"[pytest]\nasyncio_default_fixture_loop_scope = function\n{ini}\n")
    pytester.makepyfile(HTTP_CHECK.format(mark=mark, expect_http=expect_http))
    result = pytester.runpytest("-p", "kcoord.testing.pytest_plugin", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)


def test_settings_reach_the_broker(pytester: pytest.Pytester) -> None:
    pytester.makeini(
        "[pytest]\nasyncio_default_fixture_loop_scope = function\nkcoord_settings =\n    num.partitions = 3\n"
    )
    pytester.makepyfile(
        """
        from kafka import KafkaProducer

        def test_partitions(kcoord_bootstrap, kcoord_names):
            producer = KafkaProducer(bootstrap_servers=kcoord_bootstrap)
            topic = kcoord_names("auto")
            producer.send(topic, b"x").get(timeout=10)
            assert len(producer.partitions_for(topic)) == 3
            producer.close()
        """
    )
    result = pytester.runpytest("-p", "kcoord.testing.pytest_plugin", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
