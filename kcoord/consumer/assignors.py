"""The server-side partition assignors of KIP-848 consumer groups: ``uniform`` and ``range``.

Kafka's group coordinator computes a consumer group's target assignment with one of these
(broker config ``group.consumer.assignors``, default ``uniform,range``: the first is used unless
a member names another, client config ``group.remote.assignor``). Both follow Kafka's
``UniformAssignor`` (its homogeneous and heterogeneous builders) and ``RangeAssignor`` in
``group-coordinator/.../assignor``, as on Kafka's trunk of October 2024 (the 4.0 line, after
KAFKA-16944 and KAFKA-17710 rewrote them). They are pure functions
of a ``GroupSpec`` (every member's subscribed topic ids, rack, instance id and current target
assignment) and the subscribed topics' partition counts; the answer names every member of the
spec, with no entry for a topic of which a member gets no partition.

**uniform** balances first, then keeps what it can (Balance > Stickiness):

- *Homogeneous* (every member subscribes to the same topics): each member's quota is
  ``total // members``, and ``total % members`` of them get one more. A member keeps its current
  partitions up to its quota (topics by id, partitions ascending) and gives back the rest; the
  partitions nobody holds, then those given back, fill the members below quota in member-id
  order. Counts differ by at most one, and a member either keeps everything it had or receives
  nothing new.
- *Heterogeneous*: a member keeps every current partition of a topic it still subscribes to;
  the unassigned partitions go, topic by topic, to the topic's least-loaded subscribers (topics
  ordered by partitions per subscriber descending, then subscriber count ascending, then id);
  then, topic by topic and pass after pass (at most 16, stopping after a pass that moves
  nothing), the most-loaded holders of a topic's partitions hand their highest-numbered
  partitions to its least-loaded subscribers until, among the topic's subscribers, no holder of
  one of its partitions has two or more partitions more than another subscriber. Stickiness is
  weaker than in the homogeneous case: nothing moves while the kept and filled assignment meets
  that criterion, but as the balancing goes topic by topic, a member may give partitions away in
  one topic's pass and take others in a later one (as in Kafka).

**range** assigns each topic's partitions in contiguous ranges to its subscribers, ordered as
Kafka orders them: members with an instance id (static members) first, by instance id, then the
others by member id. Of ``p`` partitions over ``n`` subscribers the first ``p % n`` get
``p // n + 1``, the rest ``p // n``; topics with the same partition count and subscribers are
assigned alike (co-partitioned). Like Kafka's since KAFKA-16944 it ignores current assignments:
its stickiness is that of the instance ids (a static member that rejoins under a new member id
gets its range back while the group is otherwise unchanged).

Where this module decides what Kafka leaves to Java's hash order (member and topic iteration),
it sorts, so the same input always gives the same output:

- members by member id, topics by id compared as Kafka's ``Uuid.compareTo`` does (the two
  64-bit halves as signed longs), partitions ascending; so Kafka's own unit tests, which feed
  members in sorted order, give the same answers here, except for the homogeneous cases whose
  expectations depend on the hash order of Java's ``HashSet`` of topic ids;
- homogeneous uniform gives its ``total % members`` extra slots first to the members that
  currently hold more than ``total // members`` (in member-id order), then to the others in
  member-id order. Kafka hands them out in iteration order; this choice is one of Kafka's
  possible ones and moves the fewest partitions among them.

Current assignments are taken as they come, not trusted: a partition of a topic the member no
longer subscribes to, of a topic missing from the metadata, or outside the topic's partition
count is dropped, and a partition claimed by two members stays with the first by member id
(Kafka's ``TargetAssignmentBuilder`` never passes such input; Kafka's builders would keep the
out-of-range partition or give the duplicate to both).

Left out, on purpose:

- Racks. ``MemberSubscription.rack_id`` is carried, as Kafka's ``MemberSubscription`` carries
  it, and ignored, as Kafka's ``uniform`` and ``range`` ignore it: their rack-aware code was
  removed (KAFKA-16694, May 2024) and neither reads a rack. The topic metadata is therefore
  partition counts only (no replica racks).
- Static-member hand-over. When a static member rejoins under a new member id, Kafka's
  ``TargetAssignmentBuilder`` (the caller) passes the departed member's target assignment as
  the new member's current one; that is the caller's job here too.

A member subscribing to a topic the metadata does not describe makes ``assign`` raise
``PartitionAssignorError`` (Kafka's ``PartitionAssignorException``); Kafka's caller resolves
subscriptions against the metadata first, so it never happens there.
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from functools import cached_property
from typing import Protocol

MemberAssignment = Mapping[uuid.UUID, frozenset[int]]
"""A member's partitions, per topic id."""

