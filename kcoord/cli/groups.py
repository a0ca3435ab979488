"""``kcoord groups``: list, describe, reset offsets of and delete the groups of any Kafka cluster,
as kafka-consumer-groups.sh and kafka-share-groups.sh do, over the Kafka protocol."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import click

from kcoord.cli import cluster
from kcoord.cli import group_admin as ga
from kcoord.cli.admin import Admin, KafkaRequestError, error_description, error_name
from kcoord.cli.offset_history import history_cmd, reset_to_commit_at
from kcoord.cli.ops_api import OpsApi, http_server_option
from kcoord.cli.render import EXIT_CODES_HELP, EXIT_KAFKA_ERROR, Output, common_options, handle_errors
from kcoord.cli.reset_offsets import (
    PlanError,
    PlannedOffset,
    ResetSpec,
    parse_datetime,
    parse_duration,
    parse_topic,
    plan,
)

TopicPartition = tuple[str, int]
NON_EMPTY_GROUP = 68


@click.group(epilog=EXIT_CODES_HELP)
def groups() -> None:
    """Inspect and administer consumer groups (classic and KIP-848) and share groups."""


def _error_doc(code: int) -> dict[str, Any] | None:
    if not code:
        return None
    return {"code": code, "name": error_name(code), "message": error_description(code)}


def _result(code: int) -> str:
    return "OK" if not code else f"{error_name(code)}: {error_description(code)}"


def _assignment_text(tps: Iterable[TopicPartition]) -> str:
    by_topic: dict[str, list[int]] = {}
    for t, p in sorted(tps):
        by_topic.setdefault(t, []).append(p)
    return " ".join(f"{t}:{','.join(map(str, ps))}" for t, ps in by_topic.items())


# --- list ---------------------------------------------------------------------------------------
@groups.command("list", epilog=EXIT_CODES_HELP)
@click.option(
    "--state",
    "states",
    multiple=True,
    type=click.Choice(ga.GROUP_STATES, case_sensitive=False),
    help="Only groups in this state (repeatable).",
)
@click.option(
    "--type",
    "types",
    multiple=True,
    type=click.Choice(ga.GROUP_TYPES, case_sensitive=False),
    help="Only groups of this type (repeatable).",
)
@common_options
@handle_errors
def list_cmd(states: tuple[str, ...], types: tuple[str, ...], bootstrap: str, output: str) -> None:
    """List groups: id, type, state, protocol (or assignor) and member count."""
    out = Output(output)
    with Admin(bootstrap) as admin:
        listed = ga.list_groups(admin, states, types)
        described = ga.describe_groups(admin, listed)
    rows = []
    for g in listed:
        d = described.get(g.group_id)
        desc = d if isinstance(d, ga.Group) else None
        rows.append(
            {
                "group_id": g.group_id,
                "type": g.group_type,
                "state": desc.state if desc else g.state,
                "protocol": desc.protocol if desc else None,
                "protocol_type": g.protocol_type,
                "members": len(desc.members) if desc else None,
            }
        )
    if out.json:
        out.emit_json({"groups": rows})
        return
    out.table(
        ["GROUP", "TYPE", "STATE", "PROTOCOL", "MEMBERS"],
        [[r["group_id"], r["type"], r["state"], r["protocol"], r["members"]] for r in rows],
    )


# --- describe -----------------------------------------------------------------------------------
def _log_end_offsets(admin: Admin, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
    """Log end offsets, topic by topic: a deleted topic's partitions stay unknown (``-``)."""
    by_topic: dict[str, list[TopicPartition]] = {}
    for tp in tps:
        by_topic.setdefault(tp[0], []).append(tp)
    out: dict[TopicPartition, int] = {}
    for topic_tps in by_topic.values():
        try:
            out.update(cluster.list_offsets(admin, dict.fromkeys(topic_tps, cluster.LATEST)))
        except KafkaRequestError as e:
            if e.code != cluster.UNKNOWN_TOPIC_OR_PARTITION:
                raise
    return out


