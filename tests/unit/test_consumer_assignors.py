"""The consumer group assignors (KIP-848 ``uniform`` and ``range``): properties, then Kafka's cases.

Properties, over random groups (members, subscriptions, partition counts, current assignments
that may be garbage):

- validity, both assignors: every member is answered; every partition of every topic some member
  subscribes to is assigned exactly once, to a subscriber; nothing else is assigned.
- uniform, homogeneous: partition counts differ by at most one.
- uniform, heterogeneous: Kafka's balance criterion (the stopping rule of its balancing loop):
  no member holds a partition of a topic while holding two or more partitions more than another
  subscriber of that topic.
- uniform stickiness, homogeneous, after members join, leave or change subscriptions and
  partitions are added, with the previous answer fed back as the current assignment: a member
  either keeps every partition it had (of topics it still subscribes to) or receives nothing new,
  i.e. it keeps ``min(previous, new count)`` of them, and the group keeps the most partitions any
  balanced assignment keeps.
- uniform stickiness, heterogeneous: what Kafka's builder guarantees, which is less: a complete
  current assignment meeting the balance criterion is kept unchanged. (Its balancing works topic
  by topic, so a member may give partitions away in one topic's pass and take others in a later
  one; Kafka's builder does the same, and its tests check exact answers, mirrored below.)
- uniform is a fixpoint: fed its own answer with nothing changed, it answers the same.
- range: contiguous ranges in Kafka's member order (static members by instance id, then member
  ids), the first ``p % n`` subscribers one partition more; co-partitioned topics alike; current
  assignments ignored; renaming static members changes nothing.
- both: determinism whatever the insertion order of the input's dicts and sets.

Then Kafka's own unit tests (UniformHeterogeneousAssignmentBuilderTest,
OptimizedUniformAssignmentBuilderTest, RangeAssignorTest), with Kafka's topic ids.
"""

from __future__ import annotations

import base64
import random
import uuid
from collections.abc import Iterable, Mapping
from typing import TypeVar

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from kcoord.consumer.assignors import (
    ASSIGNORS,
    DEFAULT_ASSIGNOR,
    GroupAssignment,
    GroupSpec,
    MemberSubscription,
    PartitionAssignorError,
    RangeAssignor,
    SubscriptionType,
    UniformAssignor,
)

T = TypeVar("T")
UNIFORM = UniformAssignor()
RANGE = RangeAssignor()
PROPERTY = settings(max_examples=300, deadline=None)


# --- strategies ---------------------------------------------------------------------------------

member_ids = st.lists(
    st.text(alphabet="abcdefgh", min_size=1, max_size=3), min_size=1, max_size=8, unique=True
)
topic_ids = st.lists(st.uuids(), min_size=1, max_size=4, unique=True)


@st.composite
def current_assignments(draw: st.DrawFn, topics: list[uuid.UUID]) -> dict[uuid.UUID, frozenset[int]]:
    """What a member may bring: partitions of any topic (or an unknown one), in or out of range."""
    candidates = [*topics, uuid.UUID(int=0)]
    chosen = draw(st.lists(st.sampled_from(candidates), unique=True, max_size=len(candidates)))
    return {t: draw(st.frozensets(st.integers(-1, 14), max_size=6)) for t in chosen}


@st.composite
def groups(draw: st.DrawFn, homogeneous: bool | None = None) -> tuple[GroupSpec, dict[uuid.UUID, int]]:
    topics = draw(topic_ids)
    counts = {t: draw(st.integers(1, 12)) for t in topics}
    ids = draw(member_ids)
    shared = frozenset(draw(st.sets(st.sampled_from(topics))))
    if homogeneous is None:
        homogeneous = draw(st.booleans())
    members = {}
    for m in ids:
        subscribed = shared if homogeneous else frozenset(draw(st.sets(st.sampled_from(topics))))
        static = draw(st.booleans())
        members[m] = MemberSubscription(
            subscribed,
            draw(current_assignments(topics)),
            instance_id=f"instance-{m[::-1]}" if static else None,
        )
    return GroupSpec(members), counts


def size(assignment: Mapping[uuid.UUID, frozenset[int]]) -> int:
    return sum(len(ps) for ps in assignment.values())


