"""The web console in headless Chromium (Debian's ``chromium``, driven by Playwright; no browser
download): each page against a broker with real groups, its numbers checked against what Kafka's
Admin API answers (kafka-python's KafkaAdminClient, DescribeShareGroupOffsets), and the offset
history's "rewind to here" clicked through dry run, confirmation and refusal.

Screenshots of every page go to ``console-screenshots`` under pytest's temporary directory; the
path is printed. Run only these: ``pytest -m browser``.
"""

from __future__ import annotations

import json
import re
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.structs import OffsetAndMetadata

from tests.harness import BrokerProcess, free_port, shared_broker
from tests.integration.test_share_confluent import produce, run_worker, set_earliest, start_offsets

CHROMIUM = "/usr/bin/chromium"
playwright_api = pytest.importorskip(
    "playwright.sync_api", reason="playwright is not installed (pip install playwright; no browser download)"
)
pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(
        not Path(CHROMIUM).exists(), reason=f"{CHROMIUM} is missing: apt-get install chromium"
    ),
]

HTTP_PORT = free_port()
_started, cbroker = shared_broker(
    "cbroker", [f"--http-listeners=http://127.0.0.1:{HTTP_PORT}", "--group-initial-rebalance-delay-ms=0"]
)
URL = f"http://127.0.0.1:{HTTP_PORT}"


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory, pytestconfig: pytest.Config) -> Iterator[Path]:
    path = tmp_path_factory.mktemp("console-screenshots")
    yield path
    reporter = pytestconfig.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_line(f"\nconsole screenshots: {path}")


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with playwright_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, headless=True)
        yield b
        b.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    context.set_default_timeout(10_000)
    pg = context.new_page()
    errors: list[str] = []
    pg.on("pageerror", lambda e: errors.append(str(e)))
    yield pg
    context.close()
    assert errors == [], f"JavaScript errors on the console's pages: {errors}"


def shoot(page: Any, shots: Path, name: str) -> None:
    page.screenshot(path=str(shots / f"{name}.png"), full_page=True)


def cells(locator: Any) -> list[str]:
    return [t.strip() for t in locator.all_inner_texts()]


def api(path: str) -> tuple[int, Any]:
    try:
        with urllib.request.urlopen(URL + path, timeout=10) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        body = e.read()
        return e.code, json.loads(body) if body.startswith(b"{") else body.decode()


def wait_assigned(consumer: KafkaConsumer, n: int) -> None:
    """Poll until ``n`` partitions are assigned. kafka-python 3.0.12 now and then completes a join
    with nothing assigned (its leader logs "No partition metadata for topic ..." for a topic that
    exists: a metadata response raced its assignment) and then waits for its next metadata refresh,
    minutes later; subscribing again makes it join again."""
    topics = sorted(consumer.subscription() or ())
    for _attempt in range(3):
        deadline = time.monotonic() + 10
        while len(consumer.assignment()) < n and time.monotonic() < deadline:
            consumer.poll(timeout_ms=200)
        if len(consumer.assignment()) == n:
            return
        consumer.unsubscribe()
        consumer.subscribe(topics)
    assert len(consumer.assignment()) == n


@pytest.fixture
def admin(cbroker: BrokerProcess) -> Iterator[KafkaAdminClient]:
    a = KafkaAdminClient(bootstrap_servers=cbroker.bootstrap, request_timeout_ms=10_000)
    yield a
    a.close()


