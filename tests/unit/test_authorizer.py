"""The StandardAuthorizer's decisions, from Kafka's StandardAuthorizerTest cases (metadata
module), over ACLs replayed into a MetadataStore as the broker keeps them."""

from __future__ import annotations

import uuid

import pytest

from kcoord.metadata.acls import AclBinding, AclOperation, AclPermissionType, PatternType, ResourceType
from kcoord.metadata.authorizer import StandardAuthorizer, _allows, parse_super_users
from kcoord.metadata.records import AclKey, RemoveAccessControlEntryRecord
from kcoord.metadata.store import MetadataStore
from kcoord.security.principal import KafkaPrincipal

Op = AclOperation
T, G, C = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER
LIT, PRE = PatternType.LITERAL, PatternType.PREFIXED
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
HOST = "127.0.0.1"


def acl(
    rt: ResourceType, name: str, pt: PatternType, principal: str, host: str, op: Op, perm: AclPermissionType
):
    return AclBinding(rt, name, pt, principal, host, op, perm)


def authorizer(*acls: AclBinding, super_users: str = "", allow_if_no_acl: bool = False) -> StandardAuthorizer:
    store = MetadataStore()
    auth = StandardAuthorizer(parse_super_users(super_users), allow_if_no_acl)
    auth.load(store)
    for a in acls:
        acl_id = uuid.uuid4()
        store.replay(AclKey(acl_id), a.to_record(acl_id), 0)
    return auth


def user(name: str) -> KafkaPrincipal:
    return KafkaPrincipal("User", name)


def check(auth: StandardAuthorizer, who: str, actions: list[tuple[Op, ResourceType, str]], host: str = HOST):
    return [auth.authorize(user(who), host, op, rt, name) for op, rt, name in actions]


def foo(op: Op, perm: AclPermissionType) -> AclBinding:
    return acl(T, "foo_", PRE, "User:bob", "*", op, perm)


def bar(op: Op, perm: AclPermissionType) -> AclBinding:
    return acl(G, "bar", LIT, "User:*", "*", op, perm)


def test_find_result_implication() -> None:
    for op in (Op.DESCRIBE, Op.READ, Op.WRITE, Op.DELETE, Op.ALTER):
        assert _allows(foo(op, ALLOW), Op.DESCRIBE)
    assert not _allows(foo(Op.CREATE, ALLOW), Op.DESCRIBE)
    for op in (Op.READ, Op.WRITE, Op.DELETE, Op.ALTER):  # deny ACLs do no implication
        assert not _allows(foo(op, DENY), Op.DESCRIBE)
    assert _allows(foo(Op.DESCRIBE, DENY), Op.DESCRIBE)
    for op in (Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS):
        assert _allows(foo(op, ALLOW), Op.DESCRIBE_CONFIGS)
    assert not _allows(foo(Op.ALTER_CONFIGS, DENY), Op.DESCRIBE_CONFIGS)
    assert (
        authorizer(foo(Op.ALTER_CONFIGS, DENY)).authorize(user("bob"), HOST, Op.ALTER_CONFIGS, T, "foo_bar")
        is False
    )


def test_principal_matching() -> None:
    auth = authorizer(foo(Op.READ, ALLOW), bar(Op.READ, DENY))
    assert check(auth, "bob", [(Op.READ, T, "foo_bar")]) == [True]
    assert check(auth, "alice", [(Op.READ, T, "foo_bar")]) == [False]
    assert check(auth, "alice", [(Op.READ, G, "bar")]) == [False]  # the wildcard principal's DENY


def test_simple_authorizations() -> None:
    auth = authorizer(
        foo(Op.READ, ALLOW),
        foo(Op.WRITE, ALLOW),
        bar(Op.DESCRIBE_CONFIGS, ALLOW),
        bar(Op.ALTER_CONFIGS, ALLOW),
    )
    assert check(auth, "bob", [(Op.READ, T, "foo_")]) == [True]
    assert check(auth, "fred", [(Op.ALTER_CONFIGS, G, "bar")]) == [True]


def test_deny_precedence_with_operation_all() -> None:
    auth = authorizer(
        acl(T, "foo", LIT, "User:alice", "*", Op.ALL, DENY),
        acl(T, "foo", PRE, "User:alice", "*", Op.READ, ALLOW),
        acl(T, "foo", LIT, "User:*", "*", Op.ALL, DENY),
        acl(T, "foo", PRE, "User:*", "*", Op.DESCRIBE, ALLOW),
    )
    assert check(
        auth,
        "alice",
        [(Op.WRITE, T, "foo"), (Op.READ, T, "foo"), (Op.DESCRIBE, T, "foo"), (Op.READ, T, "foobar")],
    ) == [False, False, False, True]
    assert check(
        auth,
        "bob",
        [
            (Op.DESCRIBE, T, "foo"),
            (Op.READ, T, "foo"),
            (Op.WRITE, T, "foo"),
            (Op.DESCRIBE, T, "foobaz"),
            (Op.READ, T, "foobaz"),
        ],
    ) == [False, False, False, True, False]