def check_valid(spec: GroupSpec, counts: Mapping[uuid.UUID, int], result: GroupAssignment) -> None:
    assert set(result) == set(spec.members)
    owners: dict[tuple[uuid.UUID, int], str] = {}
    for member_id, assignment in result.items():
        for topic_id, partitions in assignment.items():
            assert partitions, "no empty topic entries"
            assert topic_id in spec.members[member_id].subscribed_topic_ids
            for p in partitions:
                assert 0 <= p < counts[topic_id]
                assert (topic_id, p) not in owners, "assigned twice"
                owners[(topic_id, p)] = member_id
    subscribed = set().union(*(m.subscribed_topic_ids for m in spec.members.values()))
    expected = {(t, p) for t in subscribed for p in range(counts[t])}
    assert set(owners) == expected


def check_heterogeneous_balance(spec: GroupSpec, result: GroupAssignment) -> None:
    sizes = {m: size(a) for m, a in result.items()}
    for holder, assignment in result.items():
        for topic_id in assignment:
            for other, subscription in spec.members.items():
                if topic_id in subscription.subscribed_topic_ids:
                    assert sizes[holder] - sizes[other] <= 1, (holder, other, topic_id, sizes)


def with_current(spec: GroupSpec, current: GroupAssignment) -> GroupSpec:
    return GroupSpec(
        {
            m: MemberSubscription(s.subscribed_topic_ids, current.get(m, {}), s.rack_id, s.instance_id)
            for m, s in spec.members.items()
        }
    )


# --- validity and balance -----------------------------------------------------------------------


@PROPERTY
@given(groups())
def test_both_assignors_assign_every_subscribed_partition_once_to_a_subscriber(
    group: tuple[GroupSpec, dict[uuid.UUID, int]],
) -> None:
    spec, counts = group
    for assignor in (UNIFORM, RANGE):
        check_valid(spec, counts, assignor.assign(spec, counts))


@PROPERTY
@given(groups(homogeneous=True))
def test_uniform_homogeneous_counts_differ_by_at_most_one(
    group: tuple[GroupSpec, dict[uuid.UUID, int]],
) -> None:
    spec, counts = group
    assert spec.subscription_type is SubscriptionType.HOMOGENEOUS
    result = UNIFORM.assign(spec, counts)
    sizes = [size(a) for a in result.values()]
    assert max(sizes) - min(sizes) <= 1


@PROPERTY
@given(groups(homogeneous=False))
def test_uniform_heterogeneous_meets_kafkas_balance_criterion(
    group: tuple[GroupSpec, dict[uuid.UUID, int]],
) -> None:
    spec, counts = group
    result = UNIFORM.assign(spec, counts)
    check_heterogeneous_balance(spec, result)


@PROPERTY
@given(groups())
def test_uniform_answer_fed_back_is_a_fixpoint(group: tuple[GroupSpec, dict[uuid.UUID, int]]) -> None:
    spec, counts = group
    first = UNIFORM.assign(spec, counts)
    assert UNIFORM.assign(with_current(spec, first), counts) == first


@PROPERTY
@given(groups(), st.randoms(use_true_random=False))
def test_same_input_same_answer_whatever_the_insertion_order(
    group: tuple[GroupSpec, dict[uuid.UUID, int]], rnd: random.Random
) -> None:
    spec, counts = group

    def shuffled(items: Iterable[T]) -> list[T]:
        listed = list(items)
        rnd.shuffle(listed)
        return listed

    reordered = GroupSpec(
        {
            m: MemberSubscription(
                frozenset(shuffled(s.subscribed_topic_ids)),
                {t: frozenset(shuffled(ps)) for t, ps in shuffled(s.assignment.items())},
                s.rack_id,
                s.instance_id,
            )
            for m, s in shuffled(spec.members.items())
        }
    )
    reordered_counts = dict(shuffled(counts.items()))
    for assignor in (UNIFORM, RANGE):
        assert assignor.assign(reordered, reordered_counts) == assignor.assign(spec, counts)


# --- uniform stickiness -------------------------------------------------------------------------


