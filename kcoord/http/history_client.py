"""The console's access to the offset history: the functions the history JSON API answers with
(:mod:`kcoord.http.history`), called in-process, so that the pages and any other client of the API
get the same answers, refusals included, without an HTTP round trip to this same server.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kcoord.apis.services import Services
from kcoord.http import history


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


class HistoryApi:
    def __init__(self, services: Services) -> None:
        self.services = services

    async def history(self, group: str, topic: str | None = None, since: str | None = None) -> Answer:
        query = {k: v for k, v in (("topic", topic), ("since", since)) if v}
        return await self._answer(history.history(self.services, group, query))

    async def reset_offsets(self, group: str, to_commit_at: int | str, execute: bool) -> Answer:
        body = {"to_commit_at": to_commit_at, "execute": execute}
        return await self._answer(history.reset_offsets(self.services, group, body))

    @staticmethod
    async def _answer(call: Any) -> Answer:
        try:
            status, body = await call
        except history.BadRequest as e:  # as the API answers it (history.handle)
            return Answer(400, {"error": "INVALID_REQUEST", "message": str(e)})
        return Answer(status, body)
