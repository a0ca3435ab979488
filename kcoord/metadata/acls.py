"""Kafka's ACL model: resource patterns, access control entries, bindings and the filters of
DescribeAcls and DeleteAcls, with Kafka's codes (ResourceType, PatternType, AclOperation,
AclPermissionType) and its matching rules (ResourcePatternFilter / AccessControlEntryFilter)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from enum import IntEnum
from typing import TypeVar

from kcoord.metadata.records import AccessControlEntryRecord
from kcoord.security.principal import KafkaPrincipal

WILDCARD = "*"  # ResourcePattern.WILDCARD_RESOURCE and AccessControlEntry's wildcard host
WILDCARD_PRINCIPAL = "User:*"
E = TypeVar("E", bound=IntEnum)
CLUSTER_NAME = "kafka-cluster"  # the one name of the Cluster resource


class ResourceType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14
    TWO_PHASE_COMMIT = 15


class AclPermissionType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


def _enum(cls: type[E], code: int) -> E:
    """A code off the wire; codes Kafka does not know read as UNKNOWN, as Kafka's fromCode."""
    try:
        return cls(code)
    except ValueError:
        return cls(0)


@dataclass(frozen=True, slots=True)
class AclBinding:
    """One ACL (Kafka's StandardAcl): a literal or prefixed resource pattern and an entry."""

    resource_type: ResourceType
    resource_name: str
    pattern_type: PatternType
    principal: str
    host: str
    operation: AclOperation
    permission_type: AclPermissionType

    @classmethod
    def of(
        cls,
        resource_type: int,
        resource_name: str,
        pattern_type: int,
        principal: str,
        host: str,
        operation: int,
        permission_type: int,
    ) -> AclBinding:
        return cls(
            _enum(ResourceType, resource_type),
            resource_name,
            _enum(PatternType, pattern_type),
            principal,
            host,
            _enum(AclOperation, operation),
            _enum(AclPermissionType, permission_type),
        )

    @classmethod
    def from_record(cls, r: AccessControlEntryRecord) -> AclBinding:
        return cls.of(
            r.resource_type,
            r.resource_name,
            r.pattern_type,
            r.principal,
            r.host,
            r.operation,
            r.permission_type,
        )

    def to_record(self, acl_id: uuid.UUID) -> AccessControlEntryRecord:
        return AccessControlEntryRecord(
            acl_id,
            int(self.resource_type),
            self.resource_name,
            int(self.pattern_type),
            self.principal,
            self.host,
            int(self.operation),
            int(self.permission_type),
        )


def validate_new_acl(acl: AclBinding) -> str | None:
    """Why Kafka refuses to create ``acl`` with INVALID_REQUEST (AclControlManager.validateNewAcl
    and the broker's checks in AclApis), or None."""
    if acl.resource_type in (ResourceType.UNKNOWN, ResourceType.ANY):
        return f"Invalid resourceType {acl.resource_type.name}"
    if acl.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        return f"Invalid patternType {acl.pattern_type.name}"
    if acl.operation in (AclOperation.UNKNOWN, AclOperation.ANY):
        return f"Invalid operation {acl.operation.name}"
    if acl.permission_type not in (AclPermissionType.DENY, AclPermissionType.ALLOW):
        return f"Invalid permissionType {acl.permission_type.name}"
    if not acl.resource_name:
        return "Resource name should not be empty"
    if acl.resource_type == ResourceType.CLUSTER and acl.resource_name != CLUSTER_NAME:
        return f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}"
    try:
        KafkaPrincipal.parse(acl.principal)
    except ValueError as e:
        return str(e)
    if not acl.host:
        return "Invalid empty host"
    return None


@dataclass(frozen=True, slots=True)
class AclBindingFilter:
    """DescribeAcls' and DeleteAcls' filter; None matches any name, principal or host."""

    resource_type: ResourceType
    resource_name: str | None
    pattern_type: PatternType
    principal: str | None
    host: str | None
    operation: AclOperation
    permission_type: AclPermissionType

    @classmethod
    def of(
        cls,
        resource_type: int,
        resource_name: str | None,
        pattern_type: int,
        principal: str | None,
        host: str | None,
        operation: int,
        permission_type: int,
    ) -> AclBindingFilter:
        return cls(
            _enum(ResourceType, resource_type),
            resource_name,
            _enum(PatternType, pattern_type),
            principal,
            host,
            _enum(AclOperation, operation),
            _enum(AclPermissionType, permission_type),
        )

    def unknown(self) -> str | None:
        """Why the filter cannot match (AclBindingFilter.findIndefiniteField), or None."""
        if self.resource_type == ResourceType.UNKNOWN:
            return "Unknown resourceType"
        if self.pattern_type == PatternType.UNKNOWN:
            return "Unknown patternType"
        if self.operation == AclOperation.UNKNOWN:
            return "Unknown operation"
        if self.permission_type == AclPermissionType.UNKNOWN:
            return "Unknown permissionType"
        return None

    def matches(self, acl: AclBinding) -> bool:
        return self._matches_pattern(acl) and self._matches_entry(acl)

    def _matches_pattern(self, acl: AclBinding) -> bool:
        # ResourcePatternFilter.matches
        if self.resource_type != ResourceType.ANY and self.resource_type != acl.resource_type:
            return False
        pt = self.pattern_type
        if pt not in (PatternType.ANY, PatternType.MATCH) and pt != acl.pattern_type:
            return False
        name = self.resource_name
        if name is None:
            return True
        if pt in (PatternType.ANY, acl.pattern_type):
            return name == acl.resource_name
        # MATCH: every ACL that would apply to the literal resource ``name``.
        if acl.pattern_type == PatternType.LITERAL:
            return name == acl.resource_name or acl.resource_name == WILDCARD
        return name.startswith(acl.resource_name)

    def _matches_entry(self, acl: AclBinding) -> bool:
        # AccessControlEntryFilter.matches
        if self.principal is not None and self.principal != acl.principal:
            return False
        if self.host is not None and self.host != acl.host:
            return False
        if self.operation != AclOperation.ANY and self.operation != acl.operation:
            return False
        return self.permission_type == AclPermissionType.ANY or self.permission_type == acl.permission_type
