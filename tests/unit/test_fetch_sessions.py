"""Incremental fetch sessions (KIP-227): the cache and per-session rules, on a manual clock."""

from __future__ import annotations

from kcoord.clock import ManualClock
from kcoord.dataplane.fetch_sessions import EVICTION_MS, CachedPartition, FetchSession, FetchSessionCache

A0, A1, B0 = ("a", 0), ("a", 1), ("b", 0)


def test_sessions_get_distinct_ids_and_start_at_epoch_one() -> None:
    cache = FetchSessionCache(10, ManualClock())
    sessions = [cache.maybe_create(uses_topic_ids=True) for _ in range(10)]
    assert all(s is not None for s in sessions)
    ids = {s.id for s in sessions if s is not None}
    assert len(ids) == 10 and all(0 < i <= 0x7FFFFFFF for i in ids)
    assert all(s.epoch == 1 and s.uses_topic_ids for s in sessions if s is not None)
    assert cache.get(sessions[3].id) is sessions[3]  # type: ignore[union-attr]


def test_zero_slots_refuses_every_session() -> None:
    assert FetchSessionCache(0, ManualClock()).maybe_create(False) is None


def test_full_cache_evicts_only_a_session_idle_past_the_eviction_time() -> None:
    clock = ManualClock()
    cache = FetchSessionCache(2, clock)
    first = cache.maybe_create(False)
    clock.advance(1000)
    second = cache.maybe_create(False)
    assert first is not None and second is not None
    assert cache.maybe_create(False) is None  # full, nobody idle long enough
    clock.advance(EVICTION_MS - 1000)
    third = cache.maybe_create(False)  # first has been idle EVICTION_MS: evicted
    assert third is not None
    assert cache.get(first.id) is None and cache.get(second.id) is second


def test_touch_keeps_a_used_session_from_eviction() -> None:
    clock = ManualClock()
    cache = FetchSessionCache(2, clock)
    first, second = cache.maybe_create(False), cache.maybe_create(False)
    assert first is not None and second is not None
    clock.advance(EVICTION_MS)
    cache.touch(first)  # used just now: second is the least recently used
    third = cache.maybe_create(False)
    assert third is not None
    assert cache.get(first.id) is first and cache.get(second.id) is None


def test_evict_expired_and_remove() -> None:
    clock = ManualClock()
    cache = FetchSessionCache(5, clock)
    old = cache.maybe_create(False)
    clock.advance(EVICTION_MS - 1)
    young = cache.maybe_create(False)
    assert old is not None and young is not None
    clock.advance(1)
    cache.evict_expired()
    assert cache.get(old.id) is None and cache.get(young.id) is young
    cache.remove(young.id)
    cache.remove(12345)  # unknown: no error
    assert cache.sessions == {}


def test_update_adds_updates_and_forgets_partitions() -> None:
    s = FetchSession(1, False, 0)
    s.update([(A0, 10, 100, -1), (A1, 20, 100, -1)], [])
    assert list(s.partitions) == [A0, A1]
    s.update([(A1, 25, 50, 0), (B0, 0, 100, -1)], [A0])
    assert list(s.partitions) == [A1, B0]
    assert s.partitions[A1] == CachedPartition(25, 50, 0)
    s.update([], [A1, B0, ("zzz", 9)])
    assert not s.partitions


def test_must_respond_rules() -> None:
    c = CachedPartition(0, 100, -1)
    assert FetchSession.must_respond(c, 0, hw=5, log_start=0, has_records=False)  # hw changed
    assert c.high_watermark == 5 and c.log_start_offset == 0
    assert not FetchSession.must_respond(c, 0, hw=5, log_start=0, has_records=False)  # nothing new
    assert FetchSession.must_respond(c, 0, hw=5, log_start=0, has_records=True)  # records
    assert FetchSession.must_respond(c, 0, hw=5, log_start=3, has_records=False)  # log start moved
    # An error is always sent, and the partition is sent again once the error clears.
    assert FetchSession.must_respond(c, 1, hw=-1, log_start=-1, has_records=False)
    assert FetchSession.must_respond(c, 0, hw=5, log_start=3, has_records=False)
    assert not FetchSession.must_respond(c, 0, hw=5, log_start=3, has_records=False)


def test_rotate_moves_answered_partitions_to_the_end() -> None:
    s = FetchSession(1, False, 0)
    s.update([(A0, 0, 1, -1), (A1, 0, 1, -1), (B0, 0, 1, -1)], [])
    s.rotate([A0])
    assert list(s.partitions) == [A1, B0, A0]
    s.rotate([B0, A1])
    assert list(s.partitions) == [A0, B0, A1]
