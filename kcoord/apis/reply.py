"""A response that arrives later, handed over by a plain callback.

Handlers whose answer waits for a group actor or for an fsync return a :class:`Reply` instead of
a coroutine: a coroutine costs a Task per request, and every future it awaits one more pass of
the event loop. ``resolve`` and ``fail`` call the one consumer at once, on the resolver's stack,
so the consumer must not block; the dispatcher's consumer encodes the response and the
connection's queues it for the next write.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

Consumer = Callable[[Any, BaseException | None], None]


class Reply:
    __slots__ = ("_consumer", "_done", "_error", "_value")

    def __init__(self) -> None:
        self._consumer: Consumer | None = None
        self._done = False
        self._value: Any = None
        self._error: BaseException | None = None

    @property
    def done(self) -> bool:
        return self._done

    def resolve(self, value: Any) -> None:
        if self._done:
            return
        self._done = True
        consumer = self._consumer
        if consumer is None:
            self._value = value
        else:
            self._consumer = None
            consumer(value, None)

    def fail(self, error: BaseException) -> None:
        if self._done:
            return
        self._done = True
        consumer = self._consumer
        if consumer is None:
            self._error = error
        else:
            self._consumer = None
            consumer(None, error)

    def settle(self, value: Any) -> None:
        """Resolve, or fail when ``value`` is an exception (the groups' Responder convention)."""
        if isinstance(value, BaseException):
            self.fail(value)
        else:
            self.resolve(value)

    def then(self, consumer: Consumer) -> None:
        """Hand the outcome to ``consumer(value, error)``: now if known, else when it is."""
        if self._done:
            value, error = self._value, self._error
            self._value = self._error = None
            consumer(value, error)
        else:
            self._consumer = consumer


def reply_with(build: Callable[[Any], Any]) -> tuple[Reply, Callable[[Any], None]]:
    """A Reply and the responder that completes it with ``build(value)`` (an exception fails it)."""
    reply = Reply()

    def respond(value: Any) -> None:
        if reply._done:
            return
        if isinstance(value, BaseException):
            reply.fail(value)
            return
        try:
            response = build(value)
        except Exception as e:
            reply.fail(e)
            return
        reply.resolve(response)

    return reply, respond


def from_future(fut: Any, build: Callable[[Any], Any]) -> Reply:
    """A Reply completed with ``build(result)`` when the asyncio future ``fut`` is done."""
    reply, respond = reply_with(build)

    def done(f: Any) -> None:
        if f.cancelled():
            reply.fail(asyncio.CancelledError())
            return
        error = f.exception()
        respond(error if error is not None else f.result())

    fut.add_done_callback(done)
    return reply
