"""The web console: server-rendered HTML pages of the operations endpoint.

Pages (GET): ``/`` the overview (topics, groups by type and state, the broker's health),
``/groups/<id>`` a group (members, offsets and lag, the offset history chart, share-partition
states), ``/groups/<id>/history`` its offset history with "rewind to here", ``/topics/<name>``
a topic (partitions, configs, latest records); ``/static/`` the stylesheet and htmx, shipped in
the package (no CDN: the console works where the broker cannot reach the internet).

Pages read state as :mod:`kcoord.http.views` does, between operations on the broker's loop, and
change nothing. The one action, rewinding a group's offsets (``POST /groups/<id>/rewind``),
goes through the offset history API's own functions (:mod:`kcoord.http.history_client`, in
process: the same answers, refusals included, as ``/api/``) and is accepted from
htmx only: a request must carry the ``HX-Request`` header, which a cross-site form cannot set
without a CORS preflight this server never grants. Jinja2 escapes everything the pages show.
"""

from __future__ import annotations

import datetime as dt
import shutil
from collections import Counter
from collections.abc import Callable
from importlib import resources
from typing import Any
from urllib.parse import quote, unquote

from aiohttp import web
from jinja2 import Environment, PackageLoader, StrictUndefined

from kcoord.apis.services import Services
from kcoord.http import chart, records, views
from kcoord.http.history_client import Answer, HistoryApi

STATIC = {"htmx.min.js": "text/javascript", "console.css": "text/css"}
GROUP_TYPES = ("classic", "consumer", "share")
LATEST_RECORDS = 10


