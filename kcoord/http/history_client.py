"""The console's client of the offset history JSON API, on the endpoint the page came in on.

The console shows and rewinds offset history through the API's routes
(``/api/groups/<g>/history``, ``POST /api/groups/<g>/reset-offsets``) rather than beside them,
so that the pages and any other client get the same answers, refusals included. It calls them
over HTTP on the address the console's own request arrived at (the same server, on the same event
loop): the API is a contract of JSON documents, not of Python functions.

A build without those routes answers them as an unknown group (404 without GROUP_ID_NOT_FOUND):
:attr:`Answer.unavailable` tells the pages so.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import aiohttp
from aiohttp import web

TIMEOUT = aiohttp.ClientTimeout(total=30)


@dataclass(frozen=True)
class Answer:
    status: int
    body: dict[str, Any]

    @property
    def ok(self) -> bool:
        return self.status == 200

    @property
    def error(self) -> str | None:
        return None if self.ok else str(self.body.get("error", self.status))

    @property
    def message(self) -> str:
        return str(self.body.get("message", ""))

    @property
    def unavailable(self) -> bool:
        """The route is not served by this build (the API names a missing group explicitly)."""
        return self.status in (404, 405) and self.error not in ("GROUP_ID_NOT_FOUND",)


class HistoryApi:
    def __init__(self, base_url: str) -> None:
        self.base_url = base_url

    @classmethod
    def for_request(cls, request: web.BaseRequest) -> HistoryApi:
        """The API on the socket address ``request`` came in on (a bound listener of this server)."""
        sockname = request.transport.get_extra_info("sockname") if request.transport else None
        if not sockname:
            raise RuntimeError("the request's local address is unknown")
        host, port = sockname[0], sockname[1]
        return cls(f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}")

    def _url(self, group: str, action: str) -> str:
        return f"{self.base_url}/api/groups/{quote(group, safe='')}/{action}"

    async def _call(self, method: str, url: str, **kwargs: Any) -> Answer:
        async with (
            aiohttp.ClientSession(timeout=TIMEOUT) as session,
            session.request(method, url, **kwargs) as r,
        ):
            try:
                body = await r.json(content_type=None)
            except ValueError:
                body = {"error": f"HTTP {r.status}", "message": (await r.text())[:500]}
            return Answer(r.status, body if isinstance(body, dict) else {"error": "unexpected answer"})

    async def history(self, group: str, topic: str | None = None, since: str | None = None) -> Answer:
        params = {k: v for k, v in (("topic", topic), ("since", since)) if v}
        return await self._call("GET", self._url(group, "history"), params=params)

    async def reset_offsets(self, group: str, to_commit_at: int | str, execute: bool) -> Answer:
        body = {"to_commit_at": to_commit_at, "execute": execute}
        return await self._call("POST", self._url(group, "reset-offsets"), json=body)