GroupAssignment = dict[str, dict[uuid.UUID, frozenset[int]]]
"""The assignors' answer: member id -> topic id -> partitions (every member, topics non-empty)."""

TopicPartitionCounts = Mapping[uuid.UUID, int]
"""The subscribed topics' metadata: topic id -> partition count (Kafka's SubscribedTopicDescriber)."""

_MAX_BALANCE_PASSES = 16  # Kafka's MAX_ITERATION_COUNT of the heterogeneous balancing


class PartitionAssignorError(Exception):
    """The assignment cannot be computed: a member subscribes to a topic the metadata lacks."""


class SubscriptionType(enum.Enum):
    """Whether every member subscribes to the same topics (Kafka's SubscriptionType)."""

    HOMOGENEOUS = "Homogeneous"
    HETEROGENEOUS = "Heterogeneous"


@dataclass(frozen=True, slots=True)
class MemberSubscription:
    """What the assignor knows of a member (Kafka's MemberSubscriptionAndAssignmentImpl).

    ``assignment`` is the member's current *target* assignment: what the previous target
    assignment gave it (or, for a static member rejoining under a new id, its predecessor), the
    basis of stickiness. The assignors never modify it.
    """

    subscribed_topic_ids: frozenset[uuid.UUID]
    assignment: MemberAssignment = field(default_factory=dict)
    rack_id: str | None = None
    instance_id: str | None = None


@dataclass(frozen=True)
class GroupSpec:
    """The group as the assignor sees it (Kafka's GroupSpec): its members by member id."""

    members: Mapping[str, MemberSubscription]

    @cached_property
    def member_ids(self) -> tuple[str, ...]:
        """The member ids, sorted."""
        return tuple(sorted(self.members))

    @cached_property
    def subscription_type(self) -> SubscriptionType:
        """HOMOGENEOUS when every member subscribes to the same topics (or the group is empty)."""
        subscriptions = iter(self.members.values())
        first = next(subscriptions, None)
        if first is None:
            return SubscriptionType.HOMOGENEOUS
        topics = first.subscribed_topic_ids
        if all(m.subscribed_topic_ids == topics for m in subscriptions):
            return SubscriptionType.HOMOGENEOUS
        return SubscriptionType.HETEROGENEOUS


class ConsumerGroupPartitionAssignor(Protocol):
    """A server-side assignor of consumer groups (Kafka's ConsumerGroupPartitionAssignor)."""

    @property
    def name(self) -> str:
        """The name members ask for (``group.remote.assignor``)."""
        ...

    def assign(self, spec: GroupSpec, topics: TopicPartitionCounts) -> GroupAssignment:
        """The new target assignment of every member of ``spec``.

        Raises PartitionAssignorError when a member subscribes to a topic ``topics`` lacks.
        """
        ...


# --- helpers ------------------------------------------------------------------------------------

_SIGN_BITS = (1 << 127) | (1 << 63)


def _topic_key(topic_id: uuid.UUID) -> int:
    """Sort key ordering topic ids as Kafka's Uuid.compareTo: most significant 64 bits first,
    each half compared as a signed long (flipping the sign bits turns that into unsigned order)."""
    return topic_id.int ^ _SIGN_BITS


def _partition_counts(topic_ids: Iterable[uuid.UUID], topics: TopicPartitionCounts) -> dict[uuid.UUID, int]:
    """The partition count of each topic, in Kafka's topic order; PartitionAssignorError for a
    topic the metadata lacks."""
    counts: dict[uuid.UUID, int] = {}
    for topic_id in sorted(topic_ids, key=_topic_key):
        count = topics.get(topic_id)
        if count is None:
            raise PartitionAssignorError(
                f"members subscribe to topic {topic_id}, which the topic metadata does not describe"
            )
        counts[topic_id] = max(count, 0)
    return counts


def _empty(member_ids: tuple[str, ...]) -> GroupAssignment:
    return {member_id: {} for member_id in member_ids}


# --- uniform ------------------------------------------------------------------------------------


