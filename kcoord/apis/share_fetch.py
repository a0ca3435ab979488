"""Share group record delivery (KIP-932, Kafka 4.3 wire versions): ShareFetch (78, v1-v2) and
ShareAcknowledge (79, v1-v2). Membership and administration are in share_groups.py.

Behaviour / version notes:
- share sessions (share/sessions.py), acknowledgements first, then acquisition
  (share/coordinator.py); AcquisitionLockTimeoutMs is the group's share.record.lock.duration.ms;
  each partition answers with whole batches in Records and the acquired offset ranges in
  AcquiredRecords; with nothing to deliver a ShareFetch waits up to MaxWaitMs and is woken by new
  data or records released by others; acknowledgement results come back per partition
  (AcknowledgeErrorCode); a final request (epoch -1) releases every record the member still
  holds and answers only for the partitions it named;
- v2 ShareFetch: ShareAcquireMode 1 (record_limit) acquires at most MaxRecords; RENEW (type 4)
  only with IsRenewAck (v2), where the fetch limits must all be 0 and nothing is fetched, and
  only while share.renew.acknowledge.enable (INVALID_RECORD_STATE otherwise).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable
from typing import Any, Final

from kcoord.apis.authorization import GROUP, Op, authorized_topics, require
from kcoord.apis.context import RequestContext
from kcoord.apis.long_poll import LongPoll, WakeSource
from kcoord.apis.reply import Reply, reply_with
from kcoord.apis.services import Services
from kcoord.groups.store import GroupStore
from kcoord.protocol.errors import ErrorCode, KafkaError
from kcoord.protocol.messages import register_schema_pair
from kcoord.runtime.outcome import Outcome
from kcoord.share.coordinator import AckBatches, PartitionKey, PartitionResult
from kcoord.share.partition import AckType
from kcoord.share.sessions import FINAL_EPOCH, INITIAL_EPOCH
from kcoord.share.store import ShareGroups

ACQUIRE_RECORD_LIMIT = 1

_, _FResp = register_schema_pair("ShareFetch")
_, _AResp = register_schema_pair("ShareAcknowledge")


# --- ShareFetch and ShareAcknowledge -----------------------------------------------------------
def _ack_batches(partition: Any) -> AckBatches:
    return [
        (b.first_offset, b.last_offset, list(b.acknowledge_types)) for b in partition.acknowledgement_batches
    ]


def _acks_of(req: Any) -> dict[PartitionKey, AckBatches]:
    acks = {}
    for t in req.topics:
        for p in t.partitions:
            if p.acknowledgement_batches:
                acks[(t.topic_id, p.partition_index)] = _ack_batches(p)
    return acks


def _check_renew(acks: dict[PartitionKey, AckBatches], renew_request: bool) -> None:
    has_renew = any(AckType.RENEW in types for bs in acks.values() for _f, _l, types in bs)
    if has_renew and not renew_request:
        raise KafkaError(ErrorCode.INVALID_REQUEST, "RENEW acknowledgements need IsRenewAck (ShareFetch v2)")


def _renew_allowed(services: Services, group_id: str) -> bool:
    return services.share.group_config_of(group_id, "share.renew.acknowledge.enable") == "true"


def _fetch_response(
    services: Services,
    version: int,
    group_id: str,
    results: dict[PartitionKey, PartitionResult],
    keys: list[PartitionKey],
) -> Any:
    node = services.cluster.node_id
    topics: dict[uuid.UUID, list[Any]] = {}
    for pkey in keys:
        r = results.get(pkey, PartitionResult())
        topics.setdefault(pkey[0], []).append(
            _FResp.ShareFetchableTopicResponse.PartitionData(
                partition_index=pkey[1],
                error_code=r.error,
                error_message=r.error_message,
                acknowledge_error_code=r.ack_error or 0,
                acknowledge_error_message=None,
                current_leader=_FResp.ShareFetchableTopicResponse.PartitionData.LeaderIdAndEpoch(
                    leader_id=node, leader_epoch=0
                ),
                records=r.records,
                acquired_records=[
                    _FResp.ShareFetchableTopicResponse.PartitionData.AcquiredRecords(
                        first_offset=a.first_offset,
                        last_offset=a.last_offset,
                        delivery_count=a.delivery_count,
                    )
                    for a in r.acquired
                ],
            )
        )
    return _FResp(
        throttle_time_ms=0,
        error_code=0,
        error_message=None,
        acquisition_lock_timeout_ms=services.share.lock_duration_ms(group_id),
        responses=[_FResp.ShareFetchableTopicResponse(topic_id=t, partitions=ps) for t, ps in topics.items()],
        node_endpoints=[],
    )


def _top_error(resp_cls: Any, code: int, message: str | None) -> Any:
    return resp_cls(
        throttle_time_ms=0,
        error_code=code,
        error_message=message,
        acquisition_lock_timeout_ms=0,
        responses=[],
        node_endpoints=[],
    )


def handle_share_fetch(services: Services, ctx: RequestContext, req: Any) -> Any:
    v = ctx.api_version
    gid, mid, epoch = req.group_id, req.member_id, req.share_session_epoch
    require(services, ctx, Op.READ, GROUP, gid or "")
    if not gid or not mid:
        return _top_error(_FResp, ErrorCode.INVALID_REQUEST, "GroupId and MemberId are required")
    acks = _acks_of(req)
    renew = v >= 2 and req.is_renew_ack
    _check_renew(acks, renew)
    if renew and (req.max_bytes or req.min_bytes or req.max_records or req.max_wait_ms):
        raise KafkaError(ErrorCode.INVALID_REQUEST, "a renew-only ShareFetch must set every fetch limit to 0")
    requested = [(t.topic_id, p.partition_index) for t in req.topics for p in t.partitions]
    forgotten = [(t.topic_id, p) for t in req.forgotten_topics_data for p in t.partitions]
    share = services.share
    session = share.sessions.for_fetch((gid, mid), epoch, ctx.conn, requested, forgotten, bool(acks))
    final = epoch == FINAL_EPOCH
    keys = [] if final or renew else list(session.partitions)
    # Partitions of topics the principal may not read: TOPIC_AUTHORIZATION_FAILED, nothing
    # acquired or acknowledged there (Kafka's ShareFetch).
    denied = _unreadable(services, ctx, list(dict.fromkeys(list(acks) + keys)))
    if denied:
        keys = [k for k in keys if k not in denied]
        acks = {k: a for k, a in acks.items() if k not in denied}
    if renew and not _renew_allowed(services, gid):
        results = {k: PartitionResult(ack_error=ErrorCode.INVALID_RECORD_STATE) for k in acks}
        return _fetch_response(services, v, gid, results, list(acks))
    strict = v >= 2 and req.share_acquire_mode == ACQUIRE_RECORD_LIMIT
    max_records = req.max_records if req.max_records > 0 else 500

    def work(with_acks: bool, then: Callable[[Any], None]) -> None:
        """Acknowledge (first pass) and acquire in the group's actor; ``then((results, n))``."""

        def op(store: GroupStore, now: int) -> Outcome:
            out = Outcome()
            results: dict[PartitionKey, PartitionResult] = {}
            group = store.kind(ShareGroups).get(gid)
            if group is None:
                for k in keys or acks:
                    results[k] = PartitionResult(
                        error=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                        error_message=f"share group {gid} does not exist",
                    )
                out.respond(then, (results, 0))
                return out
            if with_acks and acks:
                share.acknowledge(group, mid, acks, now, out, results)
                share.wake(gid)
            n = (
                share.acquire(group, mid, keys, max_records, req.max_bytes, now, out, results, strict)
                if keys
                else 0
            )
            if final:
                for sp in group.partitions.values():
                    out.records.extend(sp.release_member(mid, now))
                share.wake(gid)
            out.respond(then, (results, n))
            return out

        services.groups.tell(gid, op)

    if final:
        share.sessions.close((gid, mid))

    reply = Reply()
    poll = LongPoll(req.max_wait_ms, services.shutdown)
    results: dict[PartitionKey, PartitionResult] = {
        k: PartitionResult(error=ErrorCode.TOPIC_AUTHORIZATION_FAILED) for k in denied
    }

    def answer() -> None:
        if epoch == INITIAL_EPOCH:
            shown = keys + [k for k in denied if k not in keys]
        else:
            shown = [
                k for k in dict.fromkeys([*acks, *keys, *denied]) if k in results and results[k].has_news()
            ]
        reply.resolve(_fetch_response(services, v, gid, results, shown))

    acquired = _Acquired(services, gid, keys, req.min_bytes, work, answer, reply, results, poll)
    work(True, acquired)
    return reply