def test_topic_acl_with_operation_all() -> None:
    auth = authorizer(
        acl(T, "foo", LIT, "User:*", "*", Op.ALL, ALLOW),
        acl(T, "bar", PRE, "User:alice", "*", Op.ALL, ALLOW),
        acl(T, "baz", LIT, "User:bob", "*", Op.ALL, ALLOW),
    )
    assert check(
        auth, "alice", [(Op.WRITE, T, "foo"), (Op.DESCRIBE_CONFIGS, T, "bar"), (Op.DESCRIBE, T, "baz")]
    ) == [
        True,
        True,
        False,
    ]
    assert check(auth, "bob", [(Op.WRITE, T, "foo"), (Op.READ, T, "bar"), (Op.DESCRIBE, T, "baz")]) == [
        True,
        False,
        True,
    ]
    assert check(auth, "malory", [(Op.DESCRIBE, T, "foo"), (Op.WRITE, T, "bar"), (Op.READ, T, "baz")]) == [
        True,
        False,
        False,
    ]


def test_host_address_acl_validation() -> None:
    host1, host2, local = "192.168.1.1", "192.168.1.2", "127.0.0.1"
    auth = authorizer(
        acl(T, "foo", LIT, "User:alice", host1, Op.READ, DENY),
        acl(T, "foo", LIT, "User:alice", "*", Op.READ, ALLOW),
        acl(T, "bar", LIT, "User:bob", host2, Op.READ, ALLOW),
        acl(T, "bar", LIT, "User:*", local, Op.DESCRIBE, ALLOW),
    )
    actions = [(Op.READ, T, "foo"), (Op.READ, T, "bar"), (Op.DESCRIBE, T, "bar")]
    assert check(auth, "alice", actions, local) == [True, False, True]
    assert check(auth, "alice", actions, host1) == [False, False, False]
    assert check(auth, "alice", actions, host2) == [True, False, False]
    assert check(auth, "bob", actions, local) == [False, False, True]
    assert check(auth, "bob", actions, host1) == [False, False, False]
    assert check(auth, "bob", actions, host2) == [False, True, True]


def test_authorization_with_many_acls() -> None:
    auth = authorizer(
        acl(T, "green2", LIT, "User:*", "*", Op.READ, ALLOW),
        acl(T, "green", PRE, "User:bob", "*", Op.READ, ALLOW),
        acl(T, "betamax4", LIT, "User:bob", "*", Op.READ, ALLOW),
        acl(T, "betamax", LIT, "User:bob", "*", Op.READ, ALLOW),
        acl(T, "beta", PRE, "User:*", "*", Op.READ, ALLOW),
        acl(T, "alpha", PRE, "User:*", "*", Op.READ, ALLOW),
        acl(T, "alp", PRE, "User:bob", "*", Op.READ, DENY),
        acl(G, "*", LIT, "User:bob", "*", Op.WRITE, ALLOW),
        acl(G, "wheel", LIT, "User:*", "*", Op.WRITE, DENY),
    )
    assert check(auth, "bob", [(Op.READ, T, "green1"), (Op.WRITE, G, "wheel")]) == [True, False]
    assert check(auth, "bob", [(Op.READ, T, "alpha"), (Op.WRITE, G, "arbitrary"), (Op.READ, T, "ala")]) == [
        False,
        True,
        False,
    ]


def test_prefix_acls() -> None:
    auth = authorizer(
        acl(T, "fooa", PRE, "User:alice", "*", Op.ALL, ALLOW),
        acl(T, "foobar", LIT, "User:bob", "*", Op.ALL, ALLOW),
        acl(T, "f", PRE, "User:bob", "*", Op.ALL, ALLOW),
    )
    assert check(auth, "bob", [(Op.WRITE, T, "foobarr"), (Op.READ, T, "goobar"), (Op.READ, T, "fooa")]) == [
        True,
        False,
        True,
    ]
    assert check(auth, "alice", [(Op.DESCRIBE, T, "fooa"), (Op.WRITE, T, "bar"), (Op.READ, T, "baz")]) == [
        True,
        False,
        False,
    ]