class UniformAssignor:
    """Kafka's ``uniform`` assignor: balanced, then sticky (see the module docstring)."""

    name = "uniform"

    def assign(self, spec: GroupSpec, topics: TopicPartitionCounts) -> GroupAssignment:
        if not spec.members:
            return {}
        if spec.subscription_type is SubscriptionType.HOMOGENEOUS:
            return _uniform_homogeneous(spec, topics)
        return _UniformHeterogeneous(spec, topics).build()


def _uniform_homogeneous(spec: GroupSpec, topics: TopicPartitionCounts) -> GroupAssignment:
    member_ids = spec.member_ids
    subscribed = spec.members[member_ids[0]].subscribed_topic_ids
    result = _empty(member_ids)
    if not subscribed:
        return result
    counts = _partition_counts(subscribed, topics)

    # What each member may keep: its current partitions of the subscribed topics, within range,
    # not already claimed by a member earlier in id order; topics in Kafka's order.
    claimed = {topic_id: bytearray(count) for topic_id, count in counts.items()}
    holdings: list[list[tuple[uuid.UUID, list[int]]]] = []
    held_counts: list[int] = []
    for member_id in member_ids:
        current = spec.members[member_id].assignment
        held: list[tuple[uuid.UUID, list[int]]] = []
        n_held = 0
        for topic_id in sorted(current, key=_topic_key):
            flags = claimed.get(topic_id)
            if flags is None:
                continue
            count = len(flags)
            partitions = []
            for p in sorted(current[topic_id]):
                if 0 <= p < count and not flags[p]:
                    flags[p] = 1
                    partitions.append(p)
            if partitions:
                held.append((topic_id, partitions))
                n_held += len(partitions)
        holdings.append(held)
        held_counts.append(n_held)

    # Quotas: total // members each, one more for total % members of them, those holding more
    # than the minimum first.
    n_members = len(member_ids)
    min_quota, extra = divmod(sum(counts.values()), n_members)
    quotas = [min_quota] * n_members
    for i in range(n_members):
        if extra == 0:
            break
        if held_counts[i] > min_quota:
            quotas[i] += 1
            extra -= 1
    for i in range(n_members):
        if extra == 0:
            break
        if quotas[i] == min_quota:
            quotas[i] += 1
            extra -= 1

    # The pool: partitions nobody holds (topics in order, partitions ascending), then those given
    # back by members over quota (each keeps its first ``quota`` partitions).
    pool: list[tuple[uuid.UUID, int]] = []
    for topic_id, flags in claimed.items():
        if flags.count(0):
            pool.extend((topic_id, p) for p, flag in enumerate(flags) if not flag)
    kept: list[dict[uuid.UUID, list[int]]] = []
    for i, held in enumerate(holdings):
        room = quotas[i]
        keep: dict[uuid.UUID, list[int]] = {}
        for topic_id, partitions in held:
            if room >= len(partitions):
                keep[topic_id] = partitions
                room -= len(partitions)
            else:
                if room:
                    keep[topic_id] = partitions[:room]
                pool.extend((topic_id, p) for p in partitions[room:])
                room = 0
        kept.append(keep)

    # Fill the members below quota, in member-id order.
    next_in_pool = 0
    for i, member_id in enumerate(member_ids):
        keep = kept[i]
        room = quotas[i] - min(held_counts[i], quotas[i])
        if room:
            for topic_id, p in pool[next_in_pool : next_in_pool + room]:
                keep.setdefault(topic_id, []).append(p)
            next_in_pool += room
        result[member_id] = {topic_id: frozenset(partitions) for topic_id, partitions in keep.items()}
    if next_in_pool != len(pool):  # cannot happen: the quotas add up to the partition count
        raise PartitionAssignorError("partitions were left unassigned")
    return result


