"""The classic groups of one coordinator partition and how their record replays.

Group metadata (type 2) is applied here, live and at start-up alike. A group comes into existence
with its first record, or as the "simple" group of a consumer that commits offsets without
membership (a group without protocol type), and goes with its tombstone.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, ClassVar, Final

from kcoord.classic import migration
from kcoord.classic.group import ClassicGroup, GroupConfig, GroupState
from kcoord.classic.offsets import expire
from kcoord.classic.records import (
    GroupMetadataKey,
    GroupMetadataValue,
)
from kcoord.groups.migration import NOT_CONSUMER_PROTOCOL, CannotUpgrade, MigratingGroup
from kcoord.groups.store import GroupNamespace, GroupsById
from kcoord.runtime.outcome import Outcome, Record
from kcoord.runtime.records import RecordRegistry
from kcoord.runtime.shard import Loader

GROUP_TYPE: Final = "classic"


class ClassicGroups(GroupsById[ClassicGroup]):
    group_type: ClassVar[str] = GROUP_TYPE

    def __init__(self, namespace: GroupNamespace, config: GroupConfig) -> None:
        self.namespace = namespace
        self.config = config
        super().__init__()
        self.replayers: Mapping[type, Callable[[Any, Any, int], None]] = {
            GroupMetadataKey: self._replay_group
        }

    def get_or_create(self, group_id: str, now: int) -> ClassicGroup | None:
        """The group, created if no group of any type has the id; None if another type has it."""
        group = self.groups.get(group_id)
        if group is None and self.namespace.group_type(group_id) is None:
            group = self._create(group_id, now)
        return group

    def create_simple_group(self, group_id: str, now: int) -> None:
        """The group of a consumer that commits offsets without membership (no protocol type)."""
        self._create(group_id, now)

    def _create(self, group_id: str, now: int) -> ClassicGroup:
        group = self.groups[group_id] = ClassicGroup(group_id, self.config, now)
        return group

    # --- groups changing protocol (groups/migration.py) ---------------------------------------------
    def is_empty(self, group_id: str) -> bool:
        group = self.groups.get(group_id)
        return group is not None and group.is_in(GroupState.EMPTY)

    def migration_view(self, group_id: str) -> MigratingGroup:
        group = self.groups.get(group_id)
        if group is None:
            raise CannotUpgrade(NOT_CONSUMER_PROTOCOL)
        return migration.migration_view(group)

    def hand_over(self, group_id: str, now: int) -> Outcome:
        group = self.groups.get(group_id)
        return migration.hand_over(group) if group is not None else Outcome()

    def take_over(self, group: MigratingGroup, rebalance: bool, now: int) -> Outcome:
        protocols = {m.member_id: list(m.protocols) for m in group.members}

        def live(_state: object, now: int) -> Outcome:
            # The replayed record made the group; its members come to life as after a restart,
            # with every protocol they support (the record keeps only the selected one).
            g = self.groups[group.group_id]
            assert g.persisted is not None
            g.load(g.persisted, now)
            for member in g.members.values():
                g.set_protocols(member, protocols[member.member_id])
            return g.rebalance(now) if rebalance else Outcome()

        value = migration.metadata_of(group, now)
        return Outcome(records=[(GroupMetadataKey(group.group_id), value)], then=live)

    # --- records ----------------------------------------------------------------------------------
    def replay(self, key: Any, value: Any, now: int) -> None:
        self.replayers[type(key)](key, value, now)

    def _replay_group(self, key: GroupMetadataKey, value: GroupMetadataValue | None, now: int) -> None:
        if value is None:
            group = self.groups.pop(key.group, None)
            if group is not None and not group.is_in(GroupState.DEAD):
                group.mark_dead(now)
            return
        assert isinstance(value, GroupMetadataValue)
        group = self.groups.get(key.group) or self._create(key.group, now)
        group.persisted = value

    def loaders(self, registry: RecordRegistry, now: int) -> Mapping[int, Loader]:
        return {}

    def loaded(self, now: int) -> None:
        """Bring every group to life from its last metadata record."""
        for group in self.groups.values():
            if group.persisted is not None:
                group.load(group.persisted, now)

    def link(self, records: list[Record], base_offset: int) -> list[Record]:
        return records

    def configs_changed(self, group_id: str, configs: dict[str, str]) -> None:
        pass  # classic groups have no group configs

    # --- timers ---------------------------------------------------------------------------------
    def expire_offsets(self, group_id: str, now: int, retention_ms: int) -> Outcome:
        group = self.groups.get(group_id)
        return expire(group, self.namespace.offsets, now, retention_ms) if group is not None else Outcome()

    def on_timer(self, group_id: str, now: int) -> Outcome:
        group = self.groups.get(group_id)
        return group.on_timer(now) if group is not None else Outcome()

    def snapshot(self) -> dict[str, Any]:
        """The persisted metadata of every group that has some (a group without it is
        indistinguishable from no group: a simple group is made again for its offsets)."""
        return {gid: g.persisted for gid, g in self.groups.items() if g.persisted is not None}
