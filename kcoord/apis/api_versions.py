"""ApiVersions (key 18).

Behaviour / version notes:
- generated from the version table: a version is listed exactly when it is dispatched;
- a request above v4 is answered by the dispatcher with UNSUPPORTED_VERSION in a v0 body;
- v3+ checks ClientSoftwareName/Version against Kafka's pattern (INVALID_REQUEST otherwise);
- features are not advertised: no tagged field is emitted, because default-valued tagged fields
  break older librdkafka (kcat) and kcoord has no feature-gated behaviour to announce.
"""

from __future__ import annotations

import re
from typing import Any

from kcoord.apis.context import RequestContext
from kcoord.apis.services import Services
from kcoord.protocol.errors import ErrorCode

_SOFTWARE = re.compile(r"^[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?$")


def handle(services: Services, ctx: RequestContext, req: Any) -> Any:
    resp = services.api_versions()
    if ctx.api_version >= 3 and not (
        _SOFTWARE.match(req.client_software_name or "") and _SOFTWARE.match(req.client_software_version or "")
    ):
        resp.error_code = ErrorCode.INVALID_REQUEST
        resp.api_keys = []
    return resp


def error_response(req: Any, version: int, code: int, message: str | None) -> Any:
    from kcoord.protocol.messages import ApiKey, response_class

    return response_class(ApiKey.ApiVersions)(error_code=code, api_keys=[], throttle_time_ms=0)