def _describe_one(admin: Admin, group_id: str) -> dict[str, Any]:
    g = ga.describe_group(admin, group_id)
    doc: dict[str, Any] = {
        "group_id": g.group_id,
        "type": g.group_type,
        "state": g.state,
        "protocol": g.protocol,
        "epoch": g.epoch,
        "coordinator": admin.coordinator(group_id),
        "members": [
            {
                "member_id": m.member_id,
                "instance_id": m.instance_id,
                "client_id": m.client_id,
                "host": m.host,
                "assignment": [{"topic": t, "partition": p} for t, p in m.assignment],
            }
            for m in g.members
        ],
    }
    if g.group_type == "share":
        share = ga.share_offsets(admin, group_id)
        ends = _log_end_offsets(admin, share)
        doc["offsets"] = [
            {
                "topic": t,
                "partition": p,
                "start_offset": so.start_offset if so.start_offset >= 0 else None,
                "log_end_offset": ends.get((t, p)),
                "lag": so.lag if so.lag >= 0 else None,
            }
            for (t, p), so in sorted(share.items())
        ]
        return doc
    committed = ga.committed_offsets(admin, group_id)
    owners = g.assigned()
    tps = sorted(set(committed) | set(owners))
    ends = _log_end_offsets(admin, tps)
    rows = []
    for tp in tps:
        current, end, owner = committed.get(tp), ends.get(tp), owners.get(tp)
        rows.append(
            {
                "topic": tp[0],
                "partition": tp[1],
                "current_offset": current,
                "log_end_offset": end,
                "lag": end - current if current is not None and end is not None else None,
                "member_id": owner.member_id if owner else None,
                "host": owner.host if owner else None,
                "client_id": owner.client_id if owner else None,
            }
        )
    doc["offsets"] = rows
    return doc


def _print_described(out: Output, doc: dict[str, Any]) -> None:
    out.table(
        ["GROUP", "TYPE", "STATE", "PROTOCOL", "EPOCH", "COORDINATOR", "MEMBERS"],
        [
            [
                doc["group_id"],
                doc["type"],
                doc["state"],
                doc["protocol"],
                doc["epoch"],
                doc["coordinator"],
                len(doc["members"]),
            ]
        ],
    )
    out.line("")
    if doc["members"]:
        out.table(
            ["MEMBER-ID", "INSTANCE-ID", "CLIENT-ID", "HOST", "#PARTITIONS", "ASSIGNMENT"],
            [
                [
                    m["member_id"],
                    m["instance_id"],
                    m["client_id"],
                    m["host"],
                    len(m["assignment"]),
                    _assignment_text((a["topic"], a["partition"]) for a in m["assignment"]),
                ]
                for m in doc["members"]
            ],
        )
        out.line("")
    if doc["type"] == "share":
        out.table(
            ["TOPIC", "PARTITION", "START-OFFSET", "LOG-END-OFFSET", "LAG"],
            [
                [o["topic"], o["partition"], o["start_offset"], o["log_end_offset"], o["lag"]]
                for o in doc["offsets"]
            ],
        )
    else:
        out.table(
            [
                "TOPIC",
                "PARTITION",
                "CURRENT-OFFSET",
                "LOG-END-OFFSET",
                "LAG",
                "CONSUMER-ID",
                "HOST",
                "CLIENT-ID",
            ],
            [
                [
                    o["topic"],
                    o["partition"],
                    o["current_offset"],
                    o["log_end_offset"],
                    o["lag"],
                    o["member_id"],
                    o["host"],
                    o["client_id"],
                ]
                for o in doc["offsets"]
            ],
        )
    if not doc["offsets"]:
        out.note(f"Group {doc['group_id']} has no offsets.")


@groups.command("describe", epilog=EXIT_CODES_HELP)
@click.argument("group_ids", metavar="GROUP...", nargs=-1, required=True)
@common_options
@handle_errors
def describe_cmd(group_ids: tuple[str, ...], bootstrap: str, output: str) -> None:
    """Describe groups: members and their assignment; per partition the committed offset, the
    log end offset and the lag (share groups: the share-partition start offset and lag)."""
    out = Output(output)
    docs: list[dict[str, Any]] = []
    failed: list[KafkaRequestError] = []
    with Admin(bootstrap) as admin:
        for gid in dict.fromkeys(group_ids):
            try:
                docs.append(_describe_one(admin, gid))
            except KafkaRequestError as e:  # the other groups are still described, as Kafka's tool does
                failed.append(e)
                docs.append({"group_id": gid, "error": _error_doc(e.code) | {"message": e.detail}})
    if out.json:
        out.emit_json({"groups": docs})
    else:
        for i, doc in enumerate(d for d in docs if "error" not in d):
            if i:
                out.line("")
            _print_described(out, doc)
    for e in failed:
        out.note(f"Error: {e.sentence()}")
    if failed:
        click.get_current_context().exit(EXIT_KAFKA_ERROR)


