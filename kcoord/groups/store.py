"""The groups of one coordinator partition, of every type, and the one ``replay`` their records
go through at start-up and live (docs/architecture.md, principle 1).

Group ids form one namespace across group types, as in Kafka: an id held by a classic group is
"not a share group" and the other way round. Each group type (classic/, share/) is a
``GroupKind``: it keeps its own groups and replays its own records, and knows the others only
through the ``GroupNamespace`` it is given. The store routes every record to the kind that
registered its key class, and keeps what belongs to group ids rather than to one group type:
committed offsets (offsets.py) and config overrides (record type 103). It is what the coordinator
runtime holds per shard (``CoordinatorState``).

Offsets committed by a consumer that uses no group membership live in a "simple" group, as in
Kafka: the commit creates it (the handler asks the kind that hosts simple groups), and at load
every group id with offsets but no group gets one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, Generic, Protocol, TypeVar

from kcoord.groups.migration import MigratingGroup
from kcoord.groups.offsets import Offsets, OffsetsLoader
from kcoord.groups.records import OFFSET_COMMIT_TYPES, GroupConfigKey, GroupConfigValue, OffsetCommitKey
from kcoord.protocol.fields import RecordFormatError
from kcoord.runtime.outcome import Operation, Outcome, Record
from kcoord.runtime.records import RecordRegistry
from kcoord.runtime.shard import Loader


class GroupNamespace(Protocol):
    """What a group kind may ask about the groups of other kinds."""

    def group_type(self, group_id: str) -> str | None: ...

    def configs_of(self, group_id: str) -> dict[str, str]: ...

    @property
    def offsets(self) -> Offsets: ...

    @property
    def classic_groups(self) -> ClassicGroupHost | None:
        """The classic kind, for groups changing protocol; None where no kind hosts them."""
        ...


class GroupKind(Protocol):
    """The groups of one type in one coordinator partition."""

    @property
    def group_type(self) -> str:
        """The type as ListGroups names it: classic, consumer, share."""
        ...

    @property
    def replayers(self) -> Mapping[type, Callable[[Any, Any, int], None]]:
        """Key class -> how a record with such a key is applied: ``(key, value, now)``."""
        ...

    def loaders(self, registry: RecordRegistry, now: int) -> Mapping[int, Loader]: ...

    def loaded(self, now: int) -> None: ...

    def link(self, records: list[Record], base_offset: int) -> list[Record]: ...

    def holds(self, group_id: str) -> bool: ...

    def group_ids(self) -> Iterable[str]: ...

    def next_deadline(self, group_id: str) -> int | None: ...

    def on_timer(self, group_id: str, now: int) -> Outcome: ...

    def configs_changed(self, group_id: str, configs: dict[str, str]) -> None: ...

    def expire_offsets(self, group_id: str, now: int, retention_ms: int) -> Outcome:
        """KIP-211: tombstones for the group's expired offsets, and for the group once it is
        empty with none left."""
        ...

    def snapshot(self) -> dict[str, Any]:
        """What survives a restart, comparable with ==, for the replay property tests."""
        ...


class Timed(Protocol):
    def next_deadline(self) -> int | None: ...


G = TypeVar("G", bound=Timed)


class GroupsById(Generic[G]):
    """The groups of one kind by id: the keys and deadlines part of a GroupKind."""

    def __init__(self) -> None:
        self.groups: dict[str, G] = {}

    def get(self, group_id: str) -> G | None:
        return self.groups.get(group_id)

    def holds(self, group_id: str) -> bool:
        return group_id in self.groups

    def group_ids(self) -> Iterable[str]:
        return self.groups.keys()

    def next_deadline(self, group_id: str) -> int | None:
        group = self.groups.get(group_id)
        return group.next_deadline() if group is not None else None


class ClassicGroupHost(GroupKind, Protocol):
    """The kind of classic groups: it hosts the offsets of consumers without membership ("simple"
    groups), and groups moving to and from the consumer protocol (groups/migration.py)."""

    def create_simple_group(self, group_id: str, now: int) -> None: ...

    def is_empty(self, group_id: str) -> bool:
        """Whether the id is a classic group without members (another kind may take the id)."""
        ...

    def migration_view(self, group_id: str) -> MigratingGroup:
        """The group as a consumer group would take it over. Raises CannotUpgrade unless it has
        members that all speak the consumer protocol with assignments that parse."""
        ...

    def hand_over(self, group_id: str, now: int) -> Outcome:
        """Give the id up: the group's tombstone (its offsets stay), and REBALANCE_IN_PROGRESS for
        the JoinGroup and SyncGroup requests it holds, so that their members join again."""
        ...

    def take_over(self, group: MigratingGroup, rebalance: bool, now: int) -> Outcome:
        """Become the group: its metadata record, then (continuing on the replayed record) the live
        group with fresh member sessions, and a rebalance if ``rebalance``."""
        ...


KindT = TypeVar("KindT", bound=GroupKind)
KindFactory = Callable[[GroupNamespace], GroupKind]


class GroupStore:
    def __init__(
        self, kinds: Iterable[KindFactory], classic_groups: type[ClassicGroupHost] | None = None
    ) -> None:
        self.group_configs: dict[str, dict[str, str]] = {}  # GROUP resource config overrides
        self._offsets = Offsets()
        self._kinds: dict[type, GroupKind] = {}
        self._replay: dict[type, Callable[[Any, Any, int], None]] = {
            OffsetCommitKey: self._offsets.replay,
            GroupConfigKey: self._replay_configs,
        }
        for make in kinds:
            kind = make(self)
            self._kinds[type(kind)] = kind
            for cls, replay in kind.replayers.items():
                if cls in self._replay:
                    raise ValueError(f"records keyed by {cls.__name__} are replayed twice")
                self._replay[cls] = replay
        self._all = tuple(self._kinds.values())
        # Each kind's dict of groups by id, where the kind keeps one (GroupsById): the runtime
        # asks which kind holds a group after every operation (its timer), and a dict lookup is C
        # where kind.holds is a call through the GroupKind protocol.
        self._by_id: tuple[tuple[dict[str, Any] | None, GroupKind], ...] = tuple(
            (kind.groups if isinstance(kind, GroupsById) else None, kind) for kind in self._all
        )
        self._classic: ClassicGroupHost | None = (
            self._kinds[classic_groups] if classic_groups is not None else None  # type: ignore[assignment]
        )

    def kind(self, cls: type[KindT]) -> KindT:
        return self._kinds[cls]  # type: ignore[return-value]

    def kinds(self) -> tuple[GroupKind, ...]:
        return self._all

    def _kind_of(self, group_id: str) -> GroupKind | None:
        for groups, kind in self._by_id:
            if group_id in groups if groups is not None else kind.holds(group_id):
                return kind
        return None

    # --- the namespace --------------------------------------------------------------------------
    def group_type(self, group_id: str) -> str | None:
        kind = self._kind_of(group_id)
        return kind.group_type if kind is not None else None

    def held_by_another_type(self, group_id: str, group_type: str) -> bool:
        """Whether a group of a type other than ``group_type`` has the id (the APIs of one type
        answer GROUP_ID_NOT_FOUND for it, as Kafka's "not a ... group")."""
        found = self.group_type(group_id)
        return found is not None and found != group_type

    @property
    def offsets(self) -> Offsets:
        return self._offsets

    @property
    def classic_groups(self) -> ClassicGroupHost | None:
        return self._classic

    def configs_of(self, group_id: str) -> dict[str, str]:
        return self.group_configs.get(group_id, {})

    def config_group_ids(self) -> list[str]:
        """The groups of this partition that override a group config (ListConfigResources)."""
        return list(self.group_configs)

    # --- records ----------------------------------------------------------------------------------
    def replay(self, key: Any, value: Any, now: int) -> None:
        self._replay[type(key)](key, value, now)

    def replay_transactional(
        self, producer_id: int, producer_epoch: int, key: Any, value: Any, now: int
    ) -> None:
        # Kafka's group coordinator writes only offset commits in transactions (TxnOffsetCommit).
        if type(key) is not OffsetCommitKey:
            raise RecordFormatError(f"{type(key).__name__} records are never transactional")
        self._offsets.replay_transactional(producer_id, key, value)

    def replay_end_transaction(self, producer_id: int, producer_epoch: int, commit: bool, now: int) -> None:
        self._offsets.end_transaction(producer_id, commit)

    def _replay_configs(self, key: GroupConfigKey, value: GroupConfigValue | None, now: int) -> None:
        configs = dict(value.configs) if value is not None else {}
        if configs:
            self.group_configs[key.group] = configs
        else:
            self.group_configs.pop(key.group, None)
        for kind in self._all:
            kind.configs_changed(key.group, configs)

    def loaders(self, registry: RecordRegistry, now: int) -> Mapping[int, Loader]:
        offsets = OffsetsLoader(self._offsets)
        out: dict[int, Loader] = {t: offsets for t in OFFSET_COMMIT_TYPES}
        for kind in self._all:
            out.update(kind.loaders(registry, now))
        return out

    def loaded(self, now: int) -> None:
        for kind in self._all:
            kind.loaded(now)
        if self._classic is not None:
            for group_id in self._offsets.committed:
                if self._kind_of(group_id) is None:
                    self._classic.create_simple_group(group_id, now)

    def link(self, records: list[Record], base_offset: int) -> list[Record]:
        for kind in self._all:
            records = kind.link(records, base_offset)
        return records

    # --- keys and timers ------------------------------------------------------------------------
    def holds(self, group_id: str) -> bool:
        return self._kind_of(group_id) is not None

    def keys(self) -> Iterator[str]:
        for kind in self._all:
            yield from kind.group_ids()

    def next_deadline(self, group_id: str) -> int | None:
        for groups, kind in self._by_id:
            if groups is None:
                if kind.holds(group_id):
                    return kind.next_deadline(group_id)
                continue
            group = groups.get(group_id)
            if group is not None:
                deadline: int | None = group.next_deadline()
                return deadline
        return None

    def on_timer(self, group_id: str, now: int) -> Outcome:
        kind = self._kind_of(group_id)
        return kind.on_timer(group_id, now) if kind is not None else Outcome()

    def snapshot(self) -> dict[str, Any]:
        out: dict[str, Any] = {kind.group_type: kind.snapshot() for kind in self._all}
        out["offsets"] = {
            g: {t: dict(parts) for t, parts in topics.items()}
            for g, topics in self._offsets.committed.items()
        }
        pending = self._offsets.pending.snapshot()
        if pending:
            out["pending_offsets"] = pending
        if self.group_configs:
            out["configs"] = {g: dict(c) for g, c in self.group_configs.items()}
        return out


def offset_expiration(
    retention_ms: int,
) -> Callable[[GroupStore], Iterator[tuple[str, Operation[GroupStore]]]]:
    """The periodic KIP-211 cleanup (offsets.retention.check.interval.ms): for every group of a
    shard, an operation that expires its offsets, and the group itself once nothing is left."""

    def op_for(kind: GroupKind, group_id: str) -> Operation[GroupStore]:
        return lambda _store, now: kind.expire_offsets(group_id, now, retention_ms)

    def ops(store: GroupStore) -> Iterator[tuple[str, Operation[GroupStore]]]:
        for kind in store.kinds():
            for group_id in list(kind.group_ids()):
                yield group_id, op_for(kind, group_id)

    return ops
