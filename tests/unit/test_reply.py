"""Reply: the Task-free way a handler hands its response over later."""

from __future__ import annotations

from typing import Any

from kcoord.apis.reply import Reply, reply_all, reply_with


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


def test_reply_all_waits_for_every_responder_in_order() -> None:
    got: list[Any] = []
    reply, (first, second) = reply_all(2, lambda values: [v for part in values for v in part])
    reply.then(lambda value, error: got.append((value, error)))
    second(["b"])
    assert got == []
    first(["a"])
    assert got == [(["a", "b"], None)]
    failing, (one, _two) = reply_all(2, lambda values: values)
    boom = RuntimeError("boom")
    one(boom)
    failing.then(lambda value, error: got.append((value, error)))
    assert got[-1] == (None, boom)
    empty, none = reply_all(0, lambda values: len(values))
    empty.then(lambda value, error: got.append((value, error)))
    assert none == [] and got[-1] == (0, None)


def test_a_settled_reply_lets_its_build_go() -> None:
    """The responder is the Reply itself: once it has settled it holds no build, whose closure
    may hold what holds the Reply (a reference cycle per request otherwise)."""
    import weakref

    class Build:
        def __call__(self, value: int) -> int:
            return value + 1

    for settle in ("respond", "fail"):
        build = Build()
        gone = weakref.ref(build)
        reply, respond = reply_with(build)
        del build
        if settle == "respond":
            respond(1)
        else:
            reply.fail(RuntimeError("x"))
        assert gone() is None, settle
    plain = Reply()
    try:
        plain(1)
    except TypeError:
        pass
    else:
        raise AssertionError("a Reply made without build answered as a responder")
