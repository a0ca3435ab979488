"""FindCoordinator (10, v0-v6): where each coordinator of a key is.

Behaviour / version notes:
- key types GROUP and TRANSACTION answer with this broker (batched keys from v4): it runs the
  group and the transaction coordinator; SHARE keys are INVALID_REQUEST (share state lives in the
  group coordinator here, and only brokers look for it).
"""

from __future__ import annotations

from typing import Any

from kcoord.apis.authorization import DENIED, GROUP, TRANSACTIONAL_ID, Op, authorized
from kcoord.apis.context import RequestContext
from kcoord.apis.services import Services
from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.messages import ApiKey, response_class

KEY_TYPE_GROUP = 0
KEY_TYPE_TRANSACTION = 1

_FResp = response_class(ApiKey.FindCoordinator)


def handle_find_coordinator(services: Services, ctx: RequestContext, req: Any) -> Any:
    v = ctx.api_version
    ep = services.cluster.advertised(ctx.listener)
    key_type = req.key_type if v >= 1 else KEY_TYPE_GROUP
    if key_type in (KEY_TYPE_GROUP, KEY_TYPE_TRANSACTION):
        error, message, node, host, port = 0, None, services.cluster.node_id, ep.host, ep.port
        # Kafka's FindCoordinator: Describe on the group or the transactional id, per key.
        resource = GROUP if key_type == KEY_TYPE_GROUP else TRANSACTIONAL_ID
        if v < 4 and not authorized(services, ctx, Op.DESCRIBE, resource, req.key):
            return find_coordinator_error_response(req, v, DENIED[resource], None)
        if v >= 4:
            denied = [
                k for k in req.coordinator_keys if not authorized(services, ctx, Op.DESCRIBE, resource, k)
            ]
            if denied:
                return _FResp(
                    throttle_time_ms=0,
                    coordinators=[
                        _FResp.Coordinator(key=k, node_id=node, host=host, port=port, error_code=0)
                        if k not in denied
                        else _FResp.Coordinator(
                            key=k,
                            node_id=-1,
                            host="",
                            port=-1,
                            error_code=DENIED[resource],
                            error_message=None,
                        )
                        for k in req.coordinator_keys
                    ],
                )
    else:
        error, message, node, host, port = (
            ErrorCode.INVALID_REQUEST,
            f"kcoord has no coordinator for key type {key_type}",
            -1,
            "",
            -1,
        )
    if v < 4:
        return _FResp(
            throttle_time_ms=0,
            error_code=error,
            error_message=message if error else None,
            node_id=node,
            host=host,
            port=port,
        )
    return _FResp(
        throttle_time_ms=0,
        coordinators=[
            _FResp.Coordinator(
                key=k, node_id=node, host=host, port=port, error_code=error, error_message=message
            )
            for k in req.coordinator_keys
        ],
    )


def find_coordinator_error_response(req: Any, version: int, code: int, message: str | None) -> Any:
    if version < 4:
        return _FResp(
            throttle_time_ms=0, error_code=code, error_message=message, node_id=-1, host="", port=-1
        )
    return _FResp(
        throttle_time_ms=0,
        coordinators=[
            _FResp.Coordinator(key=k, node_id=-1, host="", port=-1, error_code=code, error_message=message)
            for k in req.coordinator_keys
        ],
    )
