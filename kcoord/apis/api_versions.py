"""ApiVersions (key 18).

Behaviour / version notes:
- generated from the version table: a version is listed exactly when it is dispatched;
- a request above v4 is answered by the dispatcher with UNSUPPORTED_VERSION in a v0 body;
- v3+ checks ClientSoftwareName/Version against Kafka's pattern (INVALID_REQUEST otherwise);
- v3+ advertises the features kcoord runs at (KIP-584), as Kafka 4 does in tags 0-2: only
  transaction.version, finalized at 1 (transactions with KIP-890 part 1, so that clients stay
  below EndTxn/TxnOffsetCommit v5); no default-valued tag is written (ZkMigrationReady), which
  older librdkafka (kcat) would not expect.
"""

from __future__ import annotations

import re
from typing import Any

from kcoord.apis.context import RequestContext
from kcoord.apis.services import Services
from kcoord.protocol.errors import ErrorCode

_SOFTWARE = re.compile(r"^[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?$")


def handle(services: Services, ctx: RequestContext, req: Any) -> Any:
    if ctx.api_version >= 3 and not (
        _SOFTWARE.match(req.client_software_name or "") and _SOFTWARE.match(req.client_software_version or "")
    ):
        # Kafka's ApiVersionsRequest.getErrorResponse: the error alone, no versions or features.
        return error_response(req, ctx.api_version, ErrorCode.INVALID_REQUEST, None)
    return services.api_versions()


def error_response(req: Any, version: int, code: int, message: str | None) -> Any:
    from kcoord.protocol.messages import ApiKey, response_class

    return response_class(ApiKey.ApiVersions)(error_code=code, api_keys=[], throttle_time_ms=0)
