"""The server's count of requests still waiting for their answer, which the flusher asks before
syncing on the event loop's thread (storage/flush.py): parked fetches count until they are
answered, also on a connection closed meanwhile, and the count goes back to zero."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from kcoord.protocol.messages import ApiKey
from tests.integration.test_txn_read_committed import InProcessBroker
from tests.wire import fetch_request

TOPIC = "owed"


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessBroker]:
    b = InProcessBroker(Path(tmp_path_factory.mktemp("owed")))
    with b.connect() as c:
        c.create_topic(TOPIC)
    yield b
    b.stop()


def wait_for(check: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_parked_fetches_are_owed_until_answered(broker: InProcessBroker) -> None:
    server = broker.broker.server

    def owed() -> int:
        return broker.call(lambda: server.answers_owed)

    def idle() -> bool:
        return broker.call(server.idle)

    wait_for(lambda: owed() == 0)
    parked = fetch_request(TOPIC, [(0, 0)], max_wait_ms=1500)  # nothing to read: it waits
    first, second = broker.connect(), broker.connect()
    try:
        corr = first.send(ApiKey.Fetch, 12, **parked)
        wait_for(lambda: owed() == 1)
        assert idle()  # one request waiting: a round it waits for may sync on the loop
        second.send(ApiKey.Fetch, 12, **parked)
        wait_for(lambda: owed() == 2)
        assert not idle()
        second.close()  # its fetch is still answered (to nobody) when its wait ends
        assert first.recv(ApiKey.Fetch, 12, corr).error_code == 0
        wait_for(lambda: owed() == 0)
        assert idle()
    finally:
        first.close()
        second.close()
