"""DescribeCluster (key 60), v0-v2.

Behaviour / version notes:
- this broker is the whole cluster and its controller id (as Metadata says); the address is
  the advertised one of the listener the request came in on;
- EndpointType (v1+) 1 = brokers; 2 (controllers) is UNSUPPORTED_ENDPOINT_TYPE, since kcoord has
  no separate controller listener; IncludeFencedBrokers (v2+) changes nothing: never fenced;
- cluster authorized operations: no authorizer, everything is allowed.
"""

from __future__ import annotations

from typing import Any

from kcoord.apis.authorization import CLUSTER, Op, authorized_operations, cluster_authorized
from kcoord.apis.context import RequestContext
from kcoord.apis.services import Services
from kcoord.metadata.acls import CLUSTER_NAME
from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.messages import ApiKey, response_class

ENDPOINT_BROKERS = 1

_Resp = response_class(ApiKey.DescribeCluster)
_Broker = _Resp.DescribeClusterBroker


def handle_describe_cluster(services: Services, ctx: RequestContext, req: Any) -> Any:
    v = ctx.api_version
    endpoint_type = req.endpoint_type if v >= 1 else ENDPOINT_BROKERS
    if endpoint_type != ENDPOINT_BROKERS:
        return describe_cluster_error_response(
            req, v, ErrorCode.UNSUPPORTED_ENDPOINT_TYPE, "kcoord has no controller endpoints"
        )
    ep = services.cluster.advertised(ctx.listener)
    return _Resp(
        throttle_time_ms=0,
        error_code=0,
        error_message=None,
        endpoint_type=ENDPOINT_BROKERS,
        cluster_id=services.cluster.cluster_id,
        controller_id=services.cluster.node_id,
        brokers=[
            _Broker(
                broker_id=services.cluster.node_id, host=ep.host, port=ep.port, rack=None, is_fenced=False
            )
        ],
        authorized_operations=_cluster_operations(services, ctx)
        if req.include_cluster_authorized_operations
        else None,
    )


def _cluster_operations(services: Services, ctx: RequestContext) -> set[int]:
    """Kafka's DescribeCluster: the principal's operations on the cluster, none without Describe."""
    if not cluster_authorized(services, ctx, Op.DESCRIBE):
        return set()
    return authorized_operations(services, ctx, CLUSTER, CLUSTER_NAME)


def describe_cluster_error_response(req: Any, version: int, code: int, message: str | None) -> Any:
    return _Resp(
        throttle_time_ms=0,
        error_code=code,
        error_message=message,
        endpoint_type=req.endpoint_type if version >= 1 else ENDPOINT_BROKERS,
        cluster_id="",
        controller_id=-1,
        brokers=[],
        authorized_operations=None,
    )
