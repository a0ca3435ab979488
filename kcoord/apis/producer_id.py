"""InitProducerId (key 22), v0-v5, for idempotent producers.

Behaviour / version notes:
- without a transactional id every request gets a fresh producer id at epoch 0 (as Kafka's
  TransactionCoordinator does for idempotent producers, also when v3+ passes the current
  id/epoch after a sequence error);
- kcoord has no transaction coordinator: a transactional id gets INVALID_REQUEST at once
  (COORDINATOR_NOT_AVAILABLE would make clients retry forever), see SKIPPED.md; v6 (KIP-939
  two-phase commit) is not served for the same reason.
"""

from __future__ import annotations

from typing import Any

from kcoord.apis.context import RequestContext
from kcoord.apis.services import Services
from kcoord.protocol.errors import ErrorCode, KafkaError
from kcoord.protocol.messages import ApiKey, response_class

_Resp = response_class(ApiKey.InitProducerId)


def handle(services: Services, ctx: RequestContext, req: Any) -> Any:
    if req.transactional_id is not None:
        raise KafkaError(ErrorCode.INVALID_REQUEST, "kcoord does not implement transactions")
    return _Resp(
        throttle_time_ms=0, error_code=0, producer_id=services.producer_ids.next_id(), producer_epoch=0
    )


def error_response(req: Any, version: int, code: int, message: str | None) -> Any:
    return _Resp(throttle_time_ms=0, error_code=code, producer_id=-1, producer_epoch=-1)