class _Balancer:
    """Picks the least- and most-loaded of a topic's subscribers, one partition at a time (the
    state of Kafka's MemberAssignmentBalancer).

    The subscribers are sorted by load (partition count, then index). The least-loaded range
    ``order[:least_end]`` holds the members at ``least_level`` or one above: it is handed one
    partition per member in turn, and when every member has had one, the level rises by one and
    the range takes in the members whose count reaches it. The most-loaded range
    ``order[most_start:most_end]`` works the same way downwards from the top; a member found to
    have nothing to give up is swapped out of it. The two are balanced once their levels differ
    by one or less.
    """

    __slots__ = (
        "least_end",
        "least_level",
        "most_end",
        "most_level",
        "most_start",
        "next_least",
        "next_most",
        "order",
        "sizes",
    )

    def __init__(self, sizes: list[int]) -> None:
        self.sizes = sizes  # live: the builder's per-member partition counts
        self.order: list[int] = []
        self.least_end = self.least_level = self.next_least = 0
        self.most_start = self.most_end = self.most_level = self.next_most = 0

    def initialize(self, members: list[int]) -> int:
        """Start over on ``members`` (not empty); the spread between the most and least loaded."""
        sizes = self.sizes
        self.order = order = sorted(members, key=lambda m: (sizes[m], m))
        self.least_end = 0
        self.least_level = sizes[order[0]] - 1
        self.next_least = 0
        self.most_start = self.most_end = len(order)
        self.most_level = sizes[order[-1]] + 1
        self.next_most = len(order) - 1
        return sizes[order[-1]] - sizes[order[0]]

    def next_least_loaded(self) -> int:
        """The member to receive the next partition (counted as having received it)."""
        order, sizes = self.order, self.sizes
        if self.next_least >= self.least_end:
            self.least_level += 1
            while self.least_end < len(order) and sizes[order[self.least_end]] == self.least_level:
                self.least_end += 1
            self.next_least = 0
        member = order[self.next_least]
        self.next_least += 1
        return member

    def next_most_loaded(self) -> int:
        """The member to give up the next partition (counted as having given it), or -1."""
        order, sizes = self.order, self.sizes
        if self.next_most < self.most_start:
            if self.most_end <= self.most_start and self.most_start > 0:
                # Emptied by exclusions: restart from the next member down, so the range grows.
                self.most_level = sizes[order[self.most_start - 1]]
            else:
                self.most_level -= 1
            while self.most_start > 0 and sizes[order[self.most_start - 1]] == self.most_level:
                self.most_start -= 1
            self.next_most = self.most_end - 1
        if self.next_most < 0:
            return -1
        member = order[self.next_most]
        self.next_most -= 1
        return member

    def exclude_most_loaded(self) -> None:
        """Drop the member next_most_loaded last returned from the most-loaded range."""
        i, last = self.next_most + 1, self.most_end - 1
        order = self.order
        order[i], order[last] = order[last], order[i]
        self.most_end = last

    def is_balanced(self) -> bool:
        return self.most_level - self.least_level <= 1