def test_overview_group_and_topic_pages_match_the_admin_api(
    cbroker: BrokerProcess, admin: KafkaAdminClient, page: Any, shots: Path, unique_topic: str
) -> None:
    topic, group = unique_topic, unique_topic + "-g"
    admin.create_topics([NewTopic(topic, 2, 1, topic_configs={"retention.ms": "86400000"})])
    producer = KafkaProducer(bootstrap_servers=cbroker.bootstrap)
    sent: dict[int, list[tuple[str, str]]] = {0: [], 1: []}
    for i in range(25):
        p, key, value = i % 2, f"key-{i}", f"<b>value {i}</b>"  # markup must show as text
        producer.send(topic, key=key.encode(), value=value.encode(), partition=p)
        sent[p].append((key, value))
    producer.flush()
    producer.close()

    consumer = KafkaConsumer(
        topic, bootstrap_servers=cbroker.bootstrap, group_id=group, client_id="console-member",
        enable_auto_commit=False, auto_offset_reset="earliest",
    )  # fmt: skip
    try:
        wait_assigned(consumer, 2)
        tp0, tp1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
        consumer.commit({tp0: OffsetAndMetadata(7, "", -1), tp1: OffsetAndMetadata(3, "", -1)})

        described = admin.describe_groups([group])[group]
        committed = {
            tp.partition: o.offset for tp, o in admin.list_group_offsets({group: None})[group].items()
        }
        ends = {tp.partition: o.offset for tp, o in admin.list_partition_offsets({tp0: -1, tp1: -1}).items()}
        starts = {
            tp.partition: o.offset for tp, o in admin.list_partition_offsets({tp0: -2, tp1: -2}).items()
        }
        assert committed == {0: 7, 1: 3} and ends == {0: 13, 1: 12}

        # Overview: the topics and partitions the Admin API lists, the group as it describes it.
        page.goto(URL + "/")
        listed = [t for t in admin.describe_topics() if not t["is_internal"]]
        assert int(page.inner_text("#topic-count")) == len(listed)
        assert int(page.inner_text("#partition-count")) == sum(len(t["partitions"]) for t in listed)
        assert page.inner_text("#broker-status") == "ready"
        row = page.locator(f'tr[data-group="{group}"]')
        assert row.locator(".state").inner_text() == described["group_state"] == "Stable"
        assert int(row.locator(".members").inner_text()) == len(described["members"]) == 1
        assert int(row.locator(".lag").inner_text()) == sum(ends[p] - committed[p] for p in ends)
        types = {
            t: int(page.locator(f'[data-group-type="{t}"] b').inner_text()) for t in ("classic", "share")
        }
        kafka_groups = admin.list_groups()
        assert types["classic"] == sum(1 for g in kafka_groups if g.get("group_type", "classic") == "classic")
        shoot(page, shots, "overview")

        # Group page: members and assignment as DescribeGroups, offsets as OffsetFetch, log end
        # as ListOffsets latest, lag their difference.
        page.click(f'tr[data-group="{group}"] a')
        page.wait_for_selector("#members")
        assert page.inner_text("#group-state") == described["group_state"]
        (member,) = described["members"]
        mrow = page.locator(f'tr[data-member="{member["member_id"]}"]')
        assert mrow.locator(".client-id").inner_text() == member["client_id"] == "console-member"
        assert mrow.locator(".host").inner_text() == member["client_host"]
        assert mrow.locator(".assignment").inner_text() == f"{topic}: 0,1"
        for p in (0, 1):
            prow = page.locator(f'#offsets tr[data-partition="{topic}-{p}"]')
            assert int(prow.locator(".offset").inner_text()) == committed[p]
            assert int(prow.locator(".log-end").inner_text()) == ends[p]
            assert int(prow.locator(".lag").inner_text()) == ends[p] - committed[p]
        shoot(page, shots, "group")

        # Topic page: offsets as ListOffsets earliest/latest, the override DescribeConfigs shows,
        # the last records of each partition as produced (escaped: the markup is text).
        page.goto(f"{URL}/topics/{topic}")
        for p in (0, 1):
            prow = page.locator(f'#partition-table tr[data-partition="{p}"]')
            assert int(prow.locator(".log-start").inner_text()) == starts[p] == 0
            assert int(prow.locator(".log-end").inner_text()) == ends[p]
            assert int(prow.locator(".size").get_attribute("title").split()[0]) > 0
            records = page.locator(f'table[data-records="{p}"] tbody tr')
            shown = list(zip(cells(records.locator(".key")), cells(records.locator(".value")), strict=True))
            assert shown == sent[p][-10:]
            offsets = [int(o) for o in records.evaluate_all("rs => rs.map(r => r.dataset.offset)")]
            assert offsets == list(range(ends[p] - 10, ends[p]))
        assert page.locator('tr[data-config="retention.ms"] .value').inner_text() == "86400000"
        assert page.locator("td.value b").count() == 0
        shoot(page, shots, "topic")
    finally:
        consumer.close()