class _Acquired:
    """What a ShareFetch does with each pass's acquisitions: answer, or wait for records and
    acquire again. An object, not a closure: a closure that hands itself to the next pass names
    itself, and holds its own cell, a cycle that left every ShareFetch (its Reply, its poll, its
    records) to the cyclic GC instead of freeing it once answered."""

    __slots__ = ("answer", "gid", "keys", "min_bytes", "poll", "reply", "results", "services", "work")

    def __init__(
        self,
        services: Services,
        gid: str,
        keys: list[PartitionKey],
        min_bytes: int,
        work: Callable[[bool, Callable[[Any], None]], None],
        answer: Callable[[], None],
        reply: Reply,
        results: dict[PartitionKey, PartitionResult],
        poll: LongPoll,
    ) -> None:
        self.services = services
        self.gid = gid
        self.keys = keys
        self.min_bytes = min_bytes
        self.work = work
        self.answer = answer
        self.reply = reply
        self.results = results
        self.poll = poll

    def __call__(self, outcome: Any) -> None:
        if isinstance(outcome, BaseException):
            self.reply.fail(outcome)
            return
        got, n = outcome
        results = self.results
        for k, r in got.items():
            if k in results:  # a later pass: keep the acknowledgement results of the first
                mine = results[k]
                mine.error, mine.error_message = r.error, r.error_message
                mine.records, mine.acquired = r.records, r.acquired
            else:
                results[k] = r
        keys = self.keys
        if n or not keys or self.min_bytes <= 0 or self.poll.over or _read_failed(got.values()):
            self.answer()
            return
        # Nothing to deliver yet: wait for records released by others or new data, then look again.
        services = self.services
        sources: list[WakeSource] = [services.share.records_of(self.gid)]
        sources += [p for p in (services.partitions.partition_by_id(t, i) for t, i in keys) if p is not None]
        self.poll.wait(sources, self._again)

    def _again(self) -> None:
        self.work(False, self)