@pytest.mark.parametrize("allow_if_no_acl", [True, False])
def test_allow_everyone_if_no_acl_found(allow_if_no_acl: bool) -> None:
    auth = authorizer(
        acl(T, "topic1", LIT, "User:Alice", "*", Op.READ, ALLOW), allow_if_no_acl=allow_if_no_acl
    )
    # An ACL names topic1: bob is denied whatever the setting.
    assert check(auth, "bob", [(Op.READ, T, "topic1")]) == [False]
    # No ACL names topic2: the setting decides.
    assert check(auth, "bob", [(Op.READ, T, "topic2")]) == [allow_if_no_acl]


def test_super_users_and_parsing() -> None:
    assert parse_super_users("") == frozenset()
    assert parse_super_users(" User:bob ; User:alice;") == {"User:bob", "User:alice"}
    auth = authorizer(acl(T, "t", LIT, "User:*", "*", Op.ALL, DENY), super_users="User:admin")
    assert check(auth, "admin", [(Op.WRITE, T, "t"), (Op.ALTER, C, "kafka-cluster")]) == [True, True]
    assert check(auth, "bob", [(Op.WRITE, T, "t")]) == [False]


def test_follows_acl_removal() -> None:
    """ACLs replayed before the authorizer loads (start-up), then removed live."""
    store = MetadataStore()
    acl_id = uuid.uuid4()
    store.replay(AclKey(acl_id), acl(T, "t", LIT, "User:bob", "*", Op.READ, ALLOW).to_record(acl_id), 0)
    auth = StandardAuthorizer()
    auth.load(store)
    assert auth.authorize(user("bob"), HOST, Op.READ, T, "t")
    store.replay(AclKey(acl_id), RemoveAccessControlEntryRecord(acl_id), 0)
    assert not auth.authorize(user("bob"), HOST, Op.READ, T, "t")


def test_authorize_by_resource_type() -> None:
    """InitProducerId's check for idempotent producers (Kafka's authorizeByResourceType, from its
    AuthorizerTest cases): Write on some topic no DENY dominates."""
    assert not authorizer().authorize_any(user("bob"), HOST, Op.WRITE, T)
    assert authorizer(allow_if_no_acl=True).authorize_any(user("bob"), HOST, Op.WRITE, T)
    assert authorizer(super_users="User:bob").authorize_any(user("bob"), HOST, Op.WRITE, T)
    auth = authorizer(acl(T, "out-", PRE, "User:bob", "*", Op.WRITE, ALLOW))
    assert auth.authorize_any(user("bob"), HOST, Op.WRITE, T)
    assert not auth.authorize_any(user("alice"), HOST, Op.WRITE, T)
    assert not auth.authorize_any(user("bob"), HOST, Op.READ, T)
    # A literal DENY of *: nothing.
    denied = authorizer(
        acl(T, "out-", PRE, "User:bob", "*", Op.WRITE, ALLOW), acl(T, "*", LIT, "User:*", "*", Op.WRITE, DENY)
    )
    assert not denied.authorize_any(user("bob"), HOST, Op.WRITE, T)
    # A DENY on a shorter prefix dominates the ALLOW; on a longer one it does not.
    assert not authorizer(
        acl(T, "out-eu", PRE, "User:bob", "*", Op.WRITE, ALLOW),
        acl(T, "out", PRE, "User:bob", "*", Op.WRITE, DENY),
    ).authorize_any(user("bob"), HOST, Op.WRITE, T)
    assert authorizer(
        acl(T, "out", PRE, "User:bob", "*", Op.WRITE, ALLOW),
        acl(T, "out-eu", PRE, "User:bob", "*", Op.WRITE, DENY),
    ).authorize_any(user("bob"), HOST, Op.WRITE, T)
    # The same literal denied: not that one; ALL counts as the operation.
    assert not authorizer(
        acl(T, "t", LIT, "User:bob", "*", Op.WRITE, ALLOW), acl(T, "t", LIT, "User:bob", "*", Op.ALL, DENY)
    ).authorize_any(user("bob"), HOST, Op.WRITE, T)
    assert authorizer(acl(T, "*", LIT, "User:*", "*", Op.ALL, ALLOW)).authorize_any(
        user("x"), HOST, Op.WRITE, T
    )
    both = authorizer(
        acl(T, "*", LIT, "User:*", "*", Op.ALL, ALLOW), acl(T, "*", LIT, "User:x", "*", Op.WRITE, DENY)
    )
    assert not both.authorize_any(user("x"), HOST, Op.WRITE, T)