def test_share_group_page_shows_the_share_partition_state(
    cbroker: BrokerProcess, page: Any, shots: Path, unique_topic: str
) -> None:
    ck = pytest.importorskip("confluent_kafka")
    topic, group, n = unique_topic, unique_topic + "-sg", 20
    cbroker.create_topic(topic, 1)
    produce(cbroker, topic, 0, n)
    set_earliest(cbroker, group)
    run_worker(cbroker, group, topic, n, "explicit", release="p0-3")  # all acknowledged
    produce(cbroker, topic, 0, 10)

    # A member that keeps records in flight: of offsets n..n+9 it releases the first, accepts
    # the next four and holds the rest acquired.
    consumer = ck.ShareConsumer(
        {"bootstrap.servers": cbroker.bootstrap, "group.id": group, "client.id": "console-share",
         "share.acknowledgement.mode": "explicit"}
    )  # fmt: skip
    try:
        consumer.subscribe([topic])
        got: dict[int, Any] = {}
        deadline = time.monotonic() + 30
        while len(got) < 10 and time.monotonic() < deadline:
            got.update((m.offset(), m) for m in consumer.poll(0.5) if m.error() is None)
        assert sorted(got) == list(range(n, n + 10))
        consumer.acknowledge(got[n], ck.AcknowledgeType.RELEASE)
        for o in range(n + 1, n + 5):
            consumer.acknowledge(got[o], ck.AcknowledgeType.ACCEPT)
        consumer.commit_sync()

        page.goto(f"{URL}/groups/{group}")
        assert page.inner_text("#group-type") == "share"
        spso = start_offsets(cbroker, group)[0]  # DescribeShareGroupOffsets
        assert spso == n  # the released record holds the start offset
        row = page.locator(f'tr[data-share-partition="{topic}-0"]')
        assert int(row.locator(".spso").inner_text()) == spso
        assert int(row.locator(".speo").inner_text()) == n + 10
        assert int(row.locator(".log-end").inner_text()) == n + 10
        count = {s: int(row.locator(f".state-{s}").inner_text())
                 for s in ("available", "acquired", "acknowledged", "archived")}  # fmt: skip
        assert count == {"available": 1, "acquired": 5, "acknowledged": 4, "archived": 0}
        runs = page.locator(f'table[data-runs="{topic}-0"] tbody tr')
        assert [r.split("\t")[:3] for r in cells(runs)] == [
            [f"{n}", "Available", "1"], [f"{n + 1}\u2013{n + 4}", "Acknowledged", "1"],
            [f"{n + 5}\u2013{n + 9}", "Acquired", "1"],
        ]  # fmt: skip
        offsets = page.locator(f'#offsets tr[data-partition="{topic}-0"]')
        assert int(offsets.locator(".offset").inner_text()) == spso
        assert int(offsets.locator(".lag").inner_text()) == 10
        assert cells(page.locator("#members .client-id")) == ["console-share"]
        shoot(page, shots, "share-group")
    finally:
        consumer.close()


