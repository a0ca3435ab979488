"""What each request needs the authorizer to allow, in one place: the helpers every handler
calls before acting, with Kafka's operation on Kafka's resource (KafkaApis' authHelper calls).

With no authorizer configured everything is allowed and the bitfields report every operation a
resource type supports (as ``acl_operations`` did before ACLs). With one, a check asks
``StandardAuthorizer.authorize`` for the request's principal and peer host.
"""

from __future__ import annotations

from collections.abc import Iterable

from kcoord.apis.acl_operations import CLUSTER_OPERATIONS, GROUP_OPERATIONS, TOPIC_OPERATIONS, bitfield
from kcoord.apis.context import RequestContext
from kcoord.apis.services import Services
from kcoord.metadata.acls import CLUSTER_NAME, AclOperation, ResourceType

Op = AclOperation
TOPIC = ResourceType.TOPIC
GROUP = ResourceType.GROUP
CLUSTER = ResourceType.CLUSTER
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
) -> int:
    """The ``include_*_authorized_operations`` bitfield: each supported operation the principal
    may perform on the resource (Kafka's authorizedOperations)."""
    supported = SUPPORTED_OPERATIONS[resource_type]
    authorizer = services.authorizer
    if authorizer is None:
        return bitfield(set(supported))
    principal, host = ctx.principal, ctx.client_host
    return bitfield(
        {
            op
            for op in supported
            if authorizer.authorize(principal, host, AclOperation(op), resource_type, name)
        }
    )