@st.composite
def changes(draw: st.DrawFn, homogeneous: bool) -> tuple[GroupSpec, dict[uuid.UUID, int]]:
    """A group assigned once, then changed, with the first answer as the current assignment:
    members leave, join or change subscriptions (homogeneous: the whole group together), topics
    grow. The changed group and its partition counts."""
    topics = draw(topic_ids)
    counts = {t: draw(st.integers(1, 12)) for t in topics}
    subscription = st.frozensets(st.sampled_from(topics))
    shared_before, shared_after = draw(subscription), draw(subscription)
    if draw(st.booleans()):
        shared_after = shared_before
    before_ids = draw(member_ids)
    before = GroupSpec(
        {
            m: MemberSubscription(
                shared_before if homogeneous else draw(subscription), draw(current_assignments(topics))
            )
            for m in before_ids
        }
    )
    previous = UNIFORM.assign(before, counts)

    staying = draw(st.lists(st.sampled_from(before_ids), unique=True, min_size=1))
    joining = draw(st.lists(st.text(alphabet="stuvwxyz", min_size=1, max_size=3), unique=True, max_size=4))
    after = {}
    for m in staying:
        if homogeneous:
            subscribed = shared_after
        elif draw(st.integers(0, 3)) == 0:
            subscribed = draw(subscription)
        else:
            subscribed = before.members[m].subscribed_topic_ids
        after[m] = MemberSubscription(subscribed, previous[m])
    for m in joining:
        after[m] = MemberSubscription(shared_after if homogeneous else draw(subscription), {})
    grown = {t: c + draw(st.integers(0, 3)) for t, c in counts.items()}
    return GroupSpec(after), grown


def previous_counts(spec: GroupSpec) -> dict[str, int]:
    """Each member's current partitions of topics it still subscribes to."""
    return {
        m: sum(len(ps) for t, ps in s.assignment.items() if t in s.subscribed_topic_ids)
        for m, s in spec.members.items()
    }


def kept_counts(spec: GroupSpec, result: GroupAssignment) -> dict[str, int]:
    return {
        m: sum(len(ps & s.assignment.get(t, frozenset())) for t, ps in result[m].items())
        for m, s in spec.members.items()
    }


@PROPERTY
@given(changes(homogeneous=True))
def test_uniform_homogeneous_members_keep_what_they_can_after_a_change(
    change: tuple[GroupSpec, dict[uuid.UUID, int]],
) -> None:
    spec, counts = change
    result = UNIFORM.assign(spec, counts)
    check_valid(spec, counts, result)
    had, kept = previous_counts(spec), kept_counts(spec, result)
    for m in spec.members:
        # Either it kept everything it had, or everything it has now it had before.
        assert kept[m] == min(had[m], size(result[m])), m
    # And the group keeps the most any balanced assignment keeps: every member its previous
    # count up to the minimum quota, and the extra slots go to members holding more than that.
    subscribed = spec.members[spec.member_ids[0]].subscribed_topic_ids
    min_quota, extra = divmod(sum(counts[t] for t in subscribed), len(spec.members))
    over = sum(1 for m in spec.members if had[m] > min_quota)
    assert sum(kept.values()) == sum(min(n, min_quota) for n in had.values()) + min(extra, over)


@PROPERTY
@given(changes(homogeneous=False))
def test_uniform_heterogeneous_after_a_change_is_valid_and_balanced(
    change: tuple[GroupSpec, dict[uuid.UUID, int]],
) -> None:
    spec, counts = change
    result = UNIFORM.assign(spec, counts)
    check_valid(spec, counts, result)
    check_heterogeneous_balance(spec, result)


@PROPERTY
@given(groups(homogeneous=False), st.data())
def test_uniform_heterogeneous_moves_nothing_when_the_current_assignment_is_balanced(
    group: tuple[GroupSpec, dict[uuid.UUID, int]], data: st.DataObject
) -> None:
    """Kafka's heterogeneous builder moves partitions only to restore its balance criterion: a
    complete current assignment that meets it is kept as it is (whoever computed it)."""
    spec, counts = group
    current: dict[str, dict[uuid.UUID, set[int]]] = {m: {} for m in spec.members}
    for topic_id, count in counts.items():
        subscribers = [m for m in spec.member_ids if topic_id in spec.members[m].subscribed_topic_ids]
        if subscribers:
            for p in range(count):
                current[data.draw(st.sampled_from(subscribers))].setdefault(topic_id, set()).add(p)
    frozen = {m: {t: frozenset(ps) for t, ps in a.items()} for m, a in current.items()}
    sizes = {m: size(a) for m, a in frozen.items()}
    assume(
        all(
            sizes[holder] - sizes[other] <= 1
            for holder, a in frozen.items()
            for t in a
            for other, s in spec.members.items()
            if t in s.subscribed_topic_ids
        )
    )
    assert UNIFORM.assign(with_current(spec, frozen), counts) == frozen


