"""The security metadata of ``__cluster_metadata`` (its one partition): SCRAM credentials as
Kafka's ScramControlManager keeps them, ACLs as its AclControlManager does, and the operations
AlterUserScramCredentials, CreateAcls and DeleteAcls run on them.

A plain synchronous state (a ``CoordinatorState`` of the runtime): every change is a record
applied through ``replay``, live and at start-up alike. Operations validate as Kafka does and
answer per user or per ACL; what they accept becomes records, atomically for the request.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kcoord.metadata.acls import AclBinding, AclBindingFilter, validate_new_acl
from kcoord.metadata.records import (
    AccessControlEntryRecord,
    AclKey,
    RemoveAccessControlEntryRecord,
    RemoveUserScramCredentialRecord,
    ScramCredentialKey,
    UserScramCredentialRecord,
)
from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.fields import RecordFormatError
from kcoord.runtime.outcome import Outcome, Record, Responder
from kcoord.runtime.records import RecordRegistry
from kcoord.runtime.runtime import CoordinatorRuntime
from kcoord.runtime.shard import Loader
from kcoord.security.credentials import (
    MAX_ITERATIONS,
    MIN_ITERATIONS,
    SCRAM_MECHANISMS,
    ScramCredential,
    credential_from_salted_password,
)

METADATA_KEY = "__cluster_metadata"  # the one actor key: metadata changes run one at a time
MECHANISM_NAMES = {number: name for name, (_hash, number) in SCRAM_MECHANISMS.items()}


@dataclass(frozen=True, slots=True)
class ScramUpsertion:
    name: str
    mechanism: int
    iterations: int
    salt: bytes
    salted_password: bytes

    def __repr__(self) -> str:
        return f"ScramUpsertion({self.name!r}, {self.mechanism}, iterations={self.iterations})"


@dataclass(frozen=True, slots=True)
class UserResult:
    user: str
    error_code: int = 0
    error_message: str | None = None


@dataclass(frozen=True, slots=True)
class AclCreateResult:
    error_code: int = 0
    error_message: str | None = None


@dataclass(frozen=True, slots=True)
class AclDeleteResult:
    error_code: int = 0
    error_message: str | None = None
    deleted: tuple[AclBinding, ...] = ()


def _validate_user_and_mechanism(name: str, mechanism: int) -> UserResult | None:
    # ScramControlManager.validateScramUsernameAndMechanism
    if not name:
        return UserResult(name, ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty")
    if mechanism not in MECHANISM_NAMES:
        return UserResult(name, ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism")
    return None


class MetadataStore:
    """SCRAM credentials and ACLs: the ``CoordinatorState`` of ``__cluster_metadata``, and the
    ``ScramCredentialSource`` of the SASL/SCRAM server."""

    def __init__(self) -> None:
        self.credentials: dict[tuple[str, int], ScramCredential] = {}  # (user, mechanism type)
        self.acls: dict[uuid.UUID, AclBinding] = {}
        self._acl_ids: dict[AclBinding, uuid.UUID] = {}  # Kafka's existingAcls: no ACL twice
        # Told of every ACL added (True) or removed (False): the authorizer's index follows.
        self.acls_changed: list[Callable[[AclBinding, bool], None]] = []

    # --- ScramCredentialSource ----------------------------------------------------------------------
    def scram_credential(self, mechanism: str, user: str) -> ScramCredential | None:
        entry = SCRAM_MECHANISMS.get(mechanism)
        return None if entry is None else self.credentials.get((user, entry[1]))

    # --- records -------------------------------------------------------------------------------------
    def replay(self, key: Any, value: Any, now: int) -> None:
        if isinstance(key, ScramCredentialKey):
            if isinstance(value, UserScramCredentialRecord):
                self.credentials[(value.name, value.mechanism)] = ScramCredential(
                    value.salt, value.stored_key, value.server_key, value.iterations
                )
            else:  # a removal; a tombstone (what a cleaner may leave) means the same
                self.credentials.pop((key.name, key.mechanism), None)
            return
        if isinstance(key, AclKey):
            old = self.acls.pop(key.id, None)
            if old is not None:
                self._acl_ids.pop(old, None)
                for listener in self.acls_changed:
                    listener(old, False)
            if isinstance(value, AccessControlEntryRecord):
                acl = AclBinding.from_record(value)
                self.acls[key.id] = acl
                self._acl_ids[acl] = key.id
                for listener in self.acls_changed:
                    listener(acl, True)
            return
        raise RecordFormatError(f"__cluster_metadata holds no {type(key).__name__} records")

    def replay_transactional(
        self, producer_id: int, producer_epoch: int, key: Any, value: Any, now: int
    ) -> None:
        raise RecordFormatError("__cluster_metadata holds no transactional records")

    def replay_end_transaction(self, producer_id: int, producer_epoch: int, commit: bool, now: int) -> None:
        raise RecordFormatError("__cluster_metadata holds no transaction markers")

    def loaders(self, registry: RecordRegistry, now: int) -> Mapping[int, Loader]:
        return {}

    def loaded(self, now: int) -> None:
        pass

    def link(self, records: list[Record], base_offset: int) -> list[Record]:
        return records

    def holds(self, key: str) -> bool:
        return False

    def keys(self) -> Iterable[str]:
        return ()

    def next_deadline(self, key: str) -> int | None:
        return None

    def on_timer(self, key: str, now: int) -> Outcome:
        return Outcome()

    def snapshot(self) -> tuple[dict[tuple[str, int], ScramCredential], dict[uuid.UUID, AclBinding]]:
        return dict(self.credentials), dict(self.acls)

    # --- DescribeUserScramCredentials ------------------------------------------------------------------
    def describe_credentials(
        self, users: Sequence[str] | None
    ) -> list[tuple[UserResult, list[tuple[int, int]]]]:
        """Per user, the result and its (mechanism, iterations), as Kafka's ScramImage.describe."""
        if not users:
            wanted = {name: False for name, _m in sorted(self.credentials)}
        else:
            wanted = {}
            for name in users:
                wanted[name] = name in wanted  # True: named twice
        out: list[tuple[UserResult, list[tuple[int, int]]]] = []
        for name, duplicate in wanted.items():
            if duplicate:
                message = (
                    f"Cannot describe SCRAM credentials for the same user twice in a single request: {name}"
                )
                out.append((UserResult(name, ErrorCode.DUPLICATE_RESOURCE, message), []))
                continue
            infos = [
                (mechanism, self.credentials[(name, mechanism)].iterations)
                for mechanism in sorted(MECHANISM_NAMES)
                if (name, mechanism) in self.credentials
            ]
            if infos:
                out.append((UserResult(name), infos))
            else:
                message = f"Attempt to describe a user credential that does not exist: {name}"
                out.append((UserResult(name, ErrorCode.RESOURCE_NOT_FOUND, message), []))
        return out

    # --- AlterUserScramCredentials -----------------------------------------------------------------------
    def alter_credentials(
        self,
        deletions: Sequence[tuple[str, int]],
        upsertions: Sequence[ScramUpsertion],
        respond: Responder,
        now: int,
    ) -> Outcome:
        """Kafka's ScramControlManager.alterCredentials: a user named twice in the request is
        DUPLICATE_RESOURCE; the rest is validated per user and written atomically."""
        errors: dict[str, UserResult] = {}
        to_delete: dict[str, tuple[str, int]] = {}
        to_upsert: dict[str, ScramUpsertion] = {}
        duplicate = "A user credential cannot be altered twice in the same request"
        for name, mechanism in deletions:
            if name in errors:
                continue
            if to_delete.pop(name, None) is not None:
                errors[name] = UserResult(name, ErrorCode.DUPLICATE_RESOURCE, duplicate)
                continue
            error = _validate_user_and_mechanism(name, mechanism)
            if error is None and (name, mechanism) not in self.credentials:
                message = "Attempt to delete a user credential that does not exist"
                error = UserResult(name, ErrorCode.RESOURCE_NOT_FOUND, message)
            if error is not None:
                errors[name] = error
            else:
                to_delete[name] = (name, mechanism)
        for u in upsertions:
            if u.name in errors:
                continue
            if to_delete.pop(u.name, None) is not None or to_upsert.pop(u.name, None) is not None:
                errors[u.name] = UserResult(u.name, ErrorCode.DUPLICATE_RESOURCE, duplicate)
                continue
            error = _validate_user_and_mechanism(u.name, u.mechanism)
            if error is None and u.iterations < MIN_ITERATIONS:
                error = UserResult(u.name, ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations")
            elif error is None and u.iterations > MAX_ITERATIONS:
                error = UserResult(u.name, ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too many iterations")
            if error is not None:
                errors[u.name] = error
            else:
                to_upsert[u.name] = u
        out = Outcome()
        results: list[UserResult] = []
        for name, mechanism in to_delete.values():
            out.records.append(
                (ScramCredentialKey(name, mechanism), RemoveUserScramCredentialRecord(name, mechanism))
            )
            results.append(UserResult(name))
        for u in to_upsert.values():
            # The broker turns the client's salted password into what verifies it, and forgets it.
            cred = credential_from_salted_password(
                MECHANISM_NAMES[u.mechanism], u.salt, u.salted_password, u.iterations
            )
            record = UserScramCredentialRecord(
                u.name, u.mechanism, cred.salt, cred.stored_key, cred.server_key, cred.iterations
            )
            out.records.append((ScramCredentialKey(u.name, u.mechanism), record))
            results.append(UserResult(u.name))
        results.extend(errors.values())
        out.respond(respond, results)
        return out

    # --- ACLs ------------------------------------------------------------------------------------------
    def describe_acls(self, acl_filter: AclBindingFilter) -> list[AclBinding]:
        return [acl for acl in self.acls.values() if acl_filter.matches(acl)]

    def create_acls(self, acls: Sequence[AclBinding], respond: Responder, now: int) -> Outcome:
        """Kafka's AclControlManager.createAcls: each ACL validated on its own; one already
        present (or earlier in the request) succeeds without a record."""
        out = Outcome()
        results: list[AclCreateResult] = []
        created: set[AclBinding] = set()
        for acl in acls:
            problem = validate_new_acl(acl)
            if problem is not None:
                results.append(AclCreateResult(ErrorCode.INVALID_REQUEST, problem))
                continue
            if acl not in self._acl_ids and acl not in created:
                created.add(acl)
                acl_id = uuid.uuid4()
                while acl_id in self.acls:
                    acl_id = uuid.uuid4()
                out.records.append((AclKey(acl_id), acl.to_record(acl_id)))
            results.append(AclCreateResult())
        out.respond(respond, results)
        return out

    def delete_acls(self, filters: Sequence[AclBindingFilter], respond: Responder, now: int) -> Outcome:
        """Kafka's AclControlManager.deleteAcls: per filter the ACLs it matched; an ACL matched by
        several filters is removed once."""
        out = Outcome()
        results: list[AclDeleteResult] = []
        removed: set[uuid.UUID] = set()
        for f in filters:
            problem = f.unknown()
            if problem is not None:
                results.append(AclDeleteResult(ErrorCode.INVALID_REQUEST, problem))
                continue
            deleted = []
            for acl_id, acl in self.acls.items():
                if f.matches(acl):
                    deleted.append(acl)
                    if acl_id not in removed:
                        removed.add(acl_id)
                        out.records.append((AclKey(acl_id), RemoveAccessControlEntryRecord(acl_id)))
            results.append(AclDeleteResult(deleted=tuple(deleted)))
        out.respond(respond, results)
        return out


class MetadataCredentials:
    """The ``ScramCredentialSource`` of a broker: what ``__cluster_metadata`` holds at the moment
    of the lookup. Built with the runtime, before its log is opened and its store exists (a SASL
    server can be wired to it at construction)."""

    def __init__(self, runtime: CoordinatorRuntime[MetadataStore]) -> None:
        self._runtime = runtime

    def scram_credential(self, mechanism: str, user: str) -> ScramCredential | None:
        shards = self._runtime.shards
        return shards[0].state.scram_credential(mechanism, user) if shards else None