class _UniformHeterogeneous:
    """Kafka's uniform heterogeneous builder: keep, fill the least loaded, then rebalance."""

    def __init__(self, spec: GroupSpec, topics: TopicPartitionCounts) -> None:
        self.spec = spec
        self.member_ids = member_ids = spec.member_ids
        self.subscribers: dict[uuid.UUID, list[int]] = {}
        for index, member_id in enumerate(member_ids):
            for topic_id in spec.members[member_id].subscribed_topic_ids:
                self.subscribers.setdefault(topic_id, []).append(index)
        self.counts = _partition_counts(self.subscribers, topics)
        self.owners = {topic_id: [-1] * count for topic_id, count in self.counts.items()}
        self.sizes = [0] * len(member_ids)
        self.target: list[dict[uuid.UUID, set[int]]] = [{} for _ in member_ids]

    def build(self) -> GroupAssignment:
        if not self.subscribers:
            return _empty(self.member_ids)
        self._keep_current()
        self._assign_unassigned()
        self._balance()
        return {
            member_id: {topic_id: frozenset(ps) for topic_id, ps in self.target[i].items()}
            for i, member_id in enumerate(self.member_ids)
        }

    def _topic_order(self, topic_id: uuid.UUID) -> tuple[Fraction, int, int]:
        """Partitions per subscriber descending, then subscriber count ascending, then id."""
        n_subscribers = len(self.subscribers[topic_id])
        return (Fraction(-self.counts[topic_id], n_subscribers), n_subscribers, _topic_key(topic_id))

    def _keep_current(self) -> None:
        """Each member keeps its current partitions of the topics it still subscribes to."""
        for index, member_id in enumerate(self.member_ids):
            member = self.spec.members[member_id]
            target = self.target[index]
            for topic_id, partitions in member.assignment.items():
                if topic_id not in member.subscribed_topic_ids:
                    continue
                owners = self.owners[topic_id]
                count = len(owners)
                keep = {p for p in partitions if 0 <= p < count and owners[p] == -1}
                if keep:
                    for p in keep:
                        owners[p] = index
                    target[topic_id] = keep
                    self.sizes[index] += len(keep)

    def _assign_unassigned(self) -> None:
        unassigned: dict[uuid.UUID, list[int]] = {}
        for topic_id, owners in self.owners.items():
            free = [p for p, owner in enumerate(owners) if owner == -1]
            if free:
                unassigned[topic_id] = free
        balancer = _Balancer(self.sizes)
        for topic_id in sorted(unassigned, key=self._topic_order):
            balancer.initialize(self.subscribers[topic_id])
            for p in unassigned[topic_id]:
                self._move(topic_id, p, balancer.next_least_loaded())

    def _balance(self) -> None:
        """Rebalance topic by topic until a whole pass moves nothing (or the pass limit)."""
        movable = sorted(
            (topic_id for topic_id, subs in self.subscribers.items() if len(subs) >= 2),
            key=self._topic_order,
        )
        if not movable:
            return
        balancer = _Balancer(self.sizes)
        last_moved = -1  # the topic that last moved something (at first, the first topic)
        for _ in range(_MAX_BALANCE_PASSES):
            for index, topic_id in enumerate(movable):
                if index == last_moved:
                    return  # a whole pass since that topic without a move
                if self._balance_topic(topic_id, balancer) or last_moved == -1:
                    last_moved = index

    def _balance_topic(self, topic_id: uuid.UUID, balancer: _Balancer) -> int:
        """Move the topic's partitions from its most- to its least-loaded subscribers until they
        are balanced; the number of partitions moved."""
        if balancer.initialize(self.subscribers[topic_id]) <= 1:
            return 0
        owners = self.owners[topic_id]
        # The topic's partitions grouped by owner; each owner gives up its last ones first.
        by_owner = sorted(range(len(owners)), key=lambda p: (owners[p], p))
        start: dict[int, int] = {}
        end: dict[int, int] = {}
        for i, p in enumerate(by_owner):
            start.setdefault(owners[p], i)
            end[owners[p]] = i + 1
        moved = 0
        while not balancer.is_balanced():
            giver = balancer.next_most_loaded()
            while giver != -1 and end.get(giver, 0) - start.get(giver, 0) <= 0:
                balancer.exclude_most_loaded()  # holds none of this topic's partitions
                giver = balancer.next_most_loaded()
            if giver == -1:
                break
            end[giver] -= 1
            p = by_owner[end[giver]]
            receiver = balancer.next_least_loaded()
            if balancer.is_balanced():
                break
            self._move(topic_id, p, receiver)
            moved += 1
        return moved

    def _move(self, topic_id: uuid.UUID, p: int, index: int) -> None:
        owners = self.owners[topic_id]
        previous = owners[p]
        if previous != -1:
            partitions = self.target[previous][topic_id]
            partitions.discard(p)
            if not partitions:
                del self.target[previous][topic_id]
            self.sizes[previous] -= 1
        self.target[index].setdefault(topic_id, set()).add(p)
        owners[p] = index
        self.sizes[index] += 1


# --- range --------------------------------------------------------------------------------------


class RangeAssignor:
    """Kafka's ``range`` assignor: contiguous ranges per topic (see the module docstring)."""

    name = "range"

    def assign(self, spec: GroupSpec, topics: TopicPartitionCounts) -> GroupAssignment:
        if not spec.members:
            return {}
        members = spec.members

        def order(member_id: str) -> tuple[int, str, str]:
            instance_id = members[member_id].instance_id
            if instance_id is not None:
                return (0, instance_id, member_id)  # static members first, by instance id
            return (1, member_id, "")

        ordered = sorted(members, key=order)
        subscribers: dict[uuid.UUID, list[str]] = {}
        for member_id in ordered:
            for topic_id in members[member_id].subscribed_topic_ids:
                subscribers.setdefault(topic_id, []).append(member_id)
        counts = _partition_counts(subscribers, topics)
        result = _empty(spec.member_ids)
        for topic_id, count in counts.items():
            subs = subscribers[topic_id]
            quota, extra = divmod(count, len(subs))
            start = 0
            for k, member_id in enumerate(subs):
                end = start + quota + (1 if k < extra else 0)
                if end > start:
                    result[member_id][topic_id] = frozenset(range(start, end))
                start = end
        return result


ASSIGNORS: dict[str, ConsumerGroupPartitionAssignor] = {
    assignor.name: assignor for assignor in (UniformAssignor(), RangeAssignor())
}
"""The server-side assignors by name; the first is the default (Kafka's ``uniform``)."""

DEFAULT_ASSIGNOR = UniformAssignor.name