# --- reset-offsets ------------------------------------------------------------------------------
def _reset_spec(
    to_earliest: bool,
    to_latest: bool,
    to_offset: int | None,
    to_datetime: str | None,
    by_duration: str | None,
    shift_by: int | None,
    to_current: bool,
    now_ms: int,
) -> ResetSpec:
    chosen = [
        ("to-earliest", to_earliest),
        ("to-latest", to_latest),
        ("to-offset", to_offset is not None),
        ("to-datetime", to_datetime is not None),
        ("by-duration", by_duration is not None),
        ("shift-by", shift_by is not None),
        ("to-current", to_current),
    ]
    kinds = [k for k, on in chosen if on]
    if len(kinds) != 1:
        raise click.UsageError(
            "give exactly one of --to-earliest, --to-latest, --to-offset, --to-datetime, "
            f"--by-duration, --shift-by, --to-current (got {', '.join('--' + k for k in kinds) or 'none'})"
        )
    kind = kinds[0]
    if kind == "to-offset":
        return ResetSpec(kind, int(to_offset))  # type: ignore[arg-type]
    if kind == "shift-by":
        return ResetSpec(kind, int(shift_by))  # type: ignore[arg-type]
    if kind == "to-datetime":
        return ResetSpec(kind, parse_datetime(str(to_datetime)))
    if kind == "by-duration":
        return ResetSpec(kind, now_ms - parse_duration(str(by_duration)))
    return ResetSpec(kind)


def _scope(
    admin: Admin, topics: tuple[str, ...], all_topics: bool, current: dict[TopicPartition, int]
) -> list[TopicPartition]:
    if all_topics == bool(topics):
        raise click.UsageError("give either --all-topics or one or more --topic t[:p,...]")
    if all_topics:
        return sorted(current)
    wanted = [parse_topic(t) for t in topics]
    known = cluster.partitions_of(admin, [t for t, _ in wanted])
    out: set[TopicPartition] = set()
    for topic, parts in wanted:
        have = known[topic]
        for p in parts if parts is not None else have:
            if p not in have:
                raise KafkaRequestError(
                    cluster.UNKNOWN_TOPIC_OR_PARTITION, f"{topic} has no partition {p}.", f"{topic}-{p}"
                )
            out.add((topic, p))
    return sorted(out)


