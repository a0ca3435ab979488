"""Property: ``__cluster_metadata`` replays into exactly the live SCRAM credentials and ACLs, and
AlterUserScramCredentials, CreateAcls and DeleteAcls answer as Kafka's ScramControlManager and
AclControlManager.

Random requests (upsertions and deletions of credentials, names repeated, bad mechanisms and
iterations; ACL creations, duplicates, invalid bindings; deletions by filters), compactions of
the log and restarts run through the production shard (``MetadataStore`` on a
``CoordinatorShard`` and a real log, with the real cleaner). After every step a store loaded from
the log equals the live one, the answers agree with a model kept by the test, and an authorizer
that followed every live change decides as one built from the replayed log.
"""

from __future__ import annotations

import asyncio
import hashlib
import shutil
import tempfile
import uuid
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from kcoord.clock import ManualClock
from kcoord.config import build_config
from kcoord.metadata.acls import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from kcoord.metadata.authorizer import StandardAuthorizer
from kcoord.metadata.records import METADATA_RECORDS
from kcoord.metadata.store import MetadataCredentials, MetadataStore, ScramUpsertion
from kcoord.protocol.errors import ErrorCode
from kcoord.runtime.outcome import Operation
from kcoord.runtime.records import RecordRegistry
from kcoord.runtime.shard import CoordinatorShard
from kcoord.security.credentials import credential_from_salted_password, salted_password
from kcoord.security.principal import KafkaPrincipal
from kcoord.server.coordinators import metadata_runtime
from kcoord.storage.cleaner import clean
from kcoord.storage.flush import Flusher
from kcoord.storage.log import Log, LogConfig

USERS = ["alice", "bob", "", "carol"]
MECHANISMS = [1, 2, 3]  # 3: no such SCRAM mechanism
ITERATIONS = [100, 4096, 8192, 16384, 16385]
NAMES = ["t", "t1", "t-*", "*", "kafka-cluster", "g", ""]


class MetadataHarness:
    def __init__(self, directory: Path) -> None:
        self.clock = ManualClock()
        self.directory = directory
        self.flusher = Flusher("os")
        self.registry = RecordRegistry([METADATA_RECORDS])
        log = Log.open(directory, LogConfig(segment_bytes=1024, retention_ms=-1), self.flusher)
        self.shard: CoordinatorShard[MetadataStore] = CoordinatorShard(0, log, MetadataStore(), self.registry)

    @property
    def store(self) -> MetadataStore:
        return self.shard.state

    def ask(self, call: Any) -> Any:
        answers: list[Any] = []

        def op(store: MetadataStore, now: int) -> Any:
            return call(store, answers.append, now)

        run: Operation[MetadataStore] = op
        now = self.clock.now_ms()
        out = self.shard.run(run, now)
        if out.records:
            self.shard.append(out.records, now)
        for responder, value in out.responses:
            responder(value)
        assert len(answers) == 1
        return answers[0]

    def replay(self) -> MetadataStore:
        shard = CoordinatorShard(0, self.shard.log, MetadataStore(), self.registry)
        shard.load(self.clock.now_ms())
        return shard.state

    def restart(self) -> None:
        config = self.shard.log.config
        self.shard.log.close()
        log = Log.open(self.directory, config, self.flusher)
        self.shard = CoordinatorShard(0, log, MetadataStore(), self.registry)
        self.shard.load(self.clock.now_ms())

    def compact(self) -> None:
        self.shard.log.roll()
        asyncio.run(clean(self.shard.log, self.clock.now_ms(), 0))


CHECKS = [
    (who, op, rt, name)
    for who in ("User:ANONYMOUS", "User:alice", "User:carol")
    for op in (AclOperation.READ, AclOperation.WRITE, AclOperation.DESCRIBE)
    for rt in (ResourceType.TOPIC, ResourceType.GROUP)
    for name in ("t", "t1", "t-*x", "g", "zzz")
]

upsertion = st.builds(
    lambda name, mech, iters, pw: ScramUpsertion(
        name, mech, iters, b"salt-" + pw, hashlib.sha256(pw).digest()
    ),
    st.sampled_from(USERS),
    st.sampled_from(MECHANISMS),
    st.sampled_from(ITERATIONS),
    st.binary(min_size=1, max_size=4),
)
deletion = st.tuples(st.sampled_from(USERS), st.sampled_from(MECHANISMS))
acl = st.builds(
    AclBinding.of,
    st.sampled_from([0, 1, 2, 3, 4, 5]),
    st.sampled_from(NAMES),
    st.sampled_from([1, 2, 3, 4]),
    st.sampled_from(["User:ANONYMOUS", "User:*", "User:alice", "bad"]),
    st.sampled_from(["*", "127.0.0.1", ""]),
    st.sampled_from([1, 2, 3, 4, 8]),
    st.sampled_from([1, 2, 3]),
)
acl_filter = st.builds(
    AclBindingFilter.of,
    st.sampled_from([0, 1, 2, 3]),
    st.sampled_from([None, *NAMES]),
    st.sampled_from([0, 1, 2, 3, 4]),
    st.sampled_from([None, "User:ANONYMOUS", "User:*"]),
    st.sampled_from([None, "*"]),
    st.sampled_from([1, 3, 8]),
    st.sampled_from([1, 2, 3]),
)