def test_offset_history_rewind(
    cbroker: BrokerProcess, admin: KafkaAdminClient, page: Any, shots: Path, unique_topic: str
) -> None:
    topic, group = unique_topic, unique_topic + "-g"
    cbroker.create_topic(topic, 2)
    produce(cbroker, topic, 0, 30)
    produce(cbroker, topic, 1, 30)
    consumer = KafkaConsumer(
        topic, bootstrap_servers=cbroker.bootstrap, group_id=group, client_id="rewind-member",
        enable_auto_commit=False, auto_offset_reset="earliest",
    )  # fmt: skip
    tp0, tp1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    try:
        wait_assigned(consumer, 2)
        for o in (5, 10, 20):  # three commits, far enough apart to tell their instants apart
            consumer.commit({tp0: OffsetAndMetadata(o, "", -1), tp1: OffsetAndMetadata(o + 1, "", -1)})
            time.sleep(0.05)
        status, body = api(f"/api/groups/{group}/history")
        if status != 200 or "changes" not in body:
            pytest.skip(
                "the offset history API (/api/groups/<g>/history, /reset-offsets; the ops-history work) "
                f"is not served by this build: {status} {body}"
            )
        first = min(c["effective_at"] for c in body["changes"] if c["offset"] == 5 and c["partition"] == 0)

        # The group page charts the history.
        page.goto(f"{URL}/groups/{group}")
        assert page.locator("#lag-chart polyline.series").count() == 2
        shoot(page, shots, "group-with-history")

        # History page: newest first; rewinding while the member is active is refused.
        page.click("#history-link")
        page.wait_for_selector("#history")
        assert cells(page.locator(f'#history tr[data-partition="{topic}-0"] .offset')) == ["20", "10", "5"]
        entry = page.locator(f'#history tr[data-commit="{first}"][data-partition="{topic}-0"]')
        entry.locator("button.rewind").click()
        refused = page.wait_for_selector("#rewind-result.refused")
        assert refused.get_attribute("data-error") == "NON_EMPTY_GROUP"
        assert "active members" in refused.inner_text()
        shoot(page, shots, "history-refused")
    finally:
        consumer.close()

    # Dry run: the plan, and nothing committed yet.
    entry.locator("button.rewind").click()
    page.wait_for_selector('#rewind-result[data-executed="false"]')
    plan = {
        r.get_attribute("data-partition"): (
            r.locator(".current").inner_text(),
            r.locator(".new").inner_text(),
        )
        for r in page.locator("#rewind-result table.plan tbody tr").all()
    }
    assert plan == {f"{topic}-0": ("20", "5"), f"{topic}-1": ("21", "6")}
    offsets = admin.list_group_offsets({group: None})[group]
    assert {tp.partition: o.offset for tp, o in offsets.items()} == {0: 20, 1: 21}
    shoot(page, shots, "history-dry-run")

    # Confirmed: committed, as the Admin API then reads them.
    page.click("#confirm-rewind")
    page.wait_for_selector('#rewind-result[data-executed="true"]')
    offsets = admin.list_group_offsets({group: None})[group]
    assert {tp.partition: o.offset for tp, o in offsets.items()} == {0: 5, 1: 6}
    assert re.search(r"2 partitions committed", page.inner_text("#rewind-result"))
    shoot(page, shots, "history-executed")


def test_rewind_is_refused_without_htmx(cbroker: BrokerProcess) -> None:
    """A plain cross-site form POST carries no HX-Request header: refused before the API is asked."""
    req = urllib.request.Request(
        f"{URL}/groups/any/rewind", data=b"to_commit_at=0&execute=true", method="POST"
    )
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(req, timeout=10)
    assert e.value.code == 403


def test_unknown_pages_and_static_files(page: Any) -> None:
    assert page.goto(URL + "/groups/no-such-group").status == 404
    assert "No group no-such-group" in page.inner_text("main")
    assert page.goto(URL + "/topics/no-such-topic").status == 404
    js = page.goto(URL + "/static/htmx.min.js")
    assert js.status == 200 and "javascript" in js.headers["content-type"]
    # Only the files the console ships: an encoded path does not climb out of static/.
    assert api("/static/..%2Fserver.py")[0] == 404
