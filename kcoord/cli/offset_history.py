"""``kcoord groups history`` and ``reset-offsets --to-commit-at``: a group's offset history.

History is not in the Kafka protocol: the broker keeps superseded offset commits for
offsets.history.retention.ms and serves them over its HTTP API (``--http-server``), which these
two talk to; every other ``kcoord groups`` command speaks the Kafka protocol.
"""

from __future__ import annotations

import click

from kcoord.cli.ops_api import OpsApi, http_server_option
from kcoord.cli.render import EXIT_CODES_HELP, Output, handle_errors
from kcoord.cli.reset_offsets import parse_instant

TopicPartition = tuple[str, int]


def reset_to_commit_at(out: Output, api: OpsApi, group_id: str, when: str, execute: bool) -> None:
    timestamp = parse_instant(when, "--to-commit-at")
    with out.waiting(f"Reading the offset history of {group_id}..."):
        doc = api.post(
            api.group_path(group_id, "reset-offsets"),
            {"to_commit_at": timestamp, "execute": execute},
            f"group {group_id}",
        )
    if out.json:
        out.emit_json(
            {
                "group_id": group_id,
                "timestamp": doc["timestamp"],
                "executed": doc["executed"],
                "partitions": [
                    {
                        "topic": p["topic"],
                        "partition": p["partition"],
                        "current_offset": p["current_offset"],
                        "new_offset": p["new_offset"],
                        "error": None,
                    }
                    for p in doc["plan"]
                ],
            }
        )
        return
    columns = ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "NEW-OFFSET"]
    rows = [
        [group_id, p["topic"], p["partition"], p["current_offset"], p["new_offset"]]
        + (["OK"] if execute else [])
        for p in doc["plan"]
    ]
    out.table(columns + (["RESULT"] if execute else []), rows)
    if not doc["plan"]:
        out.note(f"Nothing to reset: the group had no committed offset at {when(timestamp)}.")
    elif not execute:
        out.note("Dry run: nothing was changed. Run again with --execute to apply this plan.")


def when(ms: int) -> str:
    import datetime as dt

    return dt.datetime.fromtimestamp(ms / 1000).astimezone().isoformat(timespec="milliseconds")


@click.command("history", epilog=EXIT_CODES_HELP)
@click.argument("group_id", metavar="GROUP")
@click.option("--topic", help="Only this topic's partitions.")
@click.option(
    "--since",
    metavar="TIME",
    help="Only changes at or after TIME (epoch ms or YYYY-MM-DDTHH:mm:SS[.sss], local time unless "
    "a zone such as Z is given).",
)
@http_server_option
@click.option(
    "--output",
    "-o",
    "output",
    type=click.Choice(["table", "json"]),
    default="table",
    show_default=True,
    help="Aligned tables, or JSON for scripts (stable field names).",
)
@handle_errors
def history_cmd(group_id: str, topic: str | None, since: str | None, http_server: str, output: str) -> None:
    """When each partition's committed offset changed, oldest first: the new offset (and the one
    before it), who committed it where the group's membership records show it, and the lag at the
    time where derivable (it never is yet: '-').

    The broker keeps superseded commits for offsets.history.retention.ms; history is not in the
    Kafka protocol, so this command asks kcoord's HTTP API at --http-server."""
    out = Output(output)
    api = OpsApi(http_server)
    query = {"topic": topic, "since": parse_instant(since, "--since") if since is not None else None}
    with out.waiting(f"Reading the offset history of {group_id}..."):
        doc = api.get(api.group_path(group_id, "history"), query, f"group {group_id}")
    if out.json:
        out.emit_json(doc)
        return
    previous: dict[TopicPartition, int] = {}
    rows = []
    for c in doc["changes"]:
        tp = (c["topic"], c["partition"])
        rows.append(
            [
                when(c["commit_timestamp"]),
                c["topic"],
                c["partition"],
                previous.get(tp),
                c["offset"],
                c["member_id"],
                c["client_id"],
                c["lag"],
            ]
        )
        previous[tp] = c["offset"]
    out.table(
        ["COMMITTED-AT", "TOPIC", "PARTITION", "PREVIOUS-OFFSET", "OFFSET", "MEMBER-ID", "CLIENT-ID", "LAG"],
        rows,
    )
    if not rows:
        out.note(
            f"Group {group_id} has no offset changes in its history"
            + (" that match." if topic or since else ".")
        )
