"""Kafka's StandardAuthorizer over the ACLs of ``__cluster_metadata``.

``authorize(principal, host, operation, resource_type, name)`` answers as
StandardAuthorizerData.authorize: super users may do everything; otherwise the ACLs that apply to
the literal resource (literal ACLs of its name, the literal wildcard ``*``, prefixed ACLs of a
prefix of its name) and to the principal (or ``User:*``) and host (or ``*``) decide: a DENY of the
operation (or ALL) wins; else an ALLOW of the operation, of ALL, or of an operation implying it
(Describe by Read, Write, Delete and Alter; DescribeConfigs by AlterConfigs); else, when no ACL
names the resource at all, ``allow.everyone.if.no.acl.found``; else denied.

The ACLs are indexed by resource type and name on every change (changes are rare, checks are on
every request): a check looks at the literal ACLs of its name, the wildcard, and the prefixed
ACLs of each prefix of its name.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from kcoord.metadata.acls import (
    WILDCARD,
    WILDCARD_PRINCIPAL,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from kcoord.metadata.store import MetadataStore
from kcoord.security.principal import KafkaPrincipal

Op = AclOperation
_IMPLIES_DESCRIBE = frozenset({Op.DESCRIBE, Op.READ, Op.WRITE, Op.DELETE, Op.ALTER})
_IMPLIES_DESCRIBE_CONFIGS = frozenset({Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS})


def parse_super_users(spec: str) -> frozenset[str]:
    """``super.users``: principals separated by semicolons, as Kafka reads them."""
    return frozenset(p.strip() for p in spec.split(";") if p.strip())


def _allows(acl: AclBinding, operation: AclOperation) -> bool:
    """Whether ``acl`` (whose principal and host match) decides ``operation``
    (StandardAuthorizerData.findResult)."""
    if acl.operation == Op.ALL:
        return True
    if acl.permission_type == AclPermissionType.ALLOW:
        if operation == Op.DESCRIBE:
            return acl.operation in _IMPLIES_DESCRIBE
        if operation == Op.DESCRIBE_CONFIGS:
            return acl.operation in _IMPLIES_DESCRIBE_CONFIGS
    return acl.operation == operation


class StandardAuthorizer:
    def __init__(self, super_users: Iterable[str] = (), allow_if_no_acl_found: bool = False) -> None:
        self.store: MetadataStore | None = None
        self.super_users = frozenset(super_users)
        self.allow_if_no_acl_found = allow_if_no_acl_found
        self._literal: dict[tuple[ResourceType, str], list[AclBinding]] = {}
        self._prefixed: dict[ResourceType, dict[str, list[AclBinding]]] = {}
        self._prefix_lengths: dict[ResourceType, list[int]] = {}
        self._by_type: dict[ResourceType, list[AclBinding]] = {}

    def load(self, store: MetadataStore) -> None:
        """Authorize from ``store``'s ACLs from now on (once ``__cluster_metadata`` is replayed,
        before any listener opens), following every change."""
        self.store = store
        store.acls_changed.append(self.rebuild)
        self.rebuild()

    def rebuild(self) -> None:
        if self.store is None:
            return
        literal: dict[tuple[ResourceType, str], list[AclBinding]] = defaultdict(list)
        prefixed: dict[ResourceType, dict[str, list[AclBinding]]] = defaultdict(lambda: defaultdict(list))
        by_type: dict[ResourceType, list[AclBinding]] = defaultdict(list)
        for acl in self.store.acls.values():
            by_type[acl.resource_type].append(acl)
            if acl.pattern_type == PatternType.LITERAL:
                literal[(acl.resource_type, acl.resource_name)].append(acl)
            else:
                prefixed[acl.resource_type][acl.resource_name].append(acl)
        self._literal = dict(literal)
        self._prefixed = {t: dict(names) for t, names in prefixed.items()}
        self._prefix_lengths = {t: sorted({len(n) for n in names}) for t, names in prefixed.items()}
        self._by_type = dict(by_type)

    def is_super_user(self, principal: KafkaPrincipal) -> bool:
        return str(principal) in self.super_users

    def _resource_acls(self, resource_type: ResourceType, name: str) -> list[AclBinding]:
        acls = list(self._literal.get((resource_type, name), ()))
        if name != WILDCARD:
            acls += self._literal.get((resource_type, WILDCARD), ())
        prefixed = self._prefixed.get(resource_type)
        if prefixed:
            for length in self._prefix_lengths[resource_type]:
                if length > len(name):
                    break
                acls += prefixed.get(name[:length], ())
        return acls

    def authorize(
        self,
        principal: KafkaPrincipal,
        host: str,
        operation: AclOperation,
        resource_type: ResourceType,
        name: str,
    ) -> bool:
        if str(principal) in self.super_users:
            return True
        acls = self._resource_acls(resource_type, name)
        if not acls:
            return self.allow_if_no_acl_found
        who = (str(principal), WILDCARD_PRINCIPAL)
        allowed = False
        for acl in acls:
            if acl.principal not in who or (acl.host != WILDCARD and acl.host != host):
                continue
            if not _allows(acl, operation):
                continue
            if acl.permission_type == AclPermissionType.DENY:
                return False
            allowed = True
        return allowed

    def authorize_any(
        self, principal: KafkaPrincipal, host: str, operation: AclOperation, resource_type: ResourceType
    ) -> bool:
        """Whether ``operation`` is allowed on some resource of the type (Kafka's
        authorizeByResourceType, which InitProducerId uses for idempotent producers: Write on any
        topic). A DENY of the operation on the whole type (literal ``*`` or the empty prefix)
        denies; else an ALLOW on any pattern allows; else ``allow.everyone.if.no.acl.found`` with
        no ACL of the type at all."""
        if str(principal) in self.super_users:
            return True
        who = (str(principal), WILDCARD_PRINCIPAL)
        acls = self._by_type.get(resource_type, ())
        allowed = False
        for acl in acls:
            if acl.principal not in who or (acl.host != WILDCARD and acl.host != host):
                continue
            if acl.operation not in (operation, Op.ALL):
                continue
            if acl.permission_type == AclPermissionType.DENY:
                whole_type = (acl.pattern_type == PatternType.LITERAL and acl.resource_name == WILDCARD) or (
                    acl.pattern_type == PatternType.PREFIXED and acl.resource_name == ""
                )
                if whole_type:
                    return False
                continue
            allowed = True
        if allowed:
            return True
        return self.allow_if_no_acl_found and not acls
