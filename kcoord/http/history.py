"""The offset history API of the operations endpoint: a group's offset changes, its offsets as of
an instant, and rewinding it to them.

- ``GET /api/groups/<g>/history?topic=&since=``: the changes of the group's committed offsets,
  oldest first (kcoord/groups/history.py reads them from the log); ``member_id`` and
  ``client_id`` of the member the partition was assigned to where the log shows it, else null;
  ``lag`` is always null: the partition's high watermark at that time is in no log (the
  coordinator's records do not carry it, and data records' timestamps are the producers').
- ``GET /api/groups/<g>/offsets-at?timestamp=``: each partition's last commit at or before the
  instant (partitions not committed then, or whose offset was deleted by then, are absent).
- ``POST /api/groups/<g>/reset-offsets`` ``{"to_commit_at", "execute"}``: the plan that puts those
  offsets back (each moved into the partition's current log range, as Kafka's reset tool does;
  partitions of deleted topics left out); refused with 409 NON_EMPTY_GROUP while the group has
  members, as Kafka's tool refuses it. ``execute`` commits the plan as OffsetCommit v9 with
  generation -1 and no member (the handler itself runs it), answering once it is durable.

Times are epoch milliseconds or ISO-8601 (without a zone: UTC). A group with neither live state
nor any offset commit in the log is 404 GROUP_ID_NOT_FOUND.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from kcoord.apis import offsets as offset_api
from kcoord.apis.context import RequestContext
from kcoord.apis.reply import Reply
from kcoord.apis.services import Services
from kcoord.classic.history import ClassicMembership
from kcoord.consumer.history import ConsumerMembership
from kcoord.groups.history import OffsetChange, offsets_at, read_changes
from kcoord.http import views
from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.frames import RequestHeader
from kcoord.protocol.offsets_codec import (
    CommitRequestPartition,
    CommitRequestTopic,
    OffsetCommitAnswer,
    OffsetCommitRequest,
)

Answer = tuple[int, dict[str, Any]]
COMMIT_VERSION = 9  # topics by name; a commit with generation -1 creates a group that has none


class BadRequest(ValueError):
    pass


def _error(status: int, name: str, message: str) -> Answer:
    return status, {"error": name, "message": message}


def parse_time(text: str | None, name: str) -> int:
    """Epoch milliseconds, or an ISO-8601 date and time (UTC unless it names a zone)."""
    if text is None or not text.strip():
        raise BadRequest(f"{name} is required: epoch milliseconds or ISO-8601")
    text = text.strip()
    if text.lstrip("-").isdigit():
        return int(text)
    try:
        when = dt.datetime.fromisoformat(text)
    except ValueError:
        raise BadRequest(f"invalid {name} {text!r}: expected epoch milliseconds or ISO-8601") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    return int(when.timestamp() * 1000)


class Membership:
    """Classic and KIP-848 owners together (a group id may have changed type)."""

    def __init__(self, services: Services) -> None:
        names = {t.topic_id: name for name, t in services.partitions.topics.items()}
        self.kinds = (ClassicMembership(), ConsumerMembership(names))

    def feed(self, key: bytes, value: bytes | None) -> None:
        for kind in self.kinds:
            kind.feed(key, value)

    def owner(self, topic: str, partition: int) -> tuple[str, str] | None:
        for kind in self.kinds:
            found = kind.owner(topic, partition)
            if found is not None:
                return found
        return None


async def _changes(services: Services, group: str) -> list[OffsetChange] | None:
    """The group's offset changes and deletions, None if it has neither these nor live state."""
    log = services.groups.shard_for(group).log
    changes = await read_changes(log, group, Membership(services))
    if not changes and views.group(services, group) is None:
        return None
    return changes


def _not_found(group: str) -> Answer:
    return _error(404, "GROUP_ID_NOT_FOUND", f"Group {group} has no live state and no offset history.")


async def history(services: Services, group: str, query: Mapping[str, str]) -> Answer:
    topic = query.get("topic")
    since = parse_time(query["since"], "since") if query.get("since") else None
    changes = await _changes(services, group)
    if changes is None:
        return _not_found(group)
    out = []
    for c in changes:
        v = c.value
        if v is None or (topic and c.topic != topic) or (since is not None and c.effective_at < since):
            continue
        out.append(
            {
                "topic": c.topic,
                "partition": c.partition,
                "offset": v.offset,
                "leader_epoch": v.leader_epoch,
                "metadata": v.metadata,
                "commit_timestamp": v.commit_timestamp,
                # When the commit took effect (its record's append time; a transactional commit's
                # COMMIT marker's): what offsets-at and reset-offsets compare times with. A commit
                # is stamped when its request is handled, before its record is appended.
                "effective_at": c.effective_at,
                "member_id": c.member_id,
                "client_id": c.client_id,
                "lag": None,
            }
        )
    return 200, {"group": group, "changes": out}


