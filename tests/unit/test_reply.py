"""Reply: the Task-free way a handler hands its response over later."""

from __future__ import annotations

import asyncio
from typing import Any

from kcoord.apis.reply import Reply, from_future, reply_with


def _sink() -> tuple[list[Any], Any]:
    got: list[Any] = []
    return got, lambda value, error: got.append((value, error))


def test_consumer_gets_the_value_whether_it_comes_before_or_after() -> None:
    early, late = Reply(), Reply()
    early.resolve(1)
    got, consumer = _sink()
    early.then(consumer)
    late.then(consumer)
    assert got == [(1, None)]
    late.resolve(2)
    assert got == [(1, None), (2, None)]


def test_only_the_first_outcome_counts() -> None:
    reply = Reply()
    got, consumer = _sink()
    reply.then(consumer)
    boom = RuntimeError("x")
    reply.fail(boom)
    reply.resolve(3)
    reply.fail(ValueError())
    assert got == [(None, boom)]


def test_reply_with_builds_once_and_routes_exceptions() -> None:
    calls: list[int] = []

    def build(v: int) -> int:
        calls.append(v)
        if v < 0:
            raise ValueError("negative")
        return v * 10

    reply, respond = reply_with(build)
    got, consumer = _sink()
    reply.then(consumer)
    respond(4)
    respond(5)  # a second answer of the same responder is ignored, as future_responder does
    assert got == [(40, None)] and calls == [4]

    failing, respond = reply_with(build)
    failing.then(consumer)
    respond(-1)
    assert isinstance(got[-1][1], ValueError)

    refused, respond = reply_with(build)
    refused.then(consumer)
    err = KeyError("k")
    respond(err)  # an exception is the failure itself, build is not called
    assert got[-1] == (None, err) and calls == [4, -1]


def test_from_future() -> None:
    async def main() -> list[Any]:
        loop = asyncio.get_running_loop()
        got, consumer = _sink()
        ok, bad, cancelled = loop.create_future(), loop.create_future(), loop.create_future()
        for fut in (ok, bad, cancelled):
            from_future(fut, lambda v: v + 1).then(consumer)
        ok.set_result(1)
        bad.set_exception(KeyError("k"))
        cancelled.cancel()
        await asyncio.sleep(0)
        return got

    got = asyncio.run(main())
    assert got[0] == (2, None)
    assert isinstance(got[1][1], KeyError)
    assert isinstance(got[2][1], asyncio.CancelledError)
