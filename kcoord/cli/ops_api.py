"""The client of kcoord's operations endpoint, for what the Kafka protocol has no request for.

Offset history lives in the broker's ``__consumer_offsets`` log, which no Kafka API reads back,
so ``kcoord groups history`` and ``reset-offsets --to-commit-at`` ask the broker's HTTP API
(``http.listeners``) instead of speaking Kafka. Plain ``urllib``: one request per command, no
broker import. An error the API answers (``{"error": NAME, "message"}``) becomes the Kafka
error of that name, so the commands report it and exit as for any Kafka error.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

import click

from kcoord.cli.admin import BrokerUnreachable, KafkaRequestError
from kcoord.protocol.errors import ErrorCode

DEFAULT_HTTP_SERVER = "http://127.0.0.1:9644"
TIMEOUT_S = 300.0  # the broker scans the group's coordinator log: a big log takes a while


def http_server_option(func: Any) -> Any:
    return click.option(
        "--http-server",
        "http_server",
        default=DEFAULT_HTTP_SERVER,
        show_default=True,
        envvar="KCOORD_HTTP_SERVER",
        show_envvar=True,
        metavar="URL",
        help="kcoord's HTTP endpoint (http.listeners): offset history is not in the Kafka protocol.",
    )(func)


class OpsApi:
    def __init__(self, base_url: str) -> None:
        self.base = base_url.rstrip("/")

    def group_path(self, group_id: str, action: str) -> str:
        return f"/api/groups/{urllib.parse.quote(group_id, safe='')}/{action}"

    def get(self, path: str, query: dict[str, Any], subject: str) -> Any:
        params = urllib.parse.urlencode({k: v for k, v in query.items() if v is not None})
        return self._send(
            urllib.request.Request(self.base + path + (f"?{params}" if params else "")), subject
        )

    def post(self, path: str, body: dict[str, Any], subject: str) -> Any:
        req = urllib.request.Request(
            self.base + path,
            data=json.dumps(body).encode(),
            method="POST",
            headers={"Content-Type": "application/json"},
        )
        return self._send(req, subject)

    def _send(self, req: urllib.request.Request, subject: str) -> Any:
        try:
            with urllib.request.urlopen(req, timeout=TIMEOUT_S) as r:
                return json.loads(r.read())
        except urllib.error.HTTPError as e:
            raise _api_error(e, subject) from None
        except (urllib.error.URLError, OSError) as e:
            raise BrokerUnreachable(f"no kcoord HTTP endpoint answered at {self.base}: {e}") from None


def _api_error(e: urllib.error.HTTPError, subject: str) -> Exception:
    try:
        doc = json.loads(e.read())
        name, message = str(doc["error"]), str(doc.get("message", ""))
    except (ValueError, KeyError, TypeError):
        return BrokerUnreachable(f"{e.url} answered HTTP {e.code} (is this kcoord's HTTP endpoint?)")
    try:
        return KafkaRequestError(int(ErrorCode[name]), message, subject)
    except KeyError:
        return BrokerUnreachable(f"{e.url} answered HTTP {e.code}: {name}: {message}")
