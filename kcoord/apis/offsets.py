"""OffsetCommit (8, v2-v10), OffsetFetch (9, v1-v10), OffsetDelete (47, v0), TxnOffsetCommit (28,
v0-v4; see ``handle_txn_commit``).

Behaviour / version notes:
- OffsetCommit: generation -1 with no member commits to a group without live members (and
  creates such a group); group members are checked as Kafka does (UNKNOWN_MEMBER_ID,
  FENCED_INSTANCE_ID, ILLEGAL_GENERATION, REBALANCE_IN_PROGRESS while completing a rebalance);
  a commit with a generation to an unknown group is ILLEGAL_GENERATION, from v9
  GROUP_ID_NOT_FOUND; unknown topics/partitions are UNKNOWN_TOPIC_OR_PARTITION (v10 by topic id:
  UNKNOWN_TOPIC_ID); metadata longer than offset.metadata.max.bytes is
  OFFSET_METADATA_TOO_LARGE (counted as Kafka does: UTF-16 units of a Java string, not bytes);
  RetentionTimeMs (v2-v4) other than -1 gives the offsets their own expiry (value v1, KIP-211);
  a consumer group member (KIP-848) commits with its member epoch (STALE_MEMBER_EPOCH), or an
  older one for partitions it has held since (KIP-1251, kcoord/consumer/group.py);
  the response is sent once the commit is durable;
- OffsetFetch: v2+ Topics = null returns every committed offset of the group, with a top-level
  error code (KIP-88), while before v2 a null does not parse in Kafka and closes the
  connection; unknown groups and partitions give offset -1, empty metadata and no
  error; v8+ batches groups; v10 names topics by id. The answer waits until everything the
  group wrote before it is durable, so no reader ever sees an offset a crash could take back;
  offsets committed in a transaction that has not ended are not shown, and with RequireStable
  (v7+) such a partition answers UNSTABLE_OFFSET_COMMIT (KIP-447), as Kafka;
- group id "" (KIP-289): OffsetCommit and OffsetFetch accept it for standalone consumers, with a
  deprecation warning in the broker log once per client; OffsetDelete answers INVALID_GROUP_ID;
- OffsetDelete: GROUP_ID_NOT_FOUND for unknown groups, NON_EMPTY_GROUP for active groups that are
  not consumer groups, GROUP_SUBSCRIBED_TO_TOPIC per partition for topics members consume.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any, Final

import structlog

from kcoord.apis.authorization import (
    GROUP,
    TRANSACTIONAL_ID,
    Op,
    authorized_topics,
    group_authorized,
    require,
    topic_authorized,
)
from kcoord.apis.context import RequestContext
from kcoord.apis.reply import reply_all, reply_with
from kcoord.apis.services import Services
from kcoord.classic import offsets as offset_rules
from kcoord.classic.store import GROUP_TYPE as CLASSIC_GROUP_TYPE
from kcoord.classic.store import ClassicGroups
from kcoord.consumer.store import GROUP_TYPE as CONSUMER_GROUP_TYPE
from kcoord.consumer.store import ConsumerGroups
from kcoord.groups import OFFSETS_TOPIC
from kcoord.groups.offsets import commit_records
from kcoord.groups.store import GroupStore
from kcoord.metrics import OFFSET_DELETION, Meter
from kcoord.protocol.errors import CloseConnection, ErrorCode
from kcoord.protocol.messages import ApiKey, response_class
from kcoord.protocol.offsets_codec import (
    CommitTopic,
    FetchPartition,
    FetchRequestTopic,
    FetchTopic,
    OffsetCommitAnswer,
    OffsetCommitRequest,
    OffsetFetchAnswer,
    OffsetFetchRequest,
)
from kcoord.runtime.outcome import Outcome
from kcoord.transaction.coordinator import verification_error

# Read once: compiled, ``Op.READ`` is a lookup on the enum class at every use (two per commit).
_READ: Final = Op.READ
_DESCRIBE: Final = Op.DESCRIBE

log = structlog.get_logger(__name__)
ZERO_UUID = uuid.UUID(int=0)

_warned_clients: set[str] = set()


def _warn_empty_group(ctx: RequestContext, api: str) -> None:
    client = ctx.client_id or ""
    if client not in _warned_clients:
        _warned_clients.add(client)
        log.warning("empty group id is deprecated (KIP-289)", api=api, client_id=client, peer=ctx.client_host)


def _java_length(s: str) -> int:
    """String.length() in Java (UTF-16 code units): what Kafka compares with
    offset.metadata.max.bytes, despite the name."""
    if s.isascii():
        return len(s)
    return len(s.encode("utf-16-le")) // 2


# --- OffsetCommit ------------------------------------------------------------------------------
_CResp: Any = response_class(ApiKey.OffsetCommit)  # kafka-python's generated class
_CTopic = _CResp.OffsetCommitResponseTopic
_CPart = _CTopic.OffsetCommitResponsePartition


def handle_commit(services: Services, ctx: RequestContext, req: OffsetCommitRequest) -> Any:
    v = ctx.api_version
    if req.group_id is None:
        return commit_error_response(req, v, ErrorCode.INVALID_GROUP_ID, None)
    require(services, ctx, _READ, GROUP, req.group_id)
    if not _may_hold_offsets(services, req.group_id):
        return commit_error_response(req, v, ErrorCode.GROUP_ID_NOT_FOUND, None)
    if req.group_id == "":
        _warn_empty_group(ctx, "OffsetCommit")
    pm = services.partitions
    max_meta = services.config.offset_metadata_max_bytes
    # The answer's topics; partitions refused before the group sees them have their error now.
    answer: list[CommitTopic] = []
    commits: list[tuple[str, int, int, int, str]] = []
    committed_ids: list[tuple[uuid.UUID, int]] = []  # (topic id, partition) of each commit
    slots: list[list[int]] = []  # [partition, error] of each commit, for the group's error
    for t in req.topics:
        # By id from v10 (the zero uuid decodes as None: no topic), else by name (never null).
        tid, tname = t.topic_id, t.name
        topic = (pm.get_by_id(tid) if tid is not None else None) if v >= 10 else pm.get(tname or "")
        parts = []
        name = topic.name if topic is not None else t.name if v < 10 else None
        # The same for every partition of the topic, so asked once.
        refused: int
        if name is not None and not topic_authorized(services, ctx, _READ, name):
            refused = ErrorCode.TOPIC_AUTHORIZATION_FAILED
        elif topic is None:
            refused = ErrorCode.UNKNOWN_TOPIC_ID if v >= 10 else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        else:
            refused = 0
        n_partitions = len(topic.partitions) if topic is not None else 0
        for p in t.partitions:
            index = p.partition_index
            metadata = p.committed_metadata
            if refused:
                parts.append([index, refused])
            elif not 0 <= index < n_partitions:
                parts.append([index, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION])
            # A Java length is at most two units per character: most metadata needs no count.
            elif metadata is not None and 2 * len(metadata) > max_meta and _java_length(metadata) > max_meta:
                parts.append([index, ErrorCode.OFFSET_METADATA_TOO_LARGE])
            else:
                entry = [index, 0]
                parts.append(entry)
                commits.append(
                    (
                        name,  # type: ignore[arg-type]  # a known topic's name
                        index,
                        p.committed_offset,
                        p.committed_leader_epoch if v >= 6 else -1,
                        metadata or "",
                    )
                )
                committed_ids.append((topic.topic_id, index))  # type: ignore[union-attr]
                slots.append(entry)
        answer.append((tname, tid if v >= 10 else None, parts))

    build = _CommitAnswer(answer, slots)
    if not commits:
        return build()
    reply, respond = reply_with(build)
    gid = req.group_id
    services.groups.run_or_tell(
        gid,
        _CommitOp(
            gid,
            req.member_id,
            req.generation_id_or_member_epoch,
            req.group_instance_id if v >= 7 else None,
            v,
            commits,
            committed_ids,
            req.retention_time_ms if v <= 4 else -1,
            services.metrics.offset_commits,
            respond,
        ),
    )
    return reply


class _CommitAnswer:
    """An OffsetCommit's answer, made once the group has checked the commit: ``group_error``
    (the member's, say) replaces the code of every partition the group was asked to commit.

    Objects, this and :class:`_CommitOp`, where they were closures: compiled, each closure was
    two objects (its scope and itself) per request. The operation holds the Reply that holds
    this, and neither names the other back: no reference cycle."""

    __slots__ = ("answer", "slots")

    def __init__(self, answer: list[CommitTopic], slots: list[list[int]]) -> None:
        self.answer = answer
        self.slots = slots

    def __call__(self, group_error: int = 0) -> OffsetCommitAnswer:
        if group_error:
            for entry in self.slots:
                entry[1] = group_error
        return OffsetCommitAnswer(self.answer)


class _CommitOp:
    """The group's part of an OffsetCommit: check the member, write the offsets."""

    __slots__ = (
        "commits",
        "committed_ids",
        "generation",
        "gid",
        "instance",
        "member_id",
        "meter",
        "respond",
        "retention",
        "v",
    )

    def __init__(
        self,
        gid: str,
        member_id: str,
        generation: int,
        instance: str | None,
        v: int,
        commits: list[tuple[str, int, int, int, str]],
        committed_ids: list[tuple[uuid.UUID, int]],
        retention: int,
        meter: Meter,
        respond: Callable[[Any], None],
    ) -> None:
        self.gid = gid
        self.member_id = member_id
        self.generation = generation
        self.instance = instance
        self.v = v
        self.commits = commits
        self.committed_ids = committed_ids
        self.retention = retention
        self.meter = meter
        self.respond = respond

    def __call__(self, store: GroupStore, now: int) -> Outcome:
        out = Outcome()
        gid = self.gid
        generation = self.generation
        consumer = store.kind(ConsumerGroups).get(gid)
        if consumer is not None:
            error = consumer.validate_offset_commit(self.member_id, generation, self.v, self.committed_ids)
        else:
            groups = store.kind(ClassicGroups)
            # Standalone commits (no generation) create the group, as Kafka's do.
            group = groups.get_or_create(gid, now) if generation < 0 else groups.get(gid)
            if group is None:
                error = ErrorCode.GROUP_ID_NOT_FOUND if self.v >= 9 else ErrorCode.ILLEGAL_GENERATION
            else:
                error = offset_rules.validate_commit(group, self.member_id, self.instance, generation)
        if not error:
            commits = self.commits
            out.records = commit_records(gid, commits, now, self.retention)
            self.meter.record(now, len(commits))
        out.respond(self.respond, error)
        return out


def commit_error_response(req: Any, version: int, code: int, message: str | None) -> Any:
    return _CResp(
        throttle_time_ms=0,
        topics=[
            _CTopic(
                name=t.name,
                topic_id=t.topic_id if version >= 10 else None,
                partitions=[_CPart(partition_index=p.partition_index, error_code=code) for p in t.partitions],
            )
            for t in req.topics
        ],
    )


# --- TxnOffsetCommit ---------------------------------------------------------------------------
_TResp: Any = response_class(ApiKey.TxnOffsetCommit)  # kafka-python's generated class
_TTopic = _TResp.TxnOffsetCommitResponseTopic
_TPart = _TTopic.TxnOffsetCommitResponsePartition


def _txn_response(results: list[tuple[str, list[list[int]]]]) -> Any:
    return _TResp(
        throttle_time_ms=0,
        topics=[
            _TTopic(name=name, partitions=[_TPart(partition_index=p, error_code=e) for p, e in parts])
            for name, parts in results
        ],
    )


def handle_txn_commit(services: Services, ctx: RequestContext, req: Any) -> Any:
    """TxnOffsetCommit (28, v0-v4): offsets committed in a transaction, pending until its marker.

    The group's ``__consumer_offsets`` partition must be in the transaction (AddOffsetsToTxn;
    KIP-890 verification: INVALID_TXN_STATE up to v3, TRANSACTION_ABORTABLE at v4, a stale
    producer INVALID_PRODUCER_EPOCH); v3+ names
    the member (KIP-447), checked as an OffsetCommit's but without the rebalance check, and a
    consumer-group member's stale epoch is ILLEGAL_GENERATION, as Kafka answers transactional
    commits; a group that does not exist is created when the commit names no generation.
    """
    v = ctx.api_version
    gid, tid = req.group_id, req.transactional_id
    require(services, ctx, Op.WRITE, TRANSACTIONAL_ID, tid)
    require(services, ctx, Op.READ, GROUP, gid)
    results: list[tuple[str, list[list[int]]]] = []
    slots: list[list[int]] = []
    commits: list[tuple[str, int, int, int, str]] = []
    committed_ids: list[tuple[uuid.UUID, int]] = []
    pm = services.partitions
    max_meta = services.config.offset_metadata_max_bytes
    for t in req.topics:
        topic = pm.get(t.name)
        parts = []
        for p in t.partitions:
            entry = [p.partition_index, 0]
            parts.append(entry)
            if not topic_authorized(services, ctx, Op.READ, t.name):
                entry[1] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            elif topic is None or not 0 <= p.partition_index < len(topic.partitions):
                entry[1] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            elif p.committed_metadata is not None and _java_length(p.committed_metadata) > max_meta:
                entry[1] = ErrorCode.OFFSET_METADATA_TOO_LARGE
            else:
                slots.append(entry)
                commits.append(
                    (
                        topic.name,
                        p.partition_index,
                        p.committed_offset,
                        p.committed_leader_epoch if v >= 2 else -1,
                        p.committed_metadata or "",
                    )
                )
                committed_ids.append((topic.topic_id, p.partition_index))
        results.append((t.name, parts))

    def build(error: int) -> Any:
        for entry in slots:
            entry[1] = error
        return _txn_response(results)

    if not gid:
        return build(ErrorCode.INVALID_GROUP_ID)
    if not tid:
        return build(ErrorCode.INVALID_REQUEST)
    if not commits:
        return build(0)
    if not _may_hold_offsets(services, gid):
        return build(ErrorCode.GROUP_ID_NOT_FOUND)
    pid, epoch = req.producer_id, req.producer_epoch
    offsets_partition = (OFFSETS_TOPIC, services.groups.partition_for(gid))
    verified = services.transactions.state_for(tid).verify_partitions(tid, pid, epoch, [offsets_partition])
    # v4 clients know TRANSACTION_ABORTABLE (Kafka's CoordinatorPartitionWriter: genericError).
    error = verification_error(verified[offsets_partition], generic_errors=v >= 4)
    if error:
        return build(error)
    generation = req.generation_id if v >= 3 else -1
    member_id = req.member_id if v >= 3 else ""
    instance = req.group_instance_id if v >= 3 else None
    reply, respond = reply_with(build)

    def op(store: GroupStore, now: int) -> Outcome:
        out = Outcome()
        consumer = store.kind(ConsumerGroups).get(gid)
        if consumer is not None:
            error = consumer.validate_offset_commit(
                member_id, generation, v, committed_ids, transactional=True
            )
            if error == ErrorCode.STALE_MEMBER_EPOCH:
                error = ErrorCode.ILLEGAL_GENERATION
        else:
            groups = store.kind(ClassicGroups)
            group = groups.get_or_create(gid, now) if generation < 0 else groups.get(gid)
            if group is None:
                error = ErrorCode.ILLEGAL_GENERATION
            else:
                error = offset_rules.validate_commit(
                    group, member_id, instance, generation, transactional=True
                )
        if not error:
            out.records = commit_records(gid, commits, now, -1)
            out.producer = (pid, epoch)
        out.respond(respond, error)
        return out

    services.groups.tell(gid, op)
    return reply


def txn_commit_error_response(req: Any, version: int, code: int, message: str | None) -> Any:
    return _txn_response(
        [(t.name, [[p.partition_index, code] for p in t.partitions]) for t in req.topics or []]
    )


# --- OffsetFetch -------------------------------------------------------------------------------
_FResp: Any = response_class(ApiKey.OffsetFetch)  # kafka-python's generated class
_FGroup = _FResp.OffsetFetchResponseGroup


class _Wanted:
    """The topics an OffsetFetch asks about: names to look up, and (v10) ids nobody knows."""

    def __init__(self, services: Services, topics: list[FetchRequestTopic] | None, v: int) -> None:
        self.topics: list[tuple[str, list[int]]] | None = None if topics is None else []
        self.ids: dict[str, uuid.UUID] = {}
        self.unknown_ids: list[tuple[uuid.UUID | None, list[int]]] = []  # None: the zero uuid
        for t in topics or []:
            parts = list(t.partition_indexes)
            if v >= 10:
                tid = t.topic_id
                topic = services.partitions.get_by_id(tid) if tid is not None else None
                if topic is None or tid is None:
                    self.unknown_ids.append((tid, parts))
                    continue
                self.ids[topic.name] = tid
                self.topics.append((topic.name, parts))  # type: ignore[union-attr]
            else:
                self.topics.append((t.name, parts))  # type: ignore[union-attr,arg-type]  # never null before v10


def _may_hold_offsets(services: Services, group_id: str) -> bool:
    """Classic and consumer groups have committed offsets; a share group's id is not one
    (GROUP_ID_NOT_FOUND, as Kafka answers for a group of another type)."""
    store: GroupStore = services.groups.state_for(group_id)  # typed: a native call to group_type
    held = store.group_type(group_id)
    return held is None or held in (CLASSIC_GROUP_TYPE, CONSUMER_GROUP_TYPE)


def _fetch_group(
    services: Services,
    ctx: RequestContext,
    group_id: str | None,
    wanted: _Wanted,
    respond: Callable[[Any], None],
    member: tuple[str | None, int] = (None, -1),
    require_stable: bool = False,
) -> None:
    """Call ``respond`` with (error, [(topic, [(partition, value|None)])]) for one group (or with
    the exception that failed it). ``member`` is OffsetFetch v9+'s member id and epoch, which a
    consumer group checks (KIP-848: STALE_MEMBER_EPOCH, UNKNOWN_MEMBER_ID). With
    ``require_stable`` a partition with a transactional commit pending is ``UNSTABLE``."""
    if group_id is None:
        respond((ErrorCode.INVALID_GROUP_ID, []))
        return
    if not group_authorized(services, ctx, _DESCRIBE, group_id):
        respond((ErrorCode.GROUP_AUTHORIZATION_FAILED, []))
        return
    if not _may_hold_offsets(services, group_id):
        respond((ErrorCode.GROUP_ID_NOT_FOUND, []))
        return
    if group_id == "":
        _warn_empty_group(ctx, "OffsetFetch")
    # Kafka's OffsetFetch: topics named in the request that the principal may not describe are
    # answered TOPIC_AUTHORIZATION_FAILED; with all topics asked for, they are left out. Without
    # an authorizer every topic may be described: nothing to filter (two sets and a copy of the
    # answer's list per request otherwise).
    everything = services.authorizer is None
    named = None if wanted.topics is None or everything else {t for t, _parts in wanted.topics}
    allowed = None if named is None else authorized_topics(services, ctx, _DESCRIBE, named)

    groups = services.groups
    if groups.idle(group_id):
        # Nothing of the group's is queued or unsynced: what the state holds is what the log
        # holds, and a fetch changes nothing, so it needs no operation (no actor, outcome, timer).
        respond(
            _fetched(
                services, ctx, groups.state_for(group_id), group_id, wanted, member, require_stable, allowed
            )
        )
        return

    def op(store: GroupStore, now: int) -> Outcome:
        out = Outcome()
        out.respond(
            respond, _fetched(services, ctx, store, group_id, wanted, member, require_stable, allowed)
        )
        return out

    groups.run_or_tell(group_id, op)


def _fetched(
    services: Services,
    ctx: RequestContext,
    store: GroupStore,
    group_id: str,
    wanted: _Wanted,
    member: tuple[str | None, int],
    require_stable: bool,
    allowed: set[str] | None,
) -> tuple[int, list[tuple[str, list[tuple[int, Any]]]]] | Exception:
    """(error, [(topic, [(partition, value|None)])]) of one group, read from its shard's state.

    A function of its own, not a closure beside ``_fetch_group``'s operation: a compiled
    closure that another closure calls is kept in their shared scope, a reference cycle that
    left every fetch's request to the cyclic GC instead of freeing it on return.

    What fails here is the request's answer (the exception, which the Reply turns into
    UNKNOWN_SERVER_ERROR), on either path: a read changed nothing, so it is no reason to stop
    the coordinator, as a failed operation is."""
    try:
        consumer = store.kind(ConsumerGroups).get(group_id)
        if consumer is not None:
            error = consumer.validate_offset_fetch(*member)
            if error:
                return error, []
        offsets = store.offsets
        data: list[tuple[str, list[tuple[int, Any]]]] = offsets.fetch(group_id, wanted.topics)
        if require_stable and offsets.pending.by_key:
            data = [
                (t, [(p, UNSTABLE if offsets.has_pending(group_id, t, p) else value) for p, value in parts])
                for t, parts in data
            ]
        if services.authorizer is None:
            return 0, data
        return 0, _authorized_only(services, ctx, allowed, data)
    except Exception as e:
        log.exception("offset fetch failed", group_id=group_id)
        return e


def _authorized_only(
    services: Services,
    ctx: RequestContext,
    allowed: set[str] | None,
    data: list[tuple[str, list[tuple[int, Any]]]],
) -> list[tuple[str, list[tuple[int, Any]]]]:
    """The fetched topics the principal may describe; with topics named, the others DENIED."""
    if allowed is None:
        keep = authorized_topics(services, ctx, _DESCRIBE, [t for t, _parts in data])
        return [(t, parts) for t, parts in data if t in keep]
    return [(t, parts if t in allowed else [(p, DENIED) for p, _v in parts]) for t, parts in data]


UNSTABLE = object()  # a partition whose offset a transaction that has not ended committed
DENIED = object()  # a partition of a topic the principal may not describe


def _error_on_each_partition(asked: list[tuple[str, list[int]]], code: int) -> list[FetchTopic]:
    """A group-level error in OffsetFetch v0-v1, which have no top-level error code: every partition
    asked for carries it, as Kafka's OffsetFetchResponse before v2 (an empty answer would read as
    nothing committed)."""
    return [(name, None, [(p, -1, -1, "", code) for p in parts]) for name, parts in asked]


def _fetched_partitions(parts: list[tuple[int, Any]]) -> list[FetchPartition]:
    return [
        (p, -1, -1, "", 0)
        if value is None
        else (p, -1, -1, "", ErrorCode.UNSTABLE_OFFSET_COMMIT)
        if value is UNSTABLE
        else (p, -1, -1, "", ErrorCode.TOPIC_AUTHORIZATION_FAILED)
        if value is DENIED
        else (p, value.offset, value.leader_epoch, value.metadata, 0)
        for p, value in parts
    ]


def handle_fetch(services: Services, ctx: RequestContext, req: OffsetFetchRequest) -> Any:
    v = ctx.api_version
    if v < 8:
        if v < 2 and req.topics is None:
            # Topics became nullable in v2 (KIP-88); Kafka cannot parse a null before that.
            raise CloseConnection(f"OffsetFetch v{v}: topics is not nullable before v2")
        wanted = _Wanted(services, req.topics, v)

        def build_old(result: Any) -> Any:
            error, data = result
            if error and v < 2:
                return OffsetFetchAnswer(_error_on_each_partition(wanted.topics or [], error), error)
            return OffsetFetchAnswer([(t, None, _fetched_partitions(parts)) for t, parts in data], error)

        reply, respond = reply_with(build_old)
        _fetch_group(
            services, ctx, req.group_id, wanted, respond, require_stable=v >= 7 and req.require_stable
        )
        return reply

    requests = [(g.group_id, _Wanted(services, g.topics, v)) for g in req.groups]
    members = [(g.member_id, g.member_epoch) if v >= 9 else (None, -1) for g in req.groups]

    def build(results: list[Any]) -> Any:
        groups = []
        for (gid, wanted), (error, data) in zip(requests, results, strict=True):
            topics: list[FetchTopic] = [
                (
                    t if v < 10 else None,
                    (wanted.ids.get(t) or _topic_id(services, t)) if v >= 10 else None,
                    _fetched_partitions(parts),
                )
                for t, parts in data
            ]
            topics += [
                (None, tid, [(p, -1, -1, "", ErrorCode.UNKNOWN_TOPIC_ID) for p in parts])
                for tid, parts in wanted.unknown_ids
            ]
            groups.append((gid, error, topics))
        return OffsetFetchAnswer(groups=groups)

    reply, responders = reply_all(len(requests), build)
    for (gid, wanted), member, respond in zip(requests, members, responders, strict=True):
        _fetch_group(services, ctx, gid, wanted, respond, member, bool(req.require_stable))
    return reply


def _topic_id(services: Services, name: str) -> Any:
    topic = services.partitions.get(name)
    return topic.topic_id if topic is not None else ZERO_UUID


def fetch_error_response(req: Any, version: int, code: int, message: str | None) -> Any:
    if version < 2:
        asked = [(t.name, list(t.partition_indexes)) for t in req.topics or []]
        return OffsetFetchAnswer(_error_on_each_partition(asked, code), code)
    if version < 8:
        return _FResp(throttle_time_ms=0, error_code=code, topics=[])
    return _FResp(
        throttle_time_ms=0,
        groups=[_FGroup(group_id=g.group_id, error_code=code, topics=[]) for g in req.groups],
    )


# --- OffsetDelete ------------------------------------------------------------------------------
_DResp: Any = response_class(ApiKey.OffsetDelete)  # kafka-python's generated class
_DTopic = _DResp.OffsetDeleteResponseTopic
_DPart = _DTopic.OffsetDeleteResponsePartition


def handle_delete(services: Services, ctx: RequestContext, req: Any) -> Any:
    v = ctx.api_version
    if not req.group_id:
        return delete_error_response(req, v, ErrorCode.INVALID_GROUP_ID, None)
    require(services, ctx, Op.DELETE, GROUP, req.group_id)
    pm = services.partitions
    unknown: dict[tuple[str, int], int] = {}
    wanted = []
    for t in req.topics:
        topic = pm.get(t.name)
        keep = []
        readable = topic_authorized(services, ctx, Op.READ, t.name)
        for p in t.partitions:
            if not readable:
                unknown[(t.name, p.partition_index)] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            elif topic is None or not 0 <= p.partition_index < len(topic.partitions):
                unknown[(t.name, p.partition_index)] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            else:
                keep.append(p.partition_index)
        wanted.append((t.name, keep))
    gid = req.group_id

    def build(result: Any) -> Any:
        error, per_partition = result
        if error:
            return delete_error_response(req, v, error, None)
        return _DResp(
            error_code=0,
            throttle_time_ms=0,
            topics=[
                _DTopic(
                    name=t.name,
                    partitions=[
                        _DPart(
                            partition_index=p.partition_index,
                            error_code=unknown.get(
                                (t.name, p.partition_index), per_partition.get((t.name, p.partition_index), 0)
                            ),
                        )
                        for p in t.partitions
                    ],
                )
                for t in req.topics
            ],
        )

    reply, respond = reply_with(build)

    def op(store: GroupStore, now: int) -> Outcome:
        consumer = store.kind(ConsumerGroups).get(gid)
        if consumer is not None:  # Kafka's ConsumerGroup.validateOffsetDelete checks nothing
            out, per_partition = store.offsets.delete(gid, consumer, wanted)
            out.respond(respond, (0, {(t, p): e for t, errs in per_partition for p, e in errs}))
            return out
        group = store.kind(ClassicGroups).get(gid)
        if group is None:
            out = Outcome()
            out.respond(respond, (ErrorCode.GROUP_ID_NOT_FOUND, {}))
            return out
        error = offset_rules.validate_offset_delete(group)
        if error:
            out = Outcome()
            out.respond(respond, (error, {}))
            return out
        out, per_partition = store.offsets.delete(gid, group, wanted)
        out.respond(respond, (0, {(t, p): e for t, errs in per_partition for p, e in errs}))
        return out

    deletions = services.metrics.meter(OFFSET_DELETION, ())

    def counted(store: GroupStore, now: int) -> Outcome:
        out = op(store, now)
        if out.records:  # only offset tombstones: one per offset deleted
            deletions.record(now, len(out.records))
        return out

    services.groups.tell(gid, counted)
    return reply


def delete_error_response(req: Any, version: int, code: int, message: str | None) -> Any:
    return _DResp(error_code=code, throttle_time_ms=0, topics=[])