@groups.command("reset-offsets", epilog=EXIT_CODES_HELP)
@click.argument("group_id", metavar="GROUP")
@click.option(
    "--topic",
    "topics",
    multiple=True,
    metavar="TOPIC[:P,...]",
    help="Topic (and partitions) to reset; repeatable.",
)
@click.option("--all-topics", is_flag=True, help="Every topic the group has offsets for.")
@click.option("--to-earliest", is_flag=True, help="The log start offset.")
@click.option("--to-latest", is_flag=True, help="The log end offset.")
@click.option("--to-offset", type=int, metavar="N", help="Offset N (moved into the log's range).")
@click.option(
    "--to-datetime",
    metavar="YYYY-MM-DDTHH:mm:SS.sss",
    help="The first record at or after this time (local time unless a zone such as Z or +01:00 is given).",
)
@click.option(
    "--by-duration", metavar="PnDTnHnMnS", help="The first record at or after now minus this duration."
)
@click.option("--shift-by", type=int, metavar="N", help="The current offset plus N (negative: back).")
@click.option("--to-current", is_flag=True, help="The current offset (the log end where none is committed).")
@click.option(
    "--to-commit-at",
    metavar="TIME",
    help="The offsets the group had committed at TIME (epoch ms or YYYY-MM-DDTHH:mm:SS[.sss], local "
    "time unless a zone is given), from the broker's offset history: every partition committed "
    "by then; uses --http-server.",
)
@click.option(
    "--execute", is_flag=True, help="Apply the plan; without it only the plan is printed (dry run)."
)
@click.option("--dry-run", is_flag=True, help="Print the plan only (the default).")
@http_server_option
@common_options
@handle_errors
def reset_offsets_cmd(
    group_id: str,
    topics: tuple[str, ...],
    all_topics: bool,
    to_earliest: bool,
    to_latest: bool,
    to_offset: int | None,
    to_datetime: str | None,
    by_duration: str | None,
    shift_by: int | None,
    to_current: bool,
    to_commit_at: str | None,
    execute: bool,
    dry_run: bool,
    http_server: str,
    bootstrap: str,
    output: str,
) -> None:
    """Reset a group's offsets (a share group's start offsets). Only an inactive group (no
    members) can be reset, as with Kafka's tool. Prints the plan; --execute applies it with
    OffsetCommit (classic and consumer groups) or AlterShareGroupOffsets (share groups).

    --to-commit-at rewinds to the offsets committed at a time, from the offset history the
    broker keeps (offsets.history.retention.ms); history is not in the Kafka protocol, so this
    one asks kcoord's HTTP API at --http-server."""
    import time

    if execute and dry_run:
        raise click.UsageError("--execute and --dry-run exclude each other")
    out = Output(output)
    if to_commit_at is not None:
        others = (to_offset, to_datetime, by_duration, shift_by)
        if to_earliest or to_latest or to_current or any(o is not None for o in others):
            raise click.UsageError("--to-commit-at excludes the other reset options")
        if topics:
            raise click.UsageError(
                "--to-commit-at resets every partition the group had committed then; --topic does not apply"
            )
        reset_to_commit_at(out, OpsApi(http_server), group_id, to_commit_at, execute)
        return
    spec = _reset_spec(
        to_earliest,
        to_latest,
        to_offset,
        to_datetime,
        by_duration,
        shift_by,
        to_current,
        int(time.time() * 1000),
    )
    with Admin(bootstrap) as admin:
        try:
            group = ga.describe_group(admin, group_id)
        except KafkaRequestError as e:
            if e.code != ga.GROUP_ID_NOT_FOUND:
                raise
            group = ga.Group(group_id, "classic", "Dead", "", "")  # committing creates it, as in Kafka
        if group.active:
            raise KafkaRequestError(
                NON_EMPTY_GROUP,
                f"Assignments can only be reset if the group '{group_id}' is inactive, "
                f"but the current state is {group.state} (members: {len(group.members)}).",
                f"group {group_id}",
            )
        share = group.group_type == "share"
        if share:
            current = {tp: so.start_offset for tp, so in ga.share_offsets(admin, group_id).items()}
            current = {tp: o for tp, o in current.items() if o >= 0}
        elif group.state == "Dead":
            current = {}
        else:
            current = ga.committed_offsets(admin, group_id)
        partitions = _scope(admin, topics, all_topics, current)
        earliest = cluster.list_offsets(admin, dict.fromkeys(partitions, cluster.EARLIEST))
        latest = cluster.list_offsets(admin, dict.fromkeys(partitions, cluster.LATEST))
        by_time = (
            cluster.list_offsets(admin, dict.fromkeys(partitions, spec.value))
            if spec.needs_timestamps
            else None
        )
        planned = plan(spec, partitions, current, earliest, latest, by_time)
        errors: dict[TopicPartition, int] = {}
        if execute and planned:
            new = {(p.topic, p.partition): p.new for p in planned}
            if share:
                errors = ga.alter_share_offsets(admin, group_id, new)
            else:
                errors = ga.commit_offsets(admin, group_id, new)
    _print_plan(out, group, planned, execute, errors)
    if any(errors.values()):
        click.get_current_context().exit(EXIT_KAFKA_ERROR)