# --- range --------------------------------------------------------------------------------------


def range_order(spec: GroupSpec) -> list[str]:
    static = sorted((s.instance_id, m) for m, s in spec.members.items() if s.instance_id is not None)
    dynamic = sorted(m for m, s in spec.members.items() if s.instance_id is None)
    return [m for _, m in static] + dynamic


@PROPERTY
@given(groups())
def test_range_gives_contiguous_ranges_the_first_subscribers_one_more(
    group: tuple[GroupSpec, dict[uuid.UUID, int]],
) -> None:
    spec, counts = group
    result = RANGE.assign(spec, counts)
    order = range_order(spec)
    for topic_id, count in counts.items():
        subscribers = [m for m in order if topic_id in spec.members[m].subscribed_topic_ids]
        if not subscribers:
            continue
        quota, extra = divmod(count, len(subscribers))
        start = 0
        for k, m in enumerate(subscribers):
            got = sorted(result[m].get(topic_id, ()))
            assert len(got) == quota + (1 if k < extra else 0)
            assert got == list(range(start, start + len(got)))  # contiguous, after the previous
            start += len(got)


@PROPERTY
@given(groups(homogeneous=True), st.integers(1, 12))
def test_range_assigns_co_partitioned_topics_alike(
    group: tuple[GroupSpec, dict[uuid.UUID, int]], partitions: int
) -> None:
    spec, _ = group
    topics = sorted(spec.members[spec.member_ids[0]].subscribed_topic_ids)
    counts = dict.fromkeys(topics, partitions)
    result = RANGE.assign(spec, counts)
    for assignment in result.values():
        assert len({assignment.get(t, frozenset()) for t in topics}) <= 1


@PROPERTY
@given(groups(), st.data())
def test_range_ignores_current_assignments_and_static_member_ids(
    group: tuple[GroupSpec, dict[uuid.UUID, int]], data: st.DataObject
) -> None:
    spec, counts = group
    result = RANGE.assign(spec, counts)
    # The current assignments change nothing.
    topics = list(counts)
    reshuffled = GroupSpec(
        {
            m: MemberSubscription(
                s.subscribed_topic_ids, data.draw(current_assignments(topics)), None, s.instance_id
            )
            for m, s in spec.members.items()
        }
    )
    assert RANGE.assign(reshuffled, counts) == result
    # Static members rejoining under new member ids get what they had.
    renamed = {m: (f"new-{m}" if s.instance_id is not None else m) for m, s in spec.members.items()}
    rejoined = GroupSpec({renamed[m]: s for m, s in spec.members.items()})
    again = RANGE.assign(rejoined, counts)
    assert {renamed[m]: a for m, a in result.items()} == again


# --- Kafka's unit tests -------------------------------------------------------------------------


def kafka_uuid(text: str) -> uuid.UUID:
    """Kafka's Uuid.fromString: URL-safe base64 of the 16 bytes."""
    return uuid.UUID(bytes=base64.urlsafe_b64decode(text + "=="))


T1 = kafka_uuid("T1-A4s3VTwiI5CTbEp6POw")
T2 = kafka_uuid("T2-B4s3VTwiI5YHbPp6YUe")
T3 = kafka_uuid("T3-CU8fVTLCz5YMkLoDQsa")
T4 = kafka_uuid("T4-Tw9fVTLCz5HbPp6YQsa")
NOTHING: dict[uuid.UUID, frozenset[int]] = {}


def member(
    topics: set[uuid.UUID],
    assignment: Mapping[uuid.UUID, set[int]] | None = None,
    instance_id: str | None = None,
) -> MemberSubscription:
    current = {t: frozenset(ps) for t, ps in (assignment or {}).items()}
    return MemberSubscription(frozenset(topics), current, instance_id=instance_id)


