"""What each request needs the authorizer to allow, in one place: the helpers every handler
calls before acting, with Kafka's operation on Kafka's resource (KafkaApis' authHelper calls).

With no authorizer configured everything is allowed and the bitfields report every operation a
resource type supports (as ``acl_operations`` did before ACLs). With one, a check asks
``StandardAuthorizer.authorize`` for the request's principal and peer host.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from kcoord.apis.acl_operations import CLUSTER_OPERATIONS, GROUP_OPERATIONS, TOPIC_OPERATIONS
from kcoord.apis.context import RequestContext
from kcoord.apis.services import Services
from kcoord.metadata.acls import CLUSTER_NAME, AclOperation, ResourceType
from kcoord.protocol.errors import ErrorCode, KafkaError

Op = AclOperation
# Final: compiled, a plain global is a dict lookup at every use (one or two per request).
TOPIC: Final = ResourceType.TOPIC
GROUP: Final = ResourceType.GROUP
CLUSTER: Final = ResourceType.CLUSTER
TRANSACTIONAL_ID = ResourceType.TRANSACTIONAL_ID

# The operations each resource type supports, reported in the authorized-operations bitfields.
SUPPORTED_OPERATIONS: dict[ResourceType, frozenset[int]] = {
    TOPIC: frozenset(TOPIC_OPERATIONS),
    GROUP: frozenset(GROUP_OPERATIONS),
    CLUSTER: frozenset(CLUSTER_OPERATIONS),
}


def authorized(
    services: Services, ctx: RequestContext, operation: AclOperation, resource_type: ResourceType, name: str
) -> bool:
    authorizer = services.authorizer
    if authorizer is None:
        return True
    return authorizer.authorize(ctx.principal, ctx.client_host, operation, resource_type, name)


def cluster_authorized(services: Services, ctx: RequestContext, operation: AclOperation) -> bool:
    return authorized(services, ctx, operation, CLUSTER, CLUSTER_NAME)


def topic_authorized(services: Services, ctx: RequestContext, operation: AclOperation, topic: str) -> bool:
    return authorized(services, ctx, operation, TOPIC, topic)


def group_authorized(services: Services, ctx: RequestContext, operation: AclOperation, group: str) -> bool:
    return authorized(services, ctx, operation, GROUP, group)


def transactional_id_authorized(
    services: Services, ctx: RequestContext, operation: AclOperation, transactional_id: str
) -> bool:
    return authorized(services, ctx, operation, TRANSACTIONAL_ID, transactional_id)


def authorized_topics(
    services: Services, ctx: RequestContext, operation: AclOperation, topics: Iterable[str]
) -> set[str]:
    """The topics of ``topics`` the principal may ``operation`` (Kafka's filterByAuthorized)."""
    authorizer = services.authorizer
    if authorizer is None:
        return set(topics)
    principal, host = ctx.principal, ctx.client_host
    return {t for t in topics if authorizer.authorize(principal, host, operation, TOPIC, t)}


def any_topic_authorized(services: Services, ctx: RequestContext, operation: AclOperation) -> bool:
    """Whether some topic may be ``operation``-ed (Kafka's authorizeByResourceType)."""
    authorizer = services.authorizer
    if authorizer is None:
        return True
    return authorizer.authorize_any(ctx.principal, ctx.client_host, operation, TOPIC)


def authorized_operations(
    services: Services, ctx: RequestContext, resource_type: ResourceType, name: str
) -> set[int]:
    """The operations of the ``include_*_authorized_operations`` bitfields: each one the
    resource type supports that the principal may perform on the resource (Kafka's
    authorizedOperations)."""
    supported = SUPPORTED_OPERATIONS[resource_type]
    authorizer = services.authorizer
    if authorizer is None:
        return set(supported)
    principal, host = ctx.principal, ctx.client_host
    return {
        op for op in supported if authorizer.authorize(principal, host, AclOperation(op), resource_type, name)
    }


# The error a denied operation on each resource type is answered with.
DENIED: dict[ResourceType, ErrorCode] = {
    TOPIC: ErrorCode.TOPIC_AUTHORIZATION_FAILED,
    GROUP: ErrorCode.GROUP_AUTHORIZATION_FAILED,
    CLUSTER: ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
    TRANSACTIONAL_ID: ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
}


def require(
    services: Services, ctx: RequestContext, operation: AclOperation, resource_type: ResourceType, name: str
) -> None:
    """Answer the whole request with the resource type's authorization error (through the API's
    error response) unless ``operation`` is allowed."""
    if not authorized(services, ctx, operation, resource_type, name):
        raise KafkaError(DENIED[resource_type])


def require_cluster(services: Services, ctx: RequestContext, operation: AclOperation) -> None:
    require(services, ctx, operation, CLUSTER, CLUSTER_NAME)


# Config resource types (DescribeConfigs, AlterConfigs): the ACL resource that guards each.
_CONFIG_RESOURCE_TOPIC: Final = 2
_CONFIG_RESOURCE_GROUP: Final = 32


def config_resource_error(
    services: Services, ctx: RequestContext, operation: AclOperation, config_type: int, name: str
) -> int:
    """0, or the error for ``operation`` (DescribeConfigs / AlterConfigs) on a config resource:
    a topic's or a group's own, the cluster's for the broker, its loggers and client metrics
    (Kafka's ConfigAdminManager / AuthHelper)."""
    if config_type == _CONFIG_RESOURCE_TOPIC:
        resource, resource_name = TOPIC, name
    elif config_type == _CONFIG_RESOURCE_GROUP:
        resource, resource_name = GROUP, name
    else:
        resource, resource_name = CLUSTER, CLUSTER_NAME
    return 0 if authorized(services, ctx, operation, resource, resource_name) else DENIED[resource]