def _print_plan(
    out: Output,
    group: ga.Group,
    planned: list[PlannedOffset],
    executed: bool,
    errors: dict[TopicPartition, int],
) -> None:
    if out.json:
        out.emit_json(
            {
                "group_id": group.group_id,
                "type": group.group_type,
                "executed": executed,
                "partitions": [
                    {
                        "topic": p.topic,
                        "partition": p.partition,
                        "current_offset": p.current,
                        "new_offset": p.new,
                        "error": _error_doc(errors.get((p.topic, p.partition), 0)),
                    }
                    for p in planned
                ],
            }
        )
        return
    columns = ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "NEW-OFFSET"]
    rows: list[list[Any]] = [[group.group_id, p.topic, p.partition, p.current, p.new] for p in planned]
    if executed:
        columns.append("RESULT")
        for row, p in zip(rows, planned, strict=True):
            row.append(_result(errors.get((p.topic, p.partition), 0)))
    out.table(columns, rows)
    if not planned:
        out.note("Nothing to reset: no partition in scope.")
    elif not executed:
        out.note("Dry run: nothing was changed. Run again with --execute to apply this plan.")


# --- delete and delete-offsets ------------------------------------------------------------------
@groups.command("delete", epilog=EXIT_CODES_HELP)
@click.argument("group_ids", metavar="GROUP...", nargs=-1, required=True)
@common_options
@handle_errors
def delete_cmd(group_ids: tuple[str, ...], bootstrap: str, output: str) -> None:
    """Delete groups and their offsets (DeleteGroups); a group with members is refused
    (NON_EMPTY_GROUP)."""
    out = Output(output)
    with Admin(bootstrap) as admin:
        results = ga.delete_groups(admin, list(dict.fromkeys(group_ids)))
    if out.json:
        out.emit_json({"groups": [{"group_id": g, "error": _error_doc(c)} for g, c in results.items()]})
    else:
        out.table(["GROUP", "RESULT"], [[g, _result(c)] for g, c in results.items()])
    if any(results.values()):
        click.get_current_context().exit(EXIT_KAFKA_ERROR)


@groups.command("delete-offsets", epilog=EXIT_CODES_HELP)
@click.argument("group_id", metavar="GROUP")
@click.option(
    "--topic",
    "topics",
    multiple=True,
    required=True,
    metavar="TOPIC[:P,...]",
    help="Topic (and partitions; share groups: whole topics only) whose offsets to delete; repeatable.",
)
@common_options
@handle_errors
def delete_offsets_cmd(group_id: str, topics: tuple[str, ...], bootstrap: str, output: str) -> None:
    """Delete a group's offsets of some topics (OffsetDelete; DeleteShareGroupOffsets for a share
    group). Kafka refuses partitions the group's members are subscribed to."""
    out = Output(output)
    wanted = [parse_topic(t) for t in topics]
    with Admin(bootstrap) as admin:
        group = ga.describe_group(admin, group_id)
        if group.group_type == "share":
            if any(parts is not None for _, parts in wanted):
                raise PlanError("a share group's offsets are deleted for whole topics: give --topic TOPIC")
            by_topic = ga.delete_share_offsets(admin, group_id, [t for t, _ in wanted])
            rows = [{"topic": t, "partition": None, "error": _error_doc(c)} for t, c in by_topic.items()]
            failed = any(by_topic.values())
        else:
            tps: list[TopicPartition] = []
            for topic, parts in wanted:
                if parts is None:
                    parts = cluster.partitions_of(admin, [topic])[topic]
                tps.extend((topic, p) for p in parts)
            by_partition = ga.delete_offsets(admin, group_id, tps)
            rows = [
                {"topic": t, "partition": p, "error": _error_doc(c)}
                for (t, p), c in sorted(by_partition.items())
            ]
            failed = any(by_partition.values())
    if out.json:
        out.emit_json({"group_id": group_id, "type": group.group_type, "offsets": rows})
    else:
        out.table(
            ["TOPIC", "PARTITION", "RESULT"],
            [
                [
                    r["topic"],
                    r["partition"],
                    "OK" if r["error"] is None else f"{r['error']['name']}: {r['error']['message']}",
                ]
                for r in rows
            ],
        )
    if failed:
        click.get_current_context().exit(EXIT_KAFKA_ERROR)


groups.add_command(history_cmd)