def plain(result: GroupAssignment) -> dict[str, dict[uuid.UUID, set[int]]]:
    return {m: {t: set(ps) for t, ps in a.items()} for m, a in result.items()}


def test_assignors_by_name_uniform_first() -> None:
    assert list(ASSIGNORS) == ["uniform", "range"] and DEFAULT_ASSIGNOR == "uniform"
    assert isinstance(ASSIGNORS["uniform"], UniformAssignor) and isinstance(ASSIGNORS["range"], RangeAssignor)


@pytest.mark.parametrize("assignor", [UNIFORM, RANGE], ids=["uniform", "range"])
def test_no_members_no_subscriptions_unknown_topics(assignor: UniformAssignor | RangeAssignor) -> None:
    assert assignor.assign(GroupSpec({}), {T1: 3}) == {}
    # testOneMemberNoTopicSubscription / testTwoMembersNoTopicSubscription (every member answered)
    assert assignor.assign(GroupSpec({"A": member(set()), "B": member(set())}), {T1: 3}) == {"A": {}, "B": {}}
    # testOneMemberSubscribedToNonexistentTopic / testTwoMembersSubscribedToNonexistentTopics
    with pytest.raises(PartitionAssignorError):
        assignor.assign(GroupSpec({"A": member({T2})}), {T1: 3})
    with pytest.raises(PartitionAssignorError):
        assignor.assign(GroupSpec({"A": member({T3}), "B": member({T2})}), {T1: 3})


def test_uniform_homogeneous_more_members_than_partitions() -> None:
    # OptimizedUniformAssignmentBuilderTest.testFirstAssignmentNumMembersGreaterThanTotalNumPartitions
    spec = GroupSpec({m: member({T3}) for m in "ABC"})
    assert plain(UNIFORM.assign(spec, {T3: 2})) == {"A": {T3: {0}}, "B": {T3: {1}}, "C": {}}


def test_uniform_homogeneous_unbalanced_previous_assignment() -> None:
    # OptimizedUniformAssignmentBuilderTest:
    # testReassignmentForTwoMembersTwoTopicsGivenUnbalancedPrevAssignment
    spec = GroupSpec(
        {
            "A": member({T1, T2}, {T1: {0, 1}, T2: {0, 1}}),
            "B": member({T1, T2}, {T1: {2}, T2: {2}}),
        }
    )
    assert plain(UNIFORM.assign(spec, {T1: 3, T2: 3})) == {
        "A": {T1: {0, 1}, T2: {0}},
        "B": {T1: {2}, T2: {1, 2}},
    }


def test_uniform_homogeneous_member_joins() -> None:
    # OptimizedUniformAssignmentBuilderTest:
    # testReassignmentWhenOneMemberAddedAfterInitialAssignmentWithTwoMembersTwoTopics
    spec = GroupSpec(
        {
            "A": member({T1, T2}, {T1: {0, 2}, T2: {0}}),
            "B": member({T1, T2}, {T1: {1}, T2: {1, 2}}),
            "C": member({T1, T2}),
        }
    )
    assert plain(UNIFORM.assign(spec, {T1: 3, T2: 3})) == {
        "A": {T1: {0, 2}},
        "B": {T1: {1}, T2: {1}},
        "C": {T2: {0, 2}},
    }


def test_uniform_homogeneous_member_leaves_tie_broken_by_topic_id() -> None:
    # OptimizedUniformAssignmentBuilderTest:
    # testReassignmentWhenOneMemberRemovedAfterInitialAssignmentWithThreeMembersTwoTopics:
    # Kafka hands out the departed member's T1-2 and T2-2 in its HashSet's topic order (T2 first
    # there: A gets T2-2); here topics go in id order, so A gets T1-2. Counts and stickiness alike.
    spec = GroupSpec(
        {
            "A": member({T1, T2}, {T1: {0}, T2: {0}}),
            "B": member({T1, T2}, {T1: {1}, T2: {1}}),
        }
    )
    assert plain(UNIFORM.assign(spec, {T1: 3, T2: 3})) == {
        "A": {T1: {0, 2}, T2: {0}},
        "B": {T1: {1}, T2: {1, 2}},
    }