class MetadataLog(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp(prefix="kcoord-metadata-replay-"))
        self.h = MetadataHarness(self.dir / "log")
        self.model_credentials: dict[tuple[str, int], int] = {}  # -> iterations
        self.model_acls: set[AclBinding] = set()
        self.auth = StandardAuthorizer()  # follows the live store's changes, ACL by ACL
        self.auth.load(self.h.store)

    def teardown(self) -> None:
        self.h.shard.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    @rule(deletions=st.lists(deletion, max_size=3), upsertions=st.lists(upsertion, max_size=3))
    def alter(self, deletions: list[tuple[str, int]], upsertions: list[ScramUpsertion]) -> None:
        results = self.h.ask(lambda s, respond, now: s.alter_credentials(deletions, upsertions, respond, now))
        named = [n for n, _ in deletions] + [u.name for u in upsertions]
        assert sorted(r.user for r in results) == sorted(set(named))
        by_user = {r.user: r for r in results}
        for name in set(named):
            r = by_user[name]
            # Kafka's order: deletions, then upsertions; a user's first mention decides, and a
            # valid first mention named again is DUPLICATE_RESOURCE.
            dels = [m for n, m in deletions if n == name]
            ups = [u for u in upsertions if u.name == name]
            mech = dels[0] if dels else ups[0].mechanism
            if not name:
                first_error: int | None = ErrorCode.UNACCEPTABLE_CREDENTIAL
            elif mech not in (1, 2):
                first_error = ErrorCode.UNSUPPORTED_SASL_MECHANISM
            elif dels:
                first_error = None if (name, mech) in self.model_credentials else ErrorCode.RESOURCE_NOT_FOUND
            elif not 4096 <= ups[0].iterations <= 16384:
                first_error = ErrorCode.UNACCEPTABLE_CREDENTIAL
            else:
                first_error = None
            if first_error is not None:
                assert r.error_code == first_error, (name, r)
            elif named.count(name) > 1:
                assert r.error_code == ErrorCode.DUPLICATE_RESOURCE, (name, r)
            elif dels:
                assert r.error_code == 0
                del self.model_credentials[(name, mech)]
            else:
                assert r.error_code == 0
                self.model_credentials[(name, mech)] = ups[0].iterations
                u = ups[0]
                stored = self.h.store.credentials[(name, mech)]
                expected = credential_from_salted_password(
                    "SCRAM-SHA-256" if mech == 1 else "SCRAM-SHA-512", u.salt, u.salted_password, u.iterations
                )
                assert stored == expected

    @rule(acls=st.lists(acl, max_size=4))
    def create(self, acls: list[AclBinding]) -> None:
        results = self.h.ask(lambda s, respond, now: s.create_acls(acls, respond, now))
        assert len(results) == len(acls)
        for a, r in zip(acls, results, strict=True):
            valid = (
                a.resource_type not in (ResourceType.UNKNOWN, ResourceType.ANY)
                and a.pattern_type in (PatternType.LITERAL, PatternType.PREFIXED)
                and a.operation not in (AclOperation.UNKNOWN, AclOperation.ANY)
                and a.permission_type in (AclPermissionType.ALLOW, AclPermissionType.DENY)
                and a.resource_name
                and (a.resource_type != ResourceType.CLUSTER or a.resource_name == "kafka-cluster")
                and a.principal != "bad"
                and a.host
            )
            assert (r.error_code == 0) == bool(valid), (a, r)
            if valid:
                self.model_acls.add(a)

    @rule(filters=st.lists(acl_filter, max_size=3))
    def delete(self, filters: list[AclBindingFilter]) -> None:
        results = self.h.ask(lambda s, respond, now: s.delete_acls(filters, respond, now))
        gone: set[AclBinding] = set()
        for f, r in zip(filters, results, strict=True):
            if f.unknown() is not None:
                assert r.error_code == ErrorCode.INVALID_REQUEST
                continue
            assert set(r.deleted) == {a for a in self.model_acls if f.matches(a)}
            gone |= set(r.deleted)
        self.model_acls -= gone

    @rule()
    def compact(self) -> None:
        self.h.compact()

    @rule()
    def restart(self) -> None:
        self.h.restart()
        self.auth = StandardAuthorizer()
        self.auth.load(self.h.store)

    @invariant()
    def replay_equals_live(self) -> None:
        live = self.h.store
        assert self.h.replay().snapshot() == live.snapshot()
        assert {k: c.iterations for k, c in live.credentials.items()} == self.model_credentials
        assert set(live.acls.values()) == self.model_acls
        assert len(live.acls) == len(self.model_acls)  # no ACL twice
        # The authorizer that followed every change decides as one built from the replayed log.
        fresh = StandardAuthorizer()
        fresh.load(self.h.replay())
        for who, op, rt, name in CHECKS:
            principal = KafkaPrincipal.parse(who)
            assert self.auth.authorize(principal, "127.0.0.1", op, rt, name) == fresh.authorize(
                principal, "127.0.0.1", op, rt, name
            ), (who, op, rt, name)


