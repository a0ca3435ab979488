"""InitProducerId (key 22), v0-v5.

Behaviour / version notes:
- without a transactional id every request gets a fresh producer id at epoch 0 (as Kafka's
  TransactionCoordinator does for idempotent producers, also when v3+ passes the current
  id/epoch after a sequence error);
- with one, the transaction coordinator (kcoord/transaction/coordinator.py) bumps the id's epoch,
  fencing the producer that had it: an ongoing transaction is aborted first and the request
  answered CONCURRENT_TRANSACTIONS (the client retries), as while a transaction's markers are
  being written; v3+ may name the producer id and epoch it had (KIP-360), PRODUCER_FENCED when
  another producer has taken over since;
- an empty transactional id is INVALID_REQUEST, a timeout above transaction.max.timeout.ms (or
  not positive) INVALID_TRANSACTION_TIMEOUT, a producer id without an epoch (or the other way
  round) INVALID_REQUEST;
- v6 (KIP-939 two-phase commit) is not served (SKIPPED.md).
"""

from __future__ import annotations

from typing import Any

from kcoord.apis.authorization import (
    TRANSACTIONAL_ID,
    Op,
    any_topic_authorized,
    cluster_authorized,
    require,
)
from kcoord.apis.context import RequestContext
from kcoord.apis.reply import reply_with
from kcoord.apis.services import Services
from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.messages import ApiKey, response_class
from kcoord.transaction.coordinator import ProducerIdAndEpoch

_Resp = response_class(ApiKey.InitProducerId)


def _error(code: int) -> Any:
    return _Resp(throttle_time_ms=0, error_code=code, producer_id=-1, producer_epoch=-1)


def handle(services: Services, ctx: RequestContext, req: Any) -> Any:
    tid = req.transactional_id
    if tid is not None:
        require(services, ctx, Op.WRITE, TRANSACTIONAL_ID, tid)
    elif not (
        cluster_authorized(services, ctx, Op.IDEMPOTENT_WRITE)
        or any_topic_authorized(services, ctx, Op.WRITE)
    ):
        # Kafka's InitProducerId for an idempotent producer: IdempotentWrite on the cluster, or
        # Write on some topic.
        return _error(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    if tid is None:
        return _Resp(
            throttle_time_ms=0, error_code=0, producer_id=services.producer_ids.next_id(), producer_epoch=0
        )
    if tid == "":
        return _error(ErrorCode.INVALID_REQUEST)
    timeout = req.transaction_timeout_ms
    if not 0 < timeout <= services.config.transaction_max_timeout_ms:
        return _error(ErrorCode.INVALID_TRANSACTION_TIMEOUT)
    expected: tuple[int, int] | None = None
    if ctx.api_version >= 3:
        pid, epoch = req.producer_id, req.producer_epoch
        if (pid == -1) != (epoch == -1):
            return _error(ErrorCode.INVALID_REQUEST)
        if pid != -1:
            expected = (pid, epoch)

    def build(result: ProducerIdAndEpoch) -> Any:
        return _Resp(
            throttle_time_ms=0,
            error_code=result.error,
            producer_id=result.producer_id,
            producer_epoch=result.producer_epoch,
        )

    reply, respond = reply_with(build)
    services.transactions.tell(
        tid, lambda store, now: store.init_producer_id(tid, timeout, expected, respond, now)
    )
    return reply


def error_response(req: Any, version: int, code: int, message: str | None) -> Any:
    return _error(code)