def test_uniform_homogeneous_extra_slot_goes_to_the_member_holding_more() -> None:
    # 3 partitions over 2 members: Kafka gives the extra slot to the first member it iterates
    # (A, in sorted order), and B's second partition would move to A. Here B keeps both.
    spec = GroupSpec({"A": member({T1}, {T1: {0}}), "B": member({T1}, {T1: {1, 2}})})
    assert plain(UNIFORM.assign(spec, {T1: 3})) == {"A": {T1: {0}}, "B": {T1: {1, 2}}}


def test_uniform_heterogeneous_first_assignment() -> None:
    # UniformHeterogeneousAssignmentBuilderTest.testFirstAssignmentTwoMembersTwoTopics
    spec = GroupSpec({"A": member({T1, T3}), "B": member({T3})})
    assert spec.subscription_type is SubscriptionType.HETEROGENEOUS
    assert plain(UNIFORM.assign(spec, {T1: 3, T3: 6})) == {
        "A": {T1: {0, 1, 2}, T3: {4}},
        "B": {T3: {0, 1, 2, 3, 5}},
    }
    # ... testFirstAssignmentNumMembersGreaterThanTotalNumPartitions
    spec = GroupSpec({"A": member({T3}), "B": member({T3}), "C": member({T1})})
    assert plain(UNIFORM.assign(spec, {T3: 1, T1: 2})) == {"A": {T3: {0}}, "B": {}, "C": {T1: {0, 1}}}


def test_uniform_heterogeneous_unbalanced_previous_assignment() -> None:
    # UniformHeterogeneousAssignmentBuilderTest:
    # testReassignmentForTwoMembersThreeTopicsGivenUnbalancedPrevAssignment
    spec = GroupSpec(
        {
            "A": member({T1}, {T1: {0, 1, 2}}),
            "B": member({T1, T2}, {T1: {3}, T2: {0}}),
            "C": member({T1, T2, T3}, {T1: {4, 5}, T2: {1, 2, 3}, T3: {0, 1, 2, 3}}),
        }
    )
    assert plain(UNIFORM.assign(spec, {T1: 6, T2: 4, T3: 4})) == {
        "A": {T1: {0, 1, 2, 5}},
        "B": {T1: {3}, T2: {0, 1, 2, 3}},
        "C": {T1: {4}, T3: {0, 1, 2, 3}},
    }


def test_uniform_heterogeneous_member_and_partitions_added() -> None:
    # UniformHeterogeneousAssignmentBuilderTest:
    # testReassignmentWhenOneMemberAddedAndPartitionsAddedTwoMembersTwoTopics
    spec = GroupSpec(
        {
            "A": member({T1}, {T1: {0, 2}, T2: {0}}),
            "B": member({T1, T2}, {T1: {1}, T2: {1, 2}}),
            "C": member({T1, T2}),
        }
    )
    assert plain(UNIFORM.assign(spec, {T1: 6, T2: 7})) == {
        "A": {T1: {0, 2, 3, 4, 5}},
        "B": {T1: {1}, T2: {1, 2, 6}},
        "C": {T2: {0, 3, 4, 5}},
    }
    # ... testReassignmentWhenOneSubscriptionRemovedAfterInitialAssignmentWithTwoMembersTwoTopics
    spec = GroupSpec(
        {
            "A": member({T1}, {T1: {0, 2}, T2: {1, 3}}),
            "B": member({T1, T2}, {T1: {1}, T2: {0, 2, 4}}),
        }
    )
    assert plain(UNIFORM.assign(spec, {T1: 3, T2: 5})) == {"A": {T1: {0, 1, 2}}, "B": {T2: {0, 1, 2, 3, 4}}}


