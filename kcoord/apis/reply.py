"""A response that arrives later, handed over by a plain callback: the one way a handler answers
later.

Handlers whose answer waits for a coordinator actor, an fsync or a long poll return a
:class:`Reply` instead of a coroutine: a coroutine costs a Task per request, and every future it
awaits one more pass of the event loop. ``resolve`` and ``fail`` call the one consumer at once,
on the resolver's stack, so the consumer must not block; the dispatcher's consumer encodes the
response and the connection queues it for the next write.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

Consumer = Callable[[Any, BaseException | None], None]
# Final: compiled, a builtin class other than the few mypyc knows is looked up on the builtins
# module at every use (an isinstance per answer).
_BaseException: Final = BaseException


class Reply:
    __slots__ = ("_build", "_consumer", "_done", "_error", "_value")

    def __init__(self, build: Callable[[Any], Any] | None = None) -> None:
        # What ``reply_with``'s responder (the Reply itself, called) makes the response with.
        self._build = build
        self._consumer: Consumer | None = None
        self._done = False
        self._value: Any = None
        self._error: BaseException | None = None

    @property
    def done(self) -> bool:
        return self._done

    def __call__(self, value: Any) -> None:
        """``reply_with``'s responder: resolve with ``build(value)``; an exception fails it."""
        if self._done:
            return
        if isinstance(value, _BaseException):
            self.fail(value)
            return
        build = self._build
        if build is None:
            raise TypeError("only reply_with's Reply is a responder")
        try:
            response = build(value)
        except Exception as e:
            self.fail(e)
            return
        self.resolve(response)

    def resolve(self, value: Any) -> None:
        if self._done:
            return
        self._done = True
        self._build = None  # its closure may hold what holds this Reply: no cycle outlives it
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
        self._build = None
        consumer = self._consumer
        if consumer is None:
            self._error = error
        else:
            self._consumer = None
            consumer(None, error)

    def settle(self, value: Any) -> None:
        """Resolve, or fail when ``value`` is an exception (the groups' Responder convention)."""
        if isinstance(value, _BaseException):
            self.fail(value)
        else:
            self.resolve(value)

    def outcome(self) -> tuple[Any, BaseException | None]:
        """(value, error) of a Reply that is ``done`` and has no consumer: a handler whose work ran
        on its own stack (a coordinator read) settled it before returning it."""
        if not self._done:
            raise RuntimeError("the Reply is not settled")
        value, error = self._value, self._error
        self._value = self._error = None
        return value, error

    def then(self, consumer: Consumer) -> None:
        """Hand the outcome to ``consumer(value, error)``: now if known, else when it is."""
        if self._done:
            value, error = self.outcome()
            consumer(value, error)
        else:
            self._consumer = consumer


def reply_with(build: Callable[[Any], Any]) -> tuple[Reply, Callable[[Any], None]]:
    """A Reply and the responder that completes it with ``build(value)`` (an exception fails it).

    The responder is the Reply itself, called: one object per request where a closure over it
    was three (the closure, its scope and the Reply), each allocated and freed per request."""
    reply = Reply(build)
    return reply, reply


def reply_all(count: int, build: Callable[[list[Any]], Any]) -> tuple[Reply, list[Callable[[Any], None]]]:
    """A Reply and ``count`` responders: once each has its value, the Reply gets ``build(values)``
    (in responder order); the first exception fails it."""
    reply, respond = reply_with(build)
    values: list[Any] = [None] * count
    missing = count

    def responder(i: int) -> Callable[[Any], None]:
        def answer(value: Any) -> None:
            nonlocal missing
            if isinstance(value, _BaseException):
                respond(value)
                return
            values[i] = value
            missing -= 1
            if missing == 0:
                respond(values)

        return answer

    responders = [responder(i) for i in range(count)]
    if count == 0:
        respond(values)
    return reply, responders