def _ms(value: int | None) -> str:
    if value is None or value < 0:
        return "-"
    return dt.datetime.fromtimestamp(value / 1000, dt.UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + " UTC"


def _size(n: int | None) -> str:
    if n is None:
        return "-"
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    raise AssertionError("unreachable")


def _duration(ms: int) -> str:
    s = max(0, ms // 1000)
    d, s = divmod(s, 86400)
    h, s = divmod(s, 3600)
    m, s = divmod(s, 60)
    return (f"{d}d " if d else "") + f"{h:02}:{m:02}:{s:02}"


def environment() -> Environment:
    env = Environment(
        loader=PackageLoader("kcoord.http", "templates"),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(ms=_ms, size=_size, q=lambda s: quote(str(s), safe=""))
    return env


class Console:
    """Routes console paths to pages; ``status`` is the broker's readiness, as /health reports."""

    def __init__(self, services: Services, status: Callable[[], str]) -> None:
        self.services = services
        self.status = status
        self.started_ms = services.clock.now_ms()
        self.env = environment()

    async def handle(self, request: web.BaseRequest) -> web.StreamResponse | None:
        """The console's answer, None for a path that is not the console's."""
        parts = [unquote(p) for p in request.raw_path.partition("?")[0].strip("/").split("/")]
        method = "GET" if request.method == "HEAD" else request.method
        match method, parts:
            case "GET", [""]:
                return self.page("overview.html", self.overview())
            case "GET", ["static", name] if name in STATIC:
                body = resources.files("kcoord.http").joinpath("static", name).read_bytes()
                return web.Response(
                    body=body, content_type=STATIC[name], headers={"Cache-Control": "max-age=3600"}
                )
            case "GET", ["groups", group]:
                return await self.group(request, group)
            case "GET", ["groups", group, "history"]:
                return await self.history(request, group)
            case "POST", ["groups", group, "rewind"]:
                return await self.rewind(request, group)
            case "GET", ["topics", name]:
                return self.topic(request, name)
        return None

    def page(self, template: str, context: dict[str, Any], status: int = 200) -> web.Response:
        html = self.env.get_template(template).render(**context)
        return web.Response(text=html, status=status, content_type="text/html")

    def not_found(self, what: str) -> web.Response:
        return self.page("not_found.html", {"title": "Not found", "what": what}, 404)

    # --- pages ------------------------------------------------------------------------------
    def overview(self) -> dict[str, Any]:
        topics = views.topics(self.services)
        groups = list(views.groups(self.services))
        by_state = Counter((g.type, g.state) for g in groups)
        config = self.services.config
        try:
            disk = shutil.disk_usage(config.data_dir)
        except OSError:
            disk = None
        cluster = self.services.cluster
        return {
            "title": "Overview",
            "status": self.status(),
            "node_id": cluster.node_id,
            "cluster_id": cluster.cluster_id,
            "uptime": _duration(self.services.clock.now_ms() - self.started_ms),
            "started_ms": self.started_ms,
            "log_dir": str(config.data_dir),
            "log_bytes": sum(p.log.size_bytes for p in self.services.partitions.all_partitions()),
            "disk": disk,
            "topics": [t for t in topics if not t["internal"]],
            "internal_topics": [t for t in topics if t["internal"]],
            "groups": groups,
            "group_types": {t: sum(n for (k, _), n in by_state.items() if k == t) for t in GROUP_TYPES},
            "group_states": sorted(by_state.items()),
        }

    async def group(self, request: web.BaseRequest, group_id: str) -> web.Response:
        view = views.group(self.services, group_id)
        if view is None:
            return self.not_found(f"group {group_id}")
        rows = self._offset_rows(view)
        context: dict[str, Any] = {
            "title": f"Group {group_id}",
            "group": view,
            "rows": rows,
            "share_partitions": views.share_partitions(self.services, group_id),
            "chart": None,
            "history": None,
        }
        if view.type != "share":  # share groups keep start offsets, not committed offsets
            answer = await HistoryApi(self.services).history(group_id)
            context["history"] = answer
            if answer.ok:
                ends = {(r["topic"], r["partition"]): r["log_end"] for r in rows}
                context["chart"] = chart.history_chart(
                    answer.body.get("changes", []), ends, self.services.clock.now_ms()
                )
        return self.page("group.html", context)

    def _offset_rows(self, view: views.GroupView) -> list[dict[str, Any]]:
        """Per partition: committed offset (None if none), log end, lag, and the member it is
        assigned to, as kafka-consumer-groups.sh --describe lists them."""
        owners: dict[tuple[str, int], dict[str, Any]] = {}
        for m in view.members:
            for topic, parts in m.get("assignment", {}).items():
                for p in parts:
                    owners[(topic, p)] = m
        rows: dict[tuple[str, int], dict[str, Any]] = {}
        for o in view.offsets:
            rows[(o.topic, o.partition)] = {"offset": o.offset, "log_end": o.high_watermark, "lag": o.lag}
        if view.type != "share":
            for topic, p in owners:
                part = self.services.partitions.partition(topic, p)
                if (topic, p) not in rows and part is not None:
                    rows[(topic, p)] = {"offset": None, "log_end": part.high_watermark, "lag": None}
        return [
            {"topic": t, "partition": p, **row, "member": owners.get((t, p))}
            for (t, p), row in sorted(rows.items())
        ]

    async def history(self, request: web.BaseRequest, group_id: str) -> web.Response:
        topic = request.query.get("topic") or None
        since = request.query.get("since") or None
        answer = await HistoryApi(self.services).history(group_id, topic, since)
        if answer.error == "GROUP_ID_NOT_FOUND":
            return self.not_found(f"group {group_id}")
        changes = list(reversed(answer.body.get("changes", []))) if answer.ok else []
        return self.page(
            "history.html",
            {
                "title": f"Offset history of {group_id}",
                "group_id": group_id,
                "answer": answer,
                "changes": changes,
                "topic": topic or "",
                "since": since or "",
            },
        )

    async def rewind(self, request: web.BaseRequest, group_id: str) -> web.Response:
        if request.headers.get("HX-Request") != "true":
            return web.Response(status=403, text="the rewind action is only accepted from the console page")
        form = await request.post()
        to_commit_at = str(form.get("to_commit_at", ""))
        execute = form.get("execute") == "true"
        answer: Answer = await HistoryApi(self.services).reset_offsets(group_id, to_commit_at, execute)
        return self.page(
            "_rewind.html", {"group_id": group_id, "answer": answer, "to_commit_at": to_commit_at}
        )

    def topic(self, request: web.BaseRequest, name: str) -> web.Response:
        topic = next((t for t in views.topics(self.services) if t["name"] == name), None)
        found = self.services.partitions.get(name)
        if topic is None or found is None:
            return self.not_found(f"topic {name}")
        try:
            count = min(max(int(request.query.get("records", LATEST_RECORDS)), 0), 500)
        except ValueError:
            count = LATEST_RECORDS
        latest = {p.index: records.latest(p, count) for p in found.partitions}
        return self.page(
            "topic.html", {"title": f"Topic {name}", "topic": topic, "latest": latest, "count": count}
        )