def test_uniform_heterogeneous_balances_topic_by_topic() -> None:
    # Kafka's builder balances one topic at a time, among the holders of that topic's partitions:
    # in T1's pass B (no T1 partition) stands aside and A gives T1 partitions down to the level of
    # C and D; T2's pass then gives A one of B's. A gives six partitions away and takes one back
    # where giving five would do, as the homogeneous builder does once E is gone. As in Kafka.
    subscribed = {T1, T2}
    spec = GroupSpec(
        {
            "A": member(subscribed, {T1: set(range(10))}),
            "B": member(subscribed, {T2: set(range(10))}),
            "C": member(subscribed),
            "D": member(subscribed),
            "E": member(set()),
        }
    )
    assert plain(UNIFORM.assign(spec, {T1: 10, T2: 10})) == {
        "A": {T1: {0, 1, 2, 3}, T2: {5}},
        "B": {T2: {0, 1, 2, 3, 4}},
        "C": {T1: {5, 7, 9}, T2: {7, 9}},
        "D": {T1: {4, 6, 8}, T2: {6, 8}},
        "E": {},
    }
    homogeneous = GroupSpec({m: s for m, s in spec.members.items() if m != "E"})
    assert plain(UNIFORM.assign(homogeneous, {T1: 10, T2: 10})) == {
        "A": {T1: {0, 1, 2, 3, 4}},
        "B": {T2: {0, 1, 2, 3, 4}},
        "C": {T1: {5, 6, 7, 8, 9}},
        "D": {T2: {5, 6, 7, 8, 9}},
    }


def test_range_first_assignments() -> None:
    # RangeAssignorTest.testFirstAssignmentTwoMembersTwoTopicsSameSubscriptions
    spec = GroupSpec({"A": member({T1, T3}), "B": member({T1, T3})})
    assert plain(RANGE.assign(spec, {T1: 3, T3: 2})) == {"A": {T1: {0, 1}, T3: {0}}, "B": {T1: {2}, T3: {1}}}
    # ... testFirstAssignmentThreeMembersThreeTopicsDifferentSubscriptions
    spec = GroupSpec({"A": member({T1, T2}), "B": member({T3}), "C": member({T2, T3})})
    assert plain(RANGE.assign(spec, {T1: 3, T2: 3, T3: 2})) == {
        "A": {T1: {0, 1, 2}, T2: {0, 1}},
        "B": {T3: {0}},
        "C": {T2: {2}, T3: {1}},
    }
    # ... testFirstAssignmentNumMembersGreaterThanNumPartitions
    spec = GroupSpec({m: member({T1, T3}) for m in "ABC"})
    assert plain(RANGE.assign(spec, {T1: 3, T3: 2})) == {
        "A": {T1: {0}, T3: {0}},
        "B": {T1: {1}, T3: {1}},
        "C": {T1: {2}},
    }


def test_range_recomputes_from_scratch_after_subscriptions_change() -> None:
    # RangeAssignorTest:
    # testReassignmentWhenMultipleSubscriptionsRemovedAfterInitialAssignmentWithThreeMembersTwoTopics
    spec = GroupSpec(
        {
            "A": member({T1}, {T1: {0, 1, 2}, T2: {0}}),
            "B": member({T1, T2, T3}, {T2: {1}}),
            "C": member({T2}, {T2: {2}, T3: {0, 1}}),
        }
    )
    assert plain(RANGE.assign(spec, {T1: 3, T2: 3, T3: 2})) == {
        "A": {T1: {0, 1}},
        "B": {T1: {2}, T2: {0, 1}, T3: {0, 1}},
        "C": {T2: {2}},
    }


def test_range_mixed_static_membership() -> None:
    # RangeAssignorTest.testMixedStaticMembership: static members first, by instance id.
    spec = GroupSpec(
        {
            "A": member({T1}, instance_id="instanceA"),
            "C": member({T1}, instance_id="instanceC"),
            "B": member({T1}),
        }
    )
    first = RANGE.assign(spec, {T1: 5})
    assert plain(first) == {"A": {T1: {0, 1}}, "C": {T1: {2, 3}}, "B": {T1: {4}}}
    rejoined = GroupSpec(
        {
            "memberA1": member({T1}, instance_id="instanceA"),
            "C": member({T1}, instance_id="instanceC"),
            "B": member({T1}),
        }
    )
    again = RANGE.assign(rejoined, {T1: 5})
    assert again["memberA1"] == first["A"] and again["B"] == first["B"] and again["C"] == first["C"]


def test_racks_are_ignored() -> None:
    plain_spec = GroupSpec({"A": member({T1, T2}), "B": member({T1})})
    racked = GroupSpec(
        {
            m: MemberSubscription(s.subscribed_topic_ids, rack_id=f"rack-{m}")
            for m, s in plain_spec.members.items()
        }
    )
    for assignor in (UNIFORM, RANGE):
        assert assignor.assign(racked, {T1: 4, T2: 3}) == assignor.assign(plain_spec, {T1: 4, T2: 3})
