"""pytest plugin: a kcoord broker for your tests (entry point ``pytest11``, loaded when kcoord is
installed; elsewhere ``-p kcoord.testing.pytest_plugin``).

Fixtures:

- ``kcoord_broker`` (session): one in-process broker on a free port, data under pytest's temporary
  directory, started on first use (about a second) and stopped at the end of the session; it has
  ``bootstrap``, ``host``, ``port`` and ``http_url`` (None unless the HTTP endpoint is on);
- ``kcoord_bootstrap``: its "host:port", for ``bootstrap_servers`` / ``bootstrap.servers``;
- ``kcoord_names``: ``kcoord_names("orders")`` gives a name no other test uses (topics, groups),
  so tests sharing the broker never see each other's data.

Settings (ini): ``kcoord_http = true`` turns the HTTP endpoint (/metrics, /health, /api/) on, as
does any collected test marked ``@pytest.mark.kcoord_http``; ``kcoord_settings`` takes lines of
``kafka.name=value`` broker settings. ``group.initial.rebalance.delay.ms`` defaults to 0 here (a
new group's first rebalance does not wait 3 s).
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from kcoord.testing.broker import BrokerThread

DEFAULT_SETTINGS = {"group.initial.rebalance.delay.ms": "0"}


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addini("kcoord_http", "kcoord_broker serves /metrics, /health and /api/ over HTTP", type="bool")
    parser.addini("kcoord_settings", "kcoord_broker settings, one kafka.name=value a line", type="linelist")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "kcoord_http: the session's kcoord_broker serves HTTP (/metrics, /health)"
    )


def _settings(config: pytest.Config) -> dict[str, str]:
    settings = dict(DEFAULT_SETTINGS)
    for line in config.getini("kcoord_settings"):
        name, sep, value = line.partition("=")
        if not sep:
            raise pytest.UsageError(f"kcoord_settings: {line!r} is not name=value")
        settings[name.strip()] = value.strip()
    return settings


@pytest.fixture(scope="session")
def kcoord_broker(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[BrokerThread]:
    from kcoord.testing.broker import BrokerThread  # the broker is imported only when a test uses it

    config = request.config
    http = bool(config.getini("kcoord_http")) or any(
        item.get_closest_marker("kcoord_http") is not None for item in request.session.items
    )
    broker = BrokerThread(tmp_path_factory.mktemp("kcoord"), _settings(config), http=http).start()
    yield broker
    broker.stop()


@pytest.fixture(scope="session")
def kcoord_bootstrap(kcoord_broker: BrokerThread) -> str:
    return kcoord_broker.bootstrap


@pytest.fixture
def kcoord_names(request: pytest.FixtureRequest) -> Callable[[str], str]:
    test = re.sub(r"[^a-zA-Z0-9._-]+", "-", request.node.name).strip("-")[:60]

    def unique(prefix: str = "kcoord") -> str:
        return f"{prefix}-{test}-{uuid.uuid4().hex[:8]}"

    return unique
