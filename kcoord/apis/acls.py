"""CreateAcls (key 30), DescribeAcls (key 29), DeleteAcls (key 31), v0-v3: the ACLs of
``__cluster_metadata``, as Kafka's AclApis and AclControlManager answer them.

Behaviour / version notes:
- with no authorizer (``authorizer.class.name`` empty) every answer is SECURITY_DISABLED, "No
  Authorizer is configured.", as Kafka's;
- DescribeAcls needs Describe on the cluster, CreateAcls and DeleteAcls need Alter on the
  cluster: CLUSTER_AUTHORIZATION_FAILED otherwise (per creation, per filter);
- CreateAcls validates each binding on its own (INVALID_REQUEST: an ANY/UNKNOWN/MATCH pattern,
  resource type, operation or permission, an empty name, a cluster resource not named
  ``kafka-cluster``, a principal not ``Type:name``); an ACL that exists already succeeds without
  being written twice;
- DescribeAcls and DeleteAcls filters: ANY and MATCH pattern types (MATCH: every ACL that applies
  to the named literal resource: the literal name, the wildcard ``*``, prefixes), null name,
  principal and host match anything; a filter with an UNKNOWN element is INVALID_REQUEST;
- v0 knows only literal patterns (the schema's pattern type default, LITERAL).
"""

from __future__ import annotations

from typing import Any

from kcoord.apis.authorization import Op, cluster_authorized
from kcoord.apis.context import RequestContext
from kcoord.apis.reply import reply_with
from kcoord.apis.services import Services
from kcoord.metadata.acls import AclBinding, AclBindingFilter
from kcoord.metadata.store import METADATA_KEY, AclCreateResult, AclDeleteResult
from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.messages import ApiKey, response_class

NO_AUTHORIZER = "No Authorizer is configured."

_CResp = response_class(ApiKey.CreateAcls)
_CResult = _CResp.AclCreationResult
_DResp = response_class(ApiKey.DescribeAcls)
_DResource = _DResp.DescribeAclsResource
_DAcl = _DResource.AclDescription
_XResp = response_class(ApiKey.DeleteAcls)
_XResult = _XResp.DeleteAclsFilterResult
_XMatch = _XResult.DeleteAclsMatchingAcl


def _filter(f: Any) -> AclBindingFilter:
    return AclBindingFilter.of(
        f.resource_type_filter,
        f.resource_name_filter,
        f.pattern_type_filter,
        f.principal_filter,
        f.host_filter,
        f.operation,
        f.permission_type,
    )


# --- DescribeAcls ---------------------------------------------------------------------------------
def handle_describe(services: Services, ctx: RequestContext, req: Any) -> Any:
    if services.authorizer is None:
        return describe_error_response(req, ctx.api_version, ErrorCode.SECURITY_DISABLED, NO_AUTHORIZER)
    if not cluster_authorized(services, ctx, Op.DESCRIBE):
        return describe_error_response(req, ctx.api_version, ErrorCode.CLUSTER_AUTHORIZATION_FAILED, None)
    acl_filter = _filter(req)
    problem = acl_filter.unknown()
    if problem is not None:
        return describe_error_response(req, ctx.api_version, ErrorCode.INVALID_REQUEST, problem)
    store = services.metadata.shards[0].state
    by_pattern: dict[tuple[int, str, int], list[Any]] = {}
    for acl in store.describe_acls(acl_filter):
        pattern = (int(acl.resource_type), acl.resource_name, int(acl.pattern_type))
        by_pattern.setdefault(pattern, []).append(
            _DAcl(
                principal=acl.principal,
                host=acl.host,
                operation=int(acl.operation),
                permission_type=int(acl.permission_type),
            )
        )
    resources = [
        _DResource(resource_type=t, resource_name=n, pattern_type=p, acls=acls)
        for (t, n, p), acls in sorted(by_pattern.items())
    ]
    return _DResp(throttle_time_ms=0, error_code=0, error_message=None, resources=resources)


def describe_error_response(req: Any, version: int, code: int, message: str | None) -> Any:
    return _DResp(throttle_time_ms=0, error_code=code, error_message=message, resources=[])


# --- CreateAcls -----------------------------------------------------------------------------------
def _create_response(results: list[AclCreateResult]) -> Any:
    return _CResp(
        throttle_time_ms=0,
        results=[_CResult(error_code=r.error_code, error_message=r.error_message) for r in results],
    )


def handle_create(services: Services, ctx: RequestContext, req: Any) -> Any:
    if services.authorizer is None:
        return create_error_response(req, ctx.api_version, ErrorCode.SECURITY_DISABLED, NO_AUTHORIZER)
    if not cluster_authorized(services, ctx, Op.ALTER):
        return create_error_response(req, ctx.api_version, ErrorCode.CLUSTER_AUTHORIZATION_FAILED, None)
    acls = [
        AclBinding.of(
            c.resource_type,
            c.resource_name,
            c.resource_pattern_type,
            c.principal,
            c.host,
            c.operation,
            c.permission_type,
        )
        for c in req.creations
    ]
    reply, respond = reply_with(_create_response)
    services.metadata.tell(METADATA_KEY, lambda store, now: store.create_acls(acls, respond, now))
    return reply


def create_error_response(req: Any, version: int, code: int, message: str | None) -> Any:
    return _create_response([AclCreateResult(code, message) for _ in req.creations])


# --- DeleteAcls -----------------------------------------------------------------------------------
def _delete_response(results: list[AclDeleteResult]) -> Any:
    return _XResp(
        throttle_time_ms=0,
        filter_results=[
            _XResult(
                error_code=r.error_code,
                error_message=r.error_message,
                matching_acls=[
                    _XMatch(
                        error_code=0,
                        error_message=None,
                        resource_type=int(acl.resource_type),
                        resource_name=acl.resource_name,
                        pattern_type=int(acl.pattern_type),
                        principal=acl.principal,
                        host=acl.host,
                        operation=int(acl.operation),
                        permission_type=int(acl.permission_type),
                    )
                    for acl in r.deleted
                ],
            )
            for r in results
        ],
    )


def handle_delete(services: Services, ctx: RequestContext, req: Any) -> Any:
    if services.authorizer is None:
        return delete_error_response(req, ctx.api_version, ErrorCode.SECURITY_DISABLED, NO_AUTHORIZER)
    if not cluster_authorized(services, ctx, Op.ALTER):
        return delete_error_response(req, ctx.api_version, ErrorCode.CLUSTER_AUTHORIZATION_FAILED, None)
    filters = [_filter(f) for f in req.filters]
    reply, respond = reply_with(_delete_response)
    services.metadata.tell(METADATA_KEY, lambda store, now: store.delete_acls(filters, respond, now))
    return reply


def delete_error_response(req: Any, version: int, code: int, message: str | None) -> Any:
    return _delete_response([AclDeleteResult(code, message) for _ in req.filters])
