"""DescribeUserScramCredentials (key 50) and AlterUserScramCredentials (key 51), v0: SCRAM
credentials in ``__cluster_metadata``, as Kafka's KafkaApis and ScramControlManager answer them.

Behaviour / version notes:
- Describe needs Describe on the cluster, Alter needs Alter on the cluster; without it every
  user is answered CLUSTER_AUTHORIZATION_FAILED (Describe: the top-level error).
- Describe with no users (null or empty) lists every user with a credential; a user named twice
  is DUPLICATE_RESOURCE, a user without any credential RESOURCE_NOT_FOUND.
- Alter: a user named twice in the deletions and upsertions together is DUPLICATE_RESOURCE; an
  empty user name or too few/many iterations (4096..16384) UNACCEPTABLE_CREDENTIAL; a mechanism
  other than SCRAM-SHA-256 (1) or SCRAM-SHA-512 (2) UNSUPPORTED_SASL_MECHANISM; deleting a
  credential that does not exist RESOURCE_NOT_FOUND. What passes is written atomically and
  answered once durable. The broker keeps the salt, StoredKey, ServerKey and iterations computed
  from the client's salted password, never the salted password.
"""

from __future__ import annotations

from typing import Any

from kcoord.apis.authorization import Op, cluster_authorized
from kcoord.apis.context import RequestContext
from kcoord.apis.reply import reply_with
from kcoord.apis.services import Services
from kcoord.metadata.store import METADATA_KEY, ScramUpsertion, UserResult
from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.messages import ApiKey, response_class

_DResp = response_class(ApiKey.DescribeUserScramCredentials)
_DResult = _DResp.DescribeUserScramCredentialsResult
_Info = _DResult.CredentialInfo
_AResp = response_class(ApiKey.AlterUserScramCredentials)
_AResult = _AResp.AlterUserScramCredentialsResult


def handle_describe(services: Services, ctx: RequestContext, req: Any) -> Any:
    if not cluster_authorized(services, ctx, Op.DESCRIBE):
        return describe_error_response(req, ctx.api_version, ErrorCode.CLUSTER_AUTHORIZATION_FAILED, None)
    users = None if req.users is None else [u.name for u in req.users]
    store = services.metadata.shards[0].state
    results = [
        _DResult(
            user=r.user,
            error_code=r.error_code,
            error_message=r.error_message,
            credential_infos=[_Info(mechanism=m, iterations=i) for m, i in infos],
        )
        for r, infos in store.describe_credentials(users)
    ]
    return _DResp(throttle_time_ms=0, error_code=0, error_message=None, results=results)


def describe_error_response(req: Any, version: int, code: int, message: str | None) -> Any:
    return _DResp(throttle_time_ms=0, error_code=code, error_message=message, results=[])


def _alter_response(results: list[UserResult]) -> Any:
    return _AResp(
        throttle_time_ms=0,
        results=[
            _AResult(user=r.user, error_code=r.error_code, error_message=r.error_message) for r in results
        ],
    )


def handle_alter(services: Services, ctx: RequestContext, req: Any) -> Any:
    if not cluster_authorized(services, ctx, Op.ALTER):
        return alter_error_response(req, ctx.api_version, ErrorCode.CLUSTER_AUTHORIZATION_FAILED, None)
    deletions = [(d.name, d.mechanism) for d in req.deletions]
    upsertions = [
        ScramUpsertion(u.name, u.mechanism, u.iterations, bytes(u.salt), bytes(u.salted_password))
        for u in req.upsertions
    ]
    reply, respond = reply_with(_alter_response)
    services.metadata.tell(
        METADATA_KEY, lambda store, now: store.alter_credentials(deletions, upsertions, respond, now)
    )
    return reply


def alter_error_response(req: Any, version: int, code: int, message: str | None) -> Any:
    users = dict.fromkeys([d.name for d in req.deletions] + [u.name for u in req.upsertions])
    return _alter_response([UserResult(user, code, message) for user in users])
