"""``kcoord topics``: list, describe, create and delete topics of any Kafka cluster, as
kafka-topics.sh does, over the Kafka protocol (Metadata, ListOffsets, DescribeConfigs,
CreateTopics, DeleteTopics)."""

from __future__ import annotations

from typing import Any

import click

from kcoord.cli import cluster
from kcoord.cli.admin import Admin, KafkaRequestError, error_name, request
from kcoord.cli.render import EXIT_CODES_HELP, EXIT_KAFKA_ERROR, Output, common_options, handle_errors
from kcoord.protocol.messages import ApiKey

TOPIC_RESOURCE = 2  # DescribeConfigs' resource type of a topic
DEFAULT_CONFIG = 5  # DescribeConfigs' config source of a value nobody set
TOPIC_ALREADY_EXISTS = 36
UNKNOWN_TOPIC_OR_PARTITION = 3
# DeleteTopics v6 names topics in structs (with ids); v5 by name is what this command needs.
DELETE_TOPICS_MAX = 5


@click.group(epilog=EXIT_CODES_HELP)
def topics() -> None:
    """Inspect, create and delete topics."""


def topic_configs(admin: Admin, names: list[str]) -> dict[str, dict[str, str | None]]:
    """The configs of each topic that differ from the defaults (DescribeConfigs)."""
    if not names:
        return {}
    req = request(
        ApiKey.DescribeConfigs,
        resources=[
            {"resource_type": TOPIC_RESOURCE, "resource_name": n, "configuration_keys": None} for n in names
        ],
        include_synonyms=False,
        include_documentation=False,
        min_version=1,
    )
    resp = admin.send(req)
    out: dict[str, dict[str, str | None]] = {}
    for r in resp.results:
        if r.error_code:
            raise KafkaRequestError(r.error_code, r.error_message, f"topic {r.resource_name}")
        out[r.resource_name] = {
            c.name: (None if c.is_sensitive else c.value)
            for c in sorted(r.configs, key=lambda c: c.name)
            if c.config_source != DEFAULT_CONFIG
        }
    return out


@topics.command("list", epilog=EXIT_CODES_HELP)
@click.option("--exclude-internal", is_flag=True, help="Leave out internal topics (__consumer_offsets).")
@common_options
@handle_errors
def list_cmd(exclude_internal: bool, bootstrap: str, output: str) -> None:
    """List topics with their partition counts."""
    out = Output(output)
    with Admin(bootstrap) as admin:
        found = cluster.describe_topics(admin)
    rows = [
        {"topic": t.name, "partitions": len(t.partitions), "internal": t.internal}
        for t in found.values()
        if not (exclude_internal and t.internal)
    ]
    if out.json:
        out.emit_json({"topics": rows})
    else:
        out.table(
            ["TOPIC", "PARTITIONS", "INTERNAL"], [[r["topic"], r["partitions"], r["internal"]] for r in rows]
        )


@topics.command("describe", epilog=EXIT_CODES_HELP)
@click.argument("names", metavar="[TOPIC...]", nargs=-1)
@click.option("--exclude-internal", is_flag=True, help="Leave out internal topics (__consumer_offsets).")
@common_options
@handle_errors
def describe_cmd(names: tuple[str, ...], exclude_internal: bool, bootstrap: str, output: str) -> None:
    """Describe topics (all when none is named): per partition the leader, replicas, in-sync
    replicas, log start and log end offsets; and the configs set on the topic."""
    out = Output(output)
    with Admin(bootstrap) as admin:
        found = cluster.describe_topics(admin, names or None)
        shown = [t for t in found.values() if not (exclude_internal and t.internal)]
        tps = [(t.name, p.partition) for t in shown for p in t.partitions]
        starts = cluster.list_offsets(admin, dict.fromkeys(tps, cluster.EARLIEST))
        ends = cluster.list_offsets(admin, dict.fromkeys(tps, cluster.LATEST))
        configs = topic_configs(admin, [t.name for t in shown])
    docs: list[dict[str, Any]] = [
        {
            "topic": t.name,
            "topic_id": t.topic_id,
            "internal": t.internal,
            "partition_count": len(t.partitions),
            "configs": configs.get(t.name, {}),
            "partitions": [
                {
                    "partition": p.partition,
                    "leader": p.leader,
                    "replicas": list(p.replicas),
                    "isr": list(p.isr),
                    "log_start_offset": starts.get((t.name, p.partition)),
                    "log_end_offset": ends.get((t.name, p.partition)),
                }
                for p in t.partitions
            ],
        }
        for t in shown
    ]
    if out.json:
        out.emit_json({"topics": docs})
        return
    for i, d in enumerate(docs):
        if i:
            out.line("")
        cfg = ",".join(f"{k}={v}" for k, v in d["configs"].items())
        out.line(
            f"Topic: {d['topic']}\tTopicId: {d['topic_id']}\tPartitionCount: {d['partition_count']}"
            f"\tConfigs: {cfg or '-'}"
        )
        out.table(
            ["PARTITION", "LEADER", "REPLICAS", "ISR", "LOG-START-OFFSET", "LOG-END-OFFSET"],
            [
                [
                    p["partition"],
                    p["leader"],
                    p["replicas"],
                    p["isr"],
                    p["log_start_offset"],
                    p["log_end_offset"],
                ]
                for p in d["partitions"]
            ],
        )


