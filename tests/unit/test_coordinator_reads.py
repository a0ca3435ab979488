"""Operations run with ``CoordinatorRuntime.run_or_tell`` run on the caller's stack when their key
is idle, and the dispatcher answers at once a Reply that settled before its handler returned."""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kcoord.apis.reply import Reply, reply_with
from kcoord.clock import ManualClock
from kcoord.config import BrokerConfig, build_config
from kcoord.groups.offsets import commit_records
from kcoord.protocol.errors import ErrorCode, KafkaError
from kcoord.protocol.messages import ApiKey, response_class
from kcoord.runtime.outcome import Outcome
from kcoord.server.api_table import ApiSpec, ApiTable
from kcoord.server.app import Broker
from kcoord.server.coordinators import group_runtime
from kcoord.server.dispatcher import DeferredAnswer, Dispatcher
from kcoord.storage.flush import Flusher
from tests.unit.grouputil import FakeTopics
from tests.wire import request_header


def _runtime(tmp_path: Path, flusher: Flusher) -> Any:
    config = build_config({}, {"log_dirs": str(tmp_path), "offsets_topic_num_partitions": 1})
    runtime = group_runtime(config, flusher, ManualClock(), FakeTopics(), lambda _gid: None)
    runtime.open(unclean=False)
    return runtime


def _noting(events: list[str], name: str, records: list[Any] | None = None) -> Any:
    def op(state: object, now: int) -> Outcome:
        events.append(name)
        out = Outcome(records=list(records or []))
        out.respond(lambda value: events.append(f"{name} answered"), None)
        return out

    return op


def test_an_operation_on_an_idle_key_runs_and_answers_before_run_or_tell_returns(tmp_path: Path) -> None:
    async def main() -> list[str]:
        runtime = _runtime(tmp_path, Flusher("os"))
        events: list[str] = []
        runtime.run_or_tell("g", _noting(events, "read"))
        events.append("returned")
        await asyncio.sleep(0.01)
        runtime.close()
        return events

    assert asyncio.run(main()) == ["read", "read answered", "returned"]


def test_it_waits_behind_its_keys_queued_operations_and_never_runs_inside_one(tmp_path: Path) -> None:
    # Queued behind a tell of its own key, it keeps its place; told from inside an
    # operation (of any key), it runs after it, not nested in it: an operation's records are
    # applied in the order operations run, and replay must see that order.
    async def main() -> list[str]:
        runtime = _runtime(tmp_path, Flusher("os"))
        events: list[str] = []
        runtime.tell("g", _noting(events, "write g"))
        runtime.run_or_tell("g", _noting(events, "read g"))
        events.append("returned")

        def telling_a_read(state: object, now: int) -> Outcome:
            events.append("outer h")
            runtime.run_or_tell("k", _noting(events, "read k"))
            events.append("outer h ends")
            return Outcome()

        runtime.tell("h", telling_a_read)
        await asyncio.sleep(0.01)
        runtime.close()
        return events

    assert asyncio.run(main()) == [
        "returned",
        "write g",
        "write g answered",
        "read g",
        "read g answered",
        "outer h",
        "outer h ends",
        "read k",
        "read k answered",
    ]


def test_its_answer_waits_until_its_keys_last_write_is_durable(tmp_path: Path) -> None:
    # A commit run at once is answered after the flush round that syncs its records; a read run
    # at once after it (the actor is idle again) read that commit: it is answered after it too.
    async def main() -> list[str]:
        flusher = Flusher("always", directory=tmp_path)
        flusher.start()
        runtime = _runtime(tmp_path, flusher)
        events: list[str] = []
        records = commit_records("g", [("t", 0, 5, -1, "")], 0, -1)
        runtime.run_or_tell("g", _noting(events, "commit", records))
        runtime.run_or_tell("g", _noting(events, "read"))
        events.append("returned")
        for _ in range(100):
            if "read answered" in events:
                break
            await asyncio.sleep(0.01)
        end = runtime.shards[0].log.log_end_offset
        runtime.close()
        flusher.close()
        assert end == 1  # the commit's record, in the shard's batch
        return events

    assert asyncio.run(main()) == ["commit", "read", "returned", "commit answered", "read answered"]


def test_a_key_is_idle_for_reads_only_with_nothing_queued_running_or_unsynced(tmp_path: Path) -> None:
    # What a handler may read without an operation (OffsetFetch): not while the key has an
    # operation queued, not inside a running one, not before its last write is durable.
    async def main() -> list[tuple[str, bool]]:
        flusher = Flusher("always", directory=tmp_path)
        flusher.start()
        runtime = _runtime(tmp_path, flusher)
        seen = [("never used", runtime.idle("g"))]
        runtime.tell("g", _noting([], "queued"))
        seen.append(("queued", runtime.idle("g")))

        def looking(state: object, now: int) -> Outcome:
            seen.append(("inside an operation of another key", runtime.idle("g")))
            return Outcome()

        await asyncio.sleep(0.01)
        runtime.tell("h", looking)
        await asyncio.sleep(0.01)
        answered: list[str] = []
        records = commit_records("g", [("t", 0, 5, -1, "")], 0, -1)
        runtime.run_or_tell("g", _noting(answered, "commit", records))
        seen.append(("written, not yet durable", runtime.idle("g")))
        for _ in range(1000):
            if answered[-1:] == ["commit answered"]:
                break
            await asyncio.sleep(0.01)
        seen.append(("durable", runtime.idle("g")))
        runtime.close()
        flusher.close()
        return seen

    assert asyncio.run(main()) == [
        ("never used", True),
        ("queued", False),
        ("inside an operation of another key", False),
        ("written, not yet durable", False),
        ("durable", True),
    ]


