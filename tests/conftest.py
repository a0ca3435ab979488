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

from tests.harness import BrokerFactory, shared_broker, track_broker


# --- tests that need the pure modules -------------------------------------------------------------
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # A test marked pure stands in for part of a class that may run compiled (a fake actor in
    # the runtime's run queue): compiled, it runs in test_compiled.py's pure run instead.
    import kcoord

    if kcoord.compiled:
        skip = pytest.mark.skip(reason="needs the pure modules; tests/unit/test_compiled.py runs it on them")
        for item in items:
            if item.get_closest_marker("pure") is not None:
                item.add_marker(skip)


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


# --- fixtures -----------------------------------------------------------------------------------
@pytest.fixture
def broker_factory(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[BrokerFactory]:
    factory = BrokerFactory(tmp_path, on_create=lambda b: track_broker(request, b))
    yield factory
    factory.close()


# The shared broker (``_broker_started`` is the broker itself, for module-scoped fixtures).
_broker_started, broker = shared_broker("broker", scope="session")


@pytest.fixture
def unique_topic(request: pytest.FixtureRequest) -> str:
    base = "".join(ch if ch.isalnum() else "-" for ch in request.node.name)[:80].strip("-")
    return f"{base}-{uuid.uuid4().hex[:8]}"
