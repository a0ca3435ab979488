"""Fetch (key 1), v4-v18, for consumers.

Behaviour / version notes:
- whole batches from the fetch offset up to the high watermark (read_uncommitted) or the last
  stable offset (read_committed); at least one batch for the first partition with data even
  above MaxBytes (KIP-74), then PartitionMaxBytes / MaxBytes limits;
- read_committed answers AbortedTransactions (an empty list rather than null when there are
  none): the aborted transactions overlapping the returned batches, those whose marker is at or
  after the fetch offset and whose first offset is below the end of the returned data (Kafka
  bounds it by the next offset-index entry, so may list a few more); the client drops their
  records. read_uncommitted answers null;
- long poll: with fewer than MinBytes available the answer waits up to MaxWaitMs and is woken
  as soon as the high watermark (or the last stable offset) of a requested partition moves, or
  the broker shuts down;
- incremental fetch sessions (v7+), see fetch_sessions; v13+ names topics by id
  (UNKNOWN_TOPIC_ID for ids not known, FETCH_SESSION_TOPIC_ID_ERROR for sessions mixing both);
- a topic with compression.type=zstd answers Fetch below v10 UNSUPPORTED_COMPRESSION_TYPE, as
  Kafka (older clients cannot read zstd);
- CurrentLeaderEpoch (v9+) above 0 is UNKNOWN_LEADER_EPOCH; a fetch offset outside the log is
  OFFSET_OUT_OF_RANGE; a partition whose segment cannot be read (EIO) is KAFKA_STORAGE_ERROR, one
  whose segment holds a corrupt batch CORRUPT_MESSAGE;
  this broker is never a follower and has no preferred read replica;
- the follower-only fields (ReplicaState, ReplicaDirectoryId, follower HighWatermark, v15+/v17+/
  v18) have no effect: kcoord has no replicas, so requests carrying them are served as
  consumer fetches.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kcoord.apis.authorization import Op, authorized_topics
from kcoord.apis.context import RequestContext
from kcoord.apis.long_poll import LongPoll
from kcoord.apis.reply import Reply
from kcoord.apis.services import Services
from kcoord.dataplane.fetch_sessions import FINAL_EPOCH, INITIAL_EPOCH, FetchSession, PartitionKey
from kcoord.dataplane.topic_config import effective
from kcoord.protocol import records as batches
from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.fetch_codec import FetchAnswer, FetchTopic
from kcoord.protocol.messages import ApiKey, response_class
from kcoord.storage.log import OffsetOutOfRange
from kcoord.storage.read_errors import READ_ERRORS, unreadable

_Resp = response_class(ApiKey.Fetch)
_TopicResp = _Resp.FetchableTopicResponse
_PartData = _TopicResp.PartitionData

READ_COMMITTED = 1
_INT32_MAX = 0x7FFFFFFF


class _Read:
    __slots__ = ("aborted", "error", "hw", "log_start", "lso", "records")

    def __init__(
        self,
        error: int,
        hw: int = -1,
        lso: int = -1,
        log_start: int = -1,
        records: Any = b"",
        aborted: list[tuple[int, int]] | None = None,
    ) -> None:
        self.error = error
        self.hw = hw
        self.lso = lso
        self.log_start = log_start
        self.records = records
        self.aborted = aborted


def handle(services: Services, ctx: RequestContext, req: Any) -> Any:
    v = ctx.api_version
    uses_ids = v >= 13
    cache = services.fetch_sessions
    requested: list[tuple[PartitionKey, int, int, int]] = []
    for t in req.topics:
        topic_key = t.topic_id if uses_ids else t.topic
        for p in t.partitions:
            requested.append(
                (
                    (topic_key, p.partition),
                    p.fetch_offset,
                    p.partition_max_bytes,
                    p.current_leader_epoch if v >= 9 else -1,
                )
            )
    forgotten = []
    if v >= 7:
        for f in req.forgotten_topics_data:
            topic_key = f.topic_id if uses_ids else f.topic
            forgotten.extend((topic_key, p) for p in f.partitions)

    session: FetchSession | None = None
    create_session = False
    sid, epoch = (req.session_id, req.session_epoch) if v >= 7 else (0, FINAL_EPOCH)
    if epoch in (INITIAL_EPOCH, FINAL_EPOCH):
        if sid:
            cache.remove(sid)
        create_session = epoch == INITIAL_EPOCH
        plan = [(key, off, mb, le) for key, off, mb, le in requested]
    else:
        session = cache.get(sid)
        if session is None:
            return _session_error(ErrorCode.FETCH_SESSION_ID_NOT_FOUND)
        if session.epoch != epoch:
            return _session_error(ErrorCode.INVALID_FETCH_SESSION_EPOCH)
        if session.uses_topic_ids != uses_ids:
            return _session_error(ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR)
        session.update(requested, forgotten)
        if not session.partitions:
            cache.remove(session.id)
            session = None
            plan = []
        else:
            cache.touch(session)
            session.epoch = 1 if session.epoch == _INT32_MAX else session.epoch + 1
            plan = [
                (key, c.fetch_offset, c.max_bytes, c.current_leader_epoch)
                for key, c in session.partitions.items()
            ]

    isolation = req.isolation_level
    max_bytes = req.max_bytes if v >= 3 else _INT32_MAX
    denied = _unreadable(services, ctx, plan, uses_ids)
    reads, total, any_error = _read_all(services, plan, uses_ids, isolation, max_bytes, v, denied)

    def finish(rs):
        return _respond(services, plan, rs, session, create_session, uses_ids, isolation)

    if req.max_wait_ms <= 0 or total >= req.min_bytes or any_error or not plan:
        return finish(reads)
    waiting = _WaitingFetch(services, req, plan, uses_ids, isolation, max_bytes, v, finish, denied)
    waiting.wait()
    return waiting.reply


def _unreadable(services: Services, ctx: RequestContext, plan: list, uses_ids: bool) -> frozenset[Any]:
    """The partitions of the plan in topics the principal may not read (Kafka's Fetch answers
    them TOPIC_AUTHORIZATION_FAILED; an unknown topic id stays UNKNOWN_TOPIC_ID)."""
    if services.authorizer is None:
        return frozenset()
    pm = services.partitions
    names: dict[Any, str | None] = {}
    for key, *_ in plan:
        topic_key = key[0]
        if topic_key not in names:
            topic = pm.get_by_id(topic_key) if uses_ids else None
            names[topic_key] = topic.name if topic is not None else None if uses_ids else topic_key
    readable = authorized_topics(services, ctx, Op.READ, {n for n in names.values() if n is not None})
    return frozenset(key for key, *_ in plan if (name := names[key[0]]) is not None and name not in readable)


class _WaitingFetch:
    """A Fetch below MinBytes: it reads again whenever a requested partition's high watermark
    moves, until there is enough, MaxWaitMs is up or the broker stops.

    An object, not two closures that call each other: those would hold each other's cells, a
    cycle that left each waiting fetch (its Reply, its poll, its plan) to the cyclic GC instead
    of freeing it once answered."""

    def __init__(
        self,
        services: Services,
        req: Any,
        plan: list,
        uses_ids: bool,
        isolation: int,
        max_bytes: int,
        version: int,
        finish: Callable[[list[_Read]], Any],
        denied: frozenset[Any],
    ) -> None:
        self.services = services
        self.min_bytes: int = req.min_bytes
        self.plan = plan
        self.uses_ids = uses_ids
        self.isolation = isolation
        self.max_bytes = max_bytes
        self.version = version
        self.finish = finish
        self.denied = denied
        self.reply = Reply()
        self.poll = LongPoll(req.max_wait_ms, services.shutdown)

    def wait(self) -> None:
        services, uses_ids = self.services, self.uses_ids
        parts = [p for p in (_resolve(services, key, uses_ids)[1] for key, *_ in self.plan) if p is not None]
        self.poll.wait(parts, self.look)

    def look(self) -> None:
        try:
            reads, total, any_error = _read_all(
                self.services,
                self.plan,
                self.uses_ids,
                self.isolation,
                self.max_bytes,
                self.version,
                self.denied,
            )
            if total >= self.min_bytes or any_error or self.poll.over:
                self.reply.resolve(self.finish(reads))
                return
            self.wait()
        except Exception as e:  # the dispatcher answers UNKNOWN_SERVER_ERROR, as for a handler's
            self.reply.fail(e)


def _resolve(services: Services, key: PartitionKey, uses_ids: bool) -> tuple[int, Any]:
    topic_key, index = key
    pm = services.partitions
    topic = pm.get_by_id(topic_key) if uses_ids else pm.get(topic_key)
    if topic is None:
        return (ErrorCode.UNKNOWN_TOPIC_ID if uses_ids else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION), None
    if not 0 <= index < len(topic.partitions):
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None
    return 0, topic.partitions[index]


def _read_all(
    services: Services,
    plan: list,
    uses_ids: bool,
    isolation: int,
    max_bytes: int,
    version: int,
    denied: frozenset[Any] = frozenset(),
) -> tuple[list[_Read], int, bool]:
    reads = []
    remaining = max_bytes
    min_one = True
    total = 0
    any_error = False
    for key, offset, part_max, leader_epoch in plan:
        if key in denied:
            reads.append(_Read(ErrorCode.TOPIC_AUTHORIZATION_FAILED))
            any_error = True
            continue
        error, part = _resolve(services, key, uses_ids)
        if part is None:
            reads.append(_Read(error))
            any_error = True
            continue
        if leader_epoch > part.leader_epoch:
            reads.append(_Read(ErrorCode.UNKNOWN_LEADER_EPOCH))
            any_error = True
            continue
        if 0 <= leader_epoch < part.leader_epoch:
            reads.append(_Read(ErrorCode.FENCED_LEADER_EPOCH))
            any_error = True
            continue
        if version < 10 and effective("compression.type", part.topic.configs, services.config) == "zstd":
            # Fetch v10 (KIP-110) is the first a client with zstd support sends; Kafka judges by
            # the topic's codec, not the batches read.
            reads.append(_Read(ErrorCode.UNSUPPORTED_COMPRESSION_TYPE))
            any_error = True
            continue
        hw = part.high_watermark
        lso = part.last_stable_offset
        limit = lso if isolation == READ_COMMITTED else hw
        try:
            data = part.log.read(offset, max(0, min(part_max, remaining)), limit, min_one, copy=False)
        except OffsetOutOfRange:
            reads.append(_Read(ErrorCode.OFFSET_OUT_OF_RANGE))
            any_error = True
            continue
        except READ_ERRORS as e:
            # A segment the disk cannot read, or a corrupt batch: that partition's error only
            # (raised, it was UNKNOWN_SERVER_ERROR for the whole request, which nothing retries).
            reads.append(_Read(unreadable("fetch", part.topic.name, part.index, e)))
            any_error = True
            continue
        aborted = None
        if isolation == READ_COMMITTED:
            aborted = _aborted(part, offset, data) if data else []
        if data:
            min_one = False
            remaining -= len(data)
            total += len(data)
        reads.append(_Read(0, hw, lso, part.log_start_offset, data, aborted))
    return reads, total, any_error


def _aborted(part: Any, offset: int, data: Any) -> list[tuple[int, int]]:
    """(producer id, first offset) of the aborted transactions overlapping the fetched batches."""
    last = None
    for h in batches.iter_headers(data, partial_ok=True):
        last = h
    if last is None:
        return []
    return [(t.producer_id, t.first_offset) for t in part.aborted_transactions(offset, last.next_offset)]


def _respond(
    services: Services,
    plan: list,
    reads: list[_Read],
    session: FetchSession | None,
    create: bool,
    uses_ids: bool,
    isolation: int,
) -> Any:
    session_id = 0
    keep = [True] * len(plan)
    if session is not None:
        session_id = session.id
        answered = []
        for i, ((key, *_), r) in enumerate(zip(plan, reads, strict=True)):
            if session.must_respond(session.partitions[key], r.error, r.hw, r.log_start, bool(r.records)):
                answered.append(key)
            else:
                keep[i] = False
        session.rotate(answered)
    elif create:
        new = services.fetch_sessions.maybe_create(uses_ids)
        if new is not None:
            session_id = new.id
            new.update([(key, off, mb, le) for key, off, mb, le in plan], [])
            for (key, *_), r in zip(plan, reads, strict=True):
                new.must_respond(new.partitions[key], r.error, r.hw, r.log_start, bool(r.records))

    topics: list[FetchTopic] = []
    last_topic = object()
    for i, ((topic_key, index), *_rest) in enumerate(plan):
        if not keep[i]:
            continue
        r = reads[i]
        if topic_key != last_topic:
            topics.append((None, topic_key, []) if uses_ids else (topic_key, None, []))
            last_topic = topic_key
        topics[-1][2].append(
            (index, r.error, r.hw, r.lso, r.log_start, r.aborted if not r.error else None, -1, r.records)
        )
    return FetchAnswer(topics, 0, session_id)


def _session_error(code: int) -> Any:
    return _Resp(throttle_time_ms=0, error_code=code, session_id=0, responses=[])


def error_response(req: Any, version: int, code: int, message: str | None) -> Any:
    uses_ids = version >= 13
    return _Resp(
        throttle_time_ms=0,
        error_code=code if version >= 7 else 0,
        session_id=0,
        responses=[
            _TopicResp(
                topic=None if uses_ids else t.topic,
                topic_id=t.topic_id if uses_ids else None,
                partitions=[
                    _PartData(
                        partition_index=p.partition,
                        error_code=code,
                        high_watermark=-1,
                        last_stable_offset=-1,
                        log_start_offset=-1,
                        aborted_transactions=None,
                        preferred_read_replica=-1,
                        records=b"",
                    )
                    for p in t.partitions
                ],
            )
            for t in req.topics
        ],
    )
