"""Kafka's StandardAuthorizer over the ACLs of ``__cluster_metadata``.

``authorize(principal, host, operation, resource_type, name)`` answers as
StandardAuthorizerData.authorize: super users may do everything; otherwise the ACLs that apply to
the literal resource (literal ACLs of its name, the literal wildcard ``*``, prefixed ACLs of a
prefix of its name) and to the principal (or ``User:*``) and host (or ``*``) decide: a DENY of the
operation (or ALL) wins; else an ALLOW of the operation, of ALL, or of an operation implying it
(Describe by Read, Write, Delete and Alter; DescribeConfigs by AlterConfigs); else, when no ACL
names the resource at all, ``allow.everyone.if.no.acl.found``; else denied.

The ACLs are indexed by resource type and name, kept up to date with every ACL added or removed:
a check looks at the literal ACLs of its name, the wildcard, and the prefixed ACLs of each
prefix of its name, whatever the number of ACLs.
"""

from __future__ import annotations

from collections import Counter, defaultdict
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
        self._literal: dict[tuple[ResourceType, str], list[AclBinding]] = defaultdict(list)
        self._prefixed: dict[ResourceType, dict[str, list[AclBinding]]] = defaultdict(
            lambda: defaultdict(list)
        )
        self._by_type: dict[ResourceType, list[AclBinding]] = defaultdict(list)
        # Per type, the lengths of its prefixed patterns (with their counts): a check looks up
        # only the prefixes of its name that some pattern could be.
        self._prefix_lengths: dict[ResourceType, Counter[int]] = defaultdict(Counter)

    def load(self, store: MetadataStore) -> None:
        """Authorize from ``store``'s ACLs from now on (once ``__cluster_metadata`` is replayed,
        before any listener opens), following every change."""
        self.store = store
        for acl in store.acls.values():
            self._changed(acl, True)
        store.acls_changed.append(self._changed)

    def _changed(self, acl: AclBinding, added: bool) -> None:
        if acl.pattern_type == PatternType.LITERAL:
            bucket = self._literal[(acl.resource_type, acl.resource_name)]
        else:
            bucket = self._prefixed[acl.resource_type][acl.resource_name]
        prefixed = acl.pattern_type != PatternType.LITERAL
        if added:
            bucket.append(acl)
            self._by_type[acl.resource_type].append(acl)
            if prefixed:
                self._prefix_lengths[acl.resource_type][len(acl.resource_name)] += 1
            return
        bucket.remove(acl)
        self._by_type[acl.resource_type].remove(acl)
        if prefixed:
            lengths = self._prefix_lengths[acl.resource_type]
            lengths[len(acl.resource_name)] -= 1
            if not lengths[len(acl.resource_name)]:
                del lengths[len(acl.resource_name)]
        if not bucket:  # so that a prefix no ACL uses any more costs nothing to look up
            if acl.pattern_type == PatternType.LITERAL:
                del self._literal[(acl.resource_type, acl.resource_name)]
            else:
                del self._prefixed[acl.resource_type][acl.resource_name]

    def is_super_user(self, principal: KafkaPrincipal) -> bool:
        return str(principal) in self.super_users

    def _resource_acls(self, resource_type: ResourceType, name: str) -> list[AclBinding]:
        acls = list(self._literal.get((resource_type, name), ()))
        if name != WILDCARD:
            acls += self._literal.get((resource_type, WILDCARD), ())
        prefixed = self._prefixed.get(resource_type)
        if prefixed:
            for length in self._prefix_lengths[resource_type]:
                if length <= len(name):
                    found = prefixed.get(name[:length])
                    if found:
                        acls += found
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
        """Whether ``operation`` may be allowed on some resource of the type: Kafka's
        Authorizer.authorizeByResourceType, which InitProducerId asks for idempotent producers
        (Write on some topic). Allowed when a resource no ACL singles out would be (super users,
        ``allow.everyone.if.no.acl.found``, a wildcard); else denied by a DENY on the literal
        ``*``; else allowed by an ALLOW whose pattern no DENY dominates (the same literal, or a
        prefix of it)."""
        if self.authorize(principal, host, operation, resource_type, "hardcode"):
            return True
        who = (str(principal), WILDCARD_PRINCIPAL)
        deny_literal: set[str] = set()
        deny_prefixed: set[str] = set()
        allowed: list[tuple[PatternType, str]] = []
        wildcard_allowed = False
        for acl in self._by_type.get(resource_type, ()):
            if acl.principal not in who or (acl.host != WILDCARD and acl.host != host):
                continue
            if acl.operation not in (operation, Op.ALL):
                continue
            literal = acl.pattern_type == PatternType.LITERAL
            if acl.permission_type == AclPermissionType.DENY:
                if literal and acl.resource_name == WILDCARD:
                    return False
                (deny_literal if literal else deny_prefixed).add(acl.resource_name)
            elif literal and acl.resource_name == WILDCARD:
                wildcard_allowed = True  # unless a DENY of * comes later
            else:
                allowed.append((acl.pattern_type, acl.resource_name))
        if wildcard_allowed:
            return True
        for pattern_type, name in allowed:
            if pattern_type == PatternType.LITERAL and name in deny_literal:
                continue
            if not any(name[:end] in deny_prefixed for end in range(1, len(name) + 1)):
                return True
        return False