# --- the dispatcher ---------------------------------------------------------------------------
_VersionsResponse: Any = response_class(ApiKey.ApiVersions)


def _dispatcher(handler: Any, broker: Broker) -> Dispatcher:
    table = ApiTable(
        [
            ApiSpec(
                ApiKey.ApiVersions,
                0,
                3,
                handler,
                lambda req, v, code, msg: _VersionsResponse(error_code=code, api_keys=[]),
            )
        ]
    )
    return Dispatcher(broker.services, table)


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    """A broker's own services, for the request metrics the dispatcher counts in: made without
    starting it, only its flusher's directory handle is opened."""
    made = Broker(BrokerConfig(log_dirs=str(tmp_path)))
    yield made
    made.flusher.close()


def _answer(error: int) -> Any:
    return _VersionsResponse(error_code=error, api_keys=[])


def _error_of(frame: Any) -> int:
    assert isinstance(frame, bytes)
    size, corr, error = struct.unpack_from(">iih", frame, 0)
    assert (size, corr) == (len(frame) - 4, 9)
    return int(error)


def test_a_reply_settled_by_its_handler_is_answered_at_once(broker: Broker) -> None:
    def settled(services: Any, ctx: Any, req: Any) -> Reply:
        reply, respond = reply_with(_answer)
        respond(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
        return reply

    def failed(services: Any, ctx: Any, req: Any) -> Reply:
        reply, respond = reply_with(_answer)
        respond(KafkaError(ErrorCode.NOT_COORDINATOR))
        return reply

    frame = request_header(ApiKey.ApiVersions, 0, 9)
    assert (
        _error_of(_dispatcher(settled, broker).dispatch(frame, None))
        == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    )
    # A failed Reply gets the API's error answer, as a deferred one would.
    assert _error_of(_dispatcher(failed, broker).dispatch(frame, None)) == ErrorCode.NOT_COORDINATOR


def test_a_reply_not_settled_is_deferred_and_framed_when_it_settles(broker: Broker) -> None:
    later: list[Any] = []

    def pending(services: Any, ctx: Any, req: Any) -> Reply:
        reply, respond = reply_with(_answer)
        later.append(respond)
        return reply

    deferred = _dispatcher(pending, broker).dispatch(request_header(ApiKey.ApiVersions, 0, 9), None)
    assert isinstance(deferred, DeferredAnswer)
    got: list[Any] = []
    deferred.then(lambda frame, error: got.append((frame, error)))
    assert got == []
    later[0](ErrorCode.NONE)
    assert [(_error_of(frame), error) for frame, error in got] == [(0, None)]


def test_a_partition_wide_write_holds_back_reads_of_every_key_of_its_partition(tmp_path: Path) -> None:
    # A transaction marker runs on the partition as a whole and makes pending offsets of any
    # group committed: until its batch is durable, no key of the partition is idle, and what an
    # operation on one answers waits for it too.
    async def main() -> list[str]:
        flusher = Flusher("always", directory=tmp_path)
        flusher.start()
        runtime = _runtime(tmp_path, flusher)  # one partition: every key shares it
        events: list[str] = []
        records = commit_records("other", [("t", 0, 5, -1, "")], 0, -1)
        runtime.tell_partition(0, _noting(events, "marker", records))
        await asyncio.sleep(0)  # the run queue's pass runs it; its batch waits for a round
        events.append(f"idle after the marker ran: {runtime.idle('g')}")
        runtime.run_or_tell("g", _noting(events, "read g"))
        for _ in range(1000):
            if "read g answered" in events:
                break
            await asyncio.sleep(0.01)
        events.append(f"idle once durable: {runtime.idle('g')}")
        runtime.close()
        flusher.close()
        return events

    assert asyncio.run(main()) == [
        "marker",
        "idle after the marker ran: False",
        "read g",
        "marker answered",
        "read g answered",
        "idle once durable: True",
    ]


def test_an_answer_waits_for_the_later_of_its_keys_write_and_a_partition_wide_one(tmp_path: Path) -> None:
    # The key's own commit syncs in one round, a marker written after it in a later one: a read
    # of the key run after both is answered only once the marker's round is durable.
    async def main() -> list[str]:
        flusher = Flusher("always", directory=tmp_path)
        flusher.start()
        runtime = _runtime(tmp_path, flusher)
        events: list[str] = []
        runtime.run_or_tell("g", _noting(events, "commit", commit_records("g", [("t", 0, 5, -1, "")], 0, -1)))
        for _ in range(100):  # until the commit's batch is appended and its round syncing
            await asyncio.sleep(0)
            if runtime._writers[0]._batch is None:
                break
        marker_records = commit_records("other", [("t", 0, 7, -1, "")], 0, -1)
        runtime.tell_partition(0, _noting(events, "marker", marker_records))
        runtime.tell("g", _noting(events, "read g"))
        for _ in range(1000):
            if "read g answered" in events:
                break
            await asyncio.sleep(0.01)
        runtime.close()
        flusher.close()
        return [e for e in events if e.endswith("answered")]

    assert asyncio.run(main()) == ["commit answered", "marker answered", "read g answered"]