def share_fetch_error_response(req: Any, version: int, code: int, message: str | None) -> Any:
    return _top_error(_FResp, code, message)


def handle_share_acknowledge(services: Services, ctx: RequestContext, req: Any) -> Any:
    v = ctx.api_version
    gid, mid, epoch = req.group_id, req.member_id, req.share_session_epoch
    require(services, ctx, Op.READ, GROUP, gid or "")
    if not gid or not mid:
        return _ack_error(ErrorCode.INVALID_REQUEST, "GroupId and MemberId are required")
    acks = _acks_of(req)
    denied = _unreadable(services, ctx, list(acks))
    acks = {k: a for k, a in acks.items() if k not in denied}
    renew = v >= 2 and req.is_renew_ack
    _check_renew(acks, renew)
    share = services.share
    share.sessions.for_acknowledge((gid, mid), epoch, ctx.conn)
    final = epoch == FINAL_EPOCH
    if final:
        share.sessions.close((gid, mid))
    if renew and not _renew_allowed(services, gid):
        return _ack_response(
            services, v, gid, {k: PartitionResult(ack_error=ErrorCode.INVALID_RECORD_STATE) for k in acks}
        )
    reply, respond = reply_with(lambda results: _ack_response(services, v, gid, results))

    def op(store: GroupStore, now: int) -> Outcome:
        out = Outcome()
        results: dict[PartitionKey, PartitionResult] = {}
        group = store.kind(ShareGroups).get(gid)
        if group is None:
            results = {k: PartitionResult(ack_error=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION) for k in acks}
        else:
            share.acknowledge(group, mid, acks, now, out, results)
            if final:
                for sp in group.partitions.values():
                    out.records.extend(sp.release_member(mid, now))
            share.wake(gid)
        for k in denied:
            results[k] = PartitionResult(ack_error=ErrorCode.TOPIC_AUTHORIZATION_FAILED)
        out.respond(respond, results)
        return out

    services.groups.tell(gid, op)
    return reply


def _unreadable(services: Services, ctx: RequestContext, keys: list[PartitionKey]) -> set[PartitionKey]:
    """The partitions among ``keys`` whose topic (by id) the principal may not read."""
    if services.authorizer is None or not keys:
        return set()
    names = {}
    for topic_id, _p in keys:
        topic = services.partitions.get_by_id(topic_id)
        if topic is not None:
            names[topic_id] = topic.name
    readable = authorized_topics(services, ctx, Op.READ, set(names.values()))
    return {k for k in keys if k[0] in names and names[k[0]] not in readable}


def _ack_response(
    services: Services, version: int, group_id: str, results: dict[PartitionKey, PartitionResult]
) -> Any:
    topics: dict[uuid.UUID, list[Any]] = {}
    node = services.cluster.node_id
    for (t, p), r in results.items():
        topics.setdefault(t, []).append(
            _AResp.ShareAcknowledgeTopicResponse.PartitionData(
                partition_index=p,
                error_code=r.ack_error or 0,
                error_message=None,
                current_leader=_AResp.ShareAcknowledgeTopicResponse.PartitionData.LeaderIdAndEpoch(
                    leader_id=node, leader_epoch=0
                ),
            )
        )
    return _AResp(
        throttle_time_ms=0,
        error_code=0,
        error_message=None,
        acquisition_lock_timeout_ms=services.share.lock_duration_ms(group_id),
        responses=[
            _AResp.ShareAcknowledgeTopicResponse(topic_id=t, partitions=ps) for t, ps in topics.items()
        ],
        node_endpoints=[],
    )


def _ack_error(code: int, message: str | None) -> Any:
    return _top_error(_AResp, code, message)


def share_acknowledge_error_response(req: Any, version: int, code: int, message: str | None) -> Any:
    return _ack_error(code, message)


def _read_failed(results: Iterable[PartitionResult]) -> bool:
    """A partition's log could not be read: answered at once, as Kafka completes a share fetch
    whose read failed (waiting would only hold the error back; the client backs off itself)."""
    return any(r.error in _READ_ERRORS for r in results)


_READ_ERRORS: Final = frozenset((ErrorCode.KAFKA_STORAGE_ERROR, ErrorCode.CORRUPT_MESSAGE))