MetadataLog.TestCase.settings = settings(
    max_examples=60, stateful_step_count=25, deadline=None, suppress_health_check=list(HealthCheck)
)
TestMetadataLog = MetadataLog.TestCase


def test_salted_password_is_never_stored(tmp_path: Path) -> None:
    """The log holds the salt and the two keys computed from the salted password, never it."""
    h = MetadataHarness(tmp_path / "log")
    salted = salted_password("SCRAM-SHA-512", b"secret", b"NaCl", 4096)
    up = ScramUpsertion("alice", 2, 4096, b"NaCl", salted)
    results = h.ask(lambda s, respond, now: s.alter_credentials([], [up], respond, now))
    assert [(r.user, r.error_code) for r in results] == [("alice", 0)]
    data = b"".join(p.read_bytes() for p in (tmp_path / "log").glob("*.log"))
    assert salted not in data and b"secret" not in data
    assert h.store.scram_credential("SCRAM-SHA-512", "alice") == credential_from_salted_password(
        "SCRAM-SHA-512", b"NaCl", salted, 4096
    )
    assert h.store.scram_credential("SCRAM-SHA-256", "alice") is None


def test_describe_credentials_as_kafka() -> None:
    store = MetadataStore()
    cred = credential_from_salted_password("SCRAM-SHA-256", b"s", b"x" * 32, 4096)
    from kcoord.metadata.records import ScramCredentialKey, UserScramCredentialRecord

    for mech in (1, 2):
        store.replay(
            ScramCredentialKey("alice", mech),
            UserScramCredentialRecord(
                "alice", mech, cred.salt, cred.stored_key, cred.server_key, 4096 * mech
            ),
            0,
        )
    everyone = store.describe_credentials(None)
    assert [(r.user, r.error_code, infos) for r, infos in everyone] == [("alice", 0, [(1, 4096), (2, 8192)])]
    named = store.describe_credentials(["alice", "bob", "bob"])
    assert [(r.user, r.error_code) for r, _ in named] == [
        ("alice", 0),
        ("bob", ErrorCode.DUPLICATE_RESOURCE),
    ]
    assert [(r.user, r.error_code) for r, _ in store.describe_credentials(["nobody"])] == [
        ("nobody", ErrorCode.RESOURCE_NOT_FOUND)
    ]


def test_removal_supersedes_the_credential_in_a_compacted_log(tmp_path: Path) -> None:
    """After a deletion and a compaction the credential's keys are gone from the log."""
    h = MetadataHarness(tmp_path / "log")
    salted = salted_password("SCRAM-SHA-256", b"pw", b"salt", 4096)
    h.ask(
        lambda s, r, now: s.alter_credentials([], [ScramUpsertion("bob", 1, 4096, b"salt", salted)], r, now)
    )
    stored_key = h.store.credentials[("bob", 1)].stored_key
    h.ask(lambda s, r, now: s.alter_credentials([("bob", 1)], [], r, now))
    h.compact()
    data = b"".join(p.read_bytes() for p in (tmp_path / "log").glob("*.log"))
    assert stored_key not in data
    assert h.replay().credentials == {}
    _ = uuid  # ids are random: the model compares bindings


def test_broker_credentials_source_follows_the_runtime(tmp_path: Path) -> None:
    """The ScramCredentialSource the broker hands to SASL: nothing before the log is open, then
    what the store holds, after a restart too."""
    config = build_config({}, {"log_dirs": str(tmp_path)})
    flusher = Flusher("os")
    runtime = metadata_runtime(config, flusher, ManualClock())
    source = MetadataCredentials(runtime)
    assert source.scram_credential("SCRAM-SHA-256", "alice") is None
    runtime.open(unclean=False)
    salted = salted_password("SCRAM-SHA-256", b"pw", b"salt", 4096)
    shard = runtime.shards[0]
    answers: list[Any] = []
    up = ScramUpsertion("alice", 1, 4096, b"salt", salted)
    out = shard.run(lambda s, now: s.alter_credentials([], [up], answers.append, now), 0)
    shard.append(out.records, 0)
    expected = credential_from_salted_password("SCRAM-SHA-256", b"salt", salted, 4096)
    assert source.scram_credential("SCRAM-SHA-256", "alice") == expected
    assert source.scram_credential("SCRAM-SHA-512", "alice") is None
    runtime.close()
    again = metadata_runtime(config, flusher, ManualClock())
    again.open(unclean=False)
    assert MetadataCredentials(again).scram_credential("SCRAM-SHA-256", "alice") == expected
    again.close()
