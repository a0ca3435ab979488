"""Fixtures that run the real broker as a subprocess (``python -m kcoord.cli serve``).

- ``broker_factory`` (function scope): start brokers with their own data directory on a free
  port; each can be stopped (SIGTERM), killed (SIGKILL) and restarted on the same port and
  directory. Everything it started is stopped at the end of the test.
- ``broker`` (session scope): one shared broker for ordinary client tests; tests create topics
  with unique names (``unique_topic``).

Broker stderr goes to a file per broker; when a test fails, the logs of the brokers it used
are attached to the report (shown in pytest's failure output).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.harness import BrokerFactory, BrokerProcess


# --- failure reports ----------------------------------------------------------------------------
@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):  # type: ignore[no-untyped-def]
    outcome = yield
    report = outcome.get_result()
    if report.failed:
        for b in getattr(item, "_kcoord_brokers", []):
            text = b.log_text()
            if len(text) > 20_000:
                text = "...\n" + text[-20_000:]
            report.sections.append((f"broker log {b.log_path.name} ({b.bootstrap})", text))


def _track(request: pytest.FixtureRequest, broker: BrokerProcess) -> None:
    node = request.node
    if not hasattr(node, "_kcoord_brokers"):
        node._kcoord_brokers = []  # type: ignore[attr-defined]
    node._kcoord_brokers.append(broker)  # type: ignore[attr-defined]


# --- fixtures -----------------------------------------------------------------------------------
@pytest.fixture
def broker_factory(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[BrokerFactory]:
    factory = BrokerFactory(tmp_path, on_create=lambda b: _track(request, b))
    yield factory
    factory.close()


@pytest.fixture(scope="session")
def _session_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    root = tmp_path_factory.mktemp("shared-broker")
    b = BrokerProcess(root / "data", root / "broker.log")
    b.start()
    yield b
    if b.running:
        b.stop()


@pytest.fixture
def broker(_session_broker: BrokerProcess, request: pytest.FixtureRequest) -> BrokerProcess:
    """The shared broker; restarted if an earlier test left it dead."""
    if not _session_broker.running:
        _session_broker.start()
    _track(request, _session_broker)
    return _session_broker


@pytest.fixture
def unique_topic(request: pytest.FixtureRequest) -> str:
    base = "".join(ch if ch.isalnum() else "-" for ch in request.node.name)[:80].strip("-")
    return f"{base}-{uuid.uuid4().hex[:8]}"