async def offsets_at_time(services: Services, group: str, query: Mapping[str, str]) -> Answer:
    timestamp = parse_time(query.get("timestamp"), "timestamp")
    changes = await _changes(services, group)
    if changes is None:
        return _not_found(group)
    offsets = [
        {"topic": t, "partition": p, "offset": c.value.offset, "commit_timestamp": c.value.commit_timestamp}
        for (t, p), c in offsets_at(changes, timestamp).items()
        if c.value is not None
    ]
    return 200, {"group": group, "timestamp": timestamp, "offsets": offsets}


async def reset_offsets(services: Services, group: str, body: Any) -> Answer:
    if not isinstance(body, dict) or "to_commit_at" not in body:
        raise BadRequest('expected a JSON object {"to_commit_at": <ms or ISO-8601>, "execute": bool}')
    timestamp = parse_time(str(body["to_commit_at"]), "to_commit_at")
    execute = body.get("execute", False)
    if not isinstance(execute, bool):
        raise BadRequest("execute must be true or false")
    changes = await _changes(services, group)
    if changes is None:
        return _not_found(group)
    # Checked after the scan, on the loop, right before the plan is made and committed.
    live = views.group(services, group)
    if live is not None and (live.members or live.state not in ("Empty", "Dead")):
        return _error(
            409,
            "NON_EMPTY_GROUP",
            f"Offsets can only be reset if the group '{group}' is inactive, but the current state "
            f"is {live.state} (members: {len(live.members)}).",
        )
    current = services.groups.state_for(group).offsets.of(group)
    plan = []
    for (t, p), c in offsets_at(changes, timestamp).items():
        part = services.partitions.partition(t, p)
        if part is None or c.value is None:
            continue
        now = current.get(t, {}).get(p)
        new = min(max(c.value.offset, part.log_start_offset), part.high_watermark)
        plan.append(
            {"topic": t, "partition": p, "current_offset": now.offset if now else None, "new_offset": new}
        )
    if execute and plan:
        errors = await _commit(services, group, plan)
        if errors:
            return _error(409, errors[0], f"The commit was refused: {errors[0]}.")
    return 200, {"group": group, "timestamp": timestamp, "executed": execute, "plan": plan}


async def _commit(services: Services, group: str, plan: list[dict[str, Any]]) -> list[str]:
    """Commit the plan through OffsetCommit's own handler; the names of the errors it answered."""
    by_topic: dict[str, list[CommitRequestPartition]] = {}
    for row in plan:
        by_topic.setdefault(row["topic"], []).append(
            CommitRequestPartition(row["partition"], row["new_offset"], -1, "")
        )
    request = OffsetCommitRequest(
        group, -1, "", None, -1, [CommitRequestTopic(t, None, ps) for t, ps in by_topic.items()]
    )
    header = RequestHeader(8, COMMIT_VERSION, 0, "kcoord-http", 0)
    reply = offset_api.handle_commit(services, RequestContext(header, COMMIT_VERSION, None), request)
    future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()

    def settle(value: Any, error: BaseException | None) -> None:
        if not future.done():
            future.set_exception(error) if error is not None else future.set_result(value)

    if isinstance(reply, Reply):
        reply.then(settle)
    else:
        future.set_result(reply)
    answer = await future
    if isinstance(answer, OffsetCommitAnswer):
        codes = [e for _name, _id, parts in answer.topics for _p, e in parts if e]
    else:  # refused before the group saw it (commit_error_response)
        codes = [p.error_code for t in answer.topics for p in t.partitions if p.error_code]
    return [ErrorCode(c).name for c in dict.fromkeys(codes)]


Route = Callable[[Services, str, Any], Awaitable[Answer]]
ROUTES: dict[tuple[str, str], Route] = {
    ("GET", "history"): history,
    ("GET", "offsets-at"): offsets_at_time,
    ("POST", "reset-offsets"): reset_offsets,
}


async def handle(
    services: Services, method: str, group: str, action: str, query: Any, body: bytes
) -> Answer | None:
    """The answer to ``/api/groups/<group>/<action>``, None if that is no route of this API."""
    route = ROUTES.get(("GET" if method == "HEAD" else method, action))
    if route is None:
        if any(a == action for _m, a in ROUTES):
            return _error(405, "METHOD_NOT_ALLOWED", f"{method} is not allowed on {action}")
        return None
    try:
        arg = query
        if method == "POST":
            try:
                arg = json.loads(body or b"null")
            except ValueError as e:
                raise BadRequest(f"the body is not JSON: {e}") from None
        return await route(services, group, arg)
    except BadRequest as e:
        return _error(400, "INVALID_REQUEST", str(e))