def _config_pair(text: str) -> tuple[str, str]:
    name, sep, value = text.partition("=")
    if not sep or not name:
        raise click.BadParameter(f"{text!r} is not NAME=VALUE", param_hint="--config")
    return name, value


@topics.command("create", epilog=EXIT_CODES_HELP)
@click.argument("name", metavar="TOPIC")
@click.option(
    "--partitions", type=click.IntRange(min=1), help="Partition count [default: the broker's num.partitions]."
)
@click.option(
    "--replication-factor",
    type=click.IntRange(min=1),
    help="Replicas per partition [default: the broker's default.replication.factor].",
)
@click.option("--config", "configs", multiple=True, metavar="NAME=VALUE", help="A topic config; repeatable.")
@click.option("--if-not-exists", is_flag=True, help="Succeed if the topic exists already.")
@common_options
@handle_errors
def create_cmd(
    name: str,
    partitions: int | None,
    replication_factor: int | None,
    configs: tuple[str, ...],
    if_not_exists: bool,
    bootstrap: str,
    output: str,
) -> None:
    """Create a topic (CreateTopics)."""
    out = Output(output)
    pairs = [_config_pair(c) for c in configs]
    req = request(
        ApiKey.CreateTopics,
        topics=[
            {
                "name": name,
                "num_partitions": partitions or -1,
                "replication_factor": replication_factor or -1,
                "assignments": [],
                "configs": [{"name": k, "value": v} for k, v in pairs],
            }
        ],
        timeout_ms=30000,
        validate_only=False,
    )
    with Admin(bootstrap) as admin:
        resp = admin.send(req)
    t = resp.topics[0]
    code = 0 if (t.error_code == TOPIC_ALREADY_EXISTS and if_not_exists) else t.error_code
    if code:
        raise KafkaRequestError(code, getattr(t, "error_message", None), f"topic {name}")
    created = t.error_code == 0
    count = getattr(t, "num_partitions", partitions)
    if out.json:
        out.emit_json({"topic": name, "created": created, "partitions": count})
    else:
        out.line(f"Created topic {name}." if created else f"Topic {name} exists already.")


@topics.command("delete", epilog=EXIT_CODES_HELP)
@click.argument("names", metavar="TOPIC...", nargs=-1, required=True)
@click.option("--if-exists", is_flag=True, help="Succeed for topics that do not exist.")
@common_options
@handle_errors
def delete_cmd(names: tuple[str, ...], if_exists: bool, bootstrap: str, output: str) -> None:
    """Delete topics (DeleteTopics)."""
    out = Output(output)
    req = request(
        ApiKey.DeleteTopics,
        topic_names=list(dict.fromkeys(names)),
        timeout_ms=30000,
        max_version=DELETE_TOPICS_MAX,
    )
    with Admin(bootstrap) as admin:
        resp = admin.send(req)
    results = {}
    for r in resp.responses:
        code = 0 if (r.error_code == UNKNOWN_TOPIC_OR_PARTITION and if_exists) else r.error_code
        results[r.name] = (code, getattr(r, "error_message", None))
    if out.json:
        out.emit_json(
            {
                "topics": [
                    {
                        "topic": n,
                        "error": None if not c else {"code": c, "name": error_name(c), "message": m},
                    }
                    for n, (c, m) in results.items()
                ]
            }
        )
    else:
        out.table(
            ["TOPIC", "RESULT"],
            [[n, "OK" if not c else KafkaRequestError(c, m).sentence()] for n, (c, m) in results.items()],
        )
    if any(c for c, _ in results.values()):
        click.get_current_context().exit(EXIT_KAFKA_ERROR)
