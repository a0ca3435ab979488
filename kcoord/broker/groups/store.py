"""The groups of one coordinator partition and the one ``apply`` that both live writes and log
replay go through (DESIGN principle 1)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from kcoord.broker.groups.group import ClassicGroup, GroupConfig, GroupState
from kcoord.broker.groups.records import (
    GroupMetadataKey,
    GroupMetadataValue,
    Key,
    OffsetCommitKey,
    OffsetCommitValue,
    Value,
)


class GroupStore:
    def __init__(self, config: GroupConfig) -> None:
        self.config = config
        self.groups: dict[str, ClassicGroup] = {}

    def get(self, group_id: str) -> ClassicGroup | None:
        return self.groups.get(group_id)

    def get_or_create(self, group_id: str, now: int) -> ClassicGroup:
        group = self.groups.get(group_id)
        if group is None:
            group = ClassicGroup(group_id, self.config, now)
            self.groups[group_id] = group
        return group

    def apply(self, key: Key, value: Value | None, now: int) -> None:
        if isinstance(key, OffsetCommitKey):
            if value is None:
                group = self.groups.get(key.group)
                if group is not None:
                    parts = group.offsets.get(key.topic)
                    if parts is not None:
                        parts.pop(key.partition, None)
                        if not parts:
                            del group.offsets[key.topic]
                return
            assert isinstance(value, OffsetCommitValue)
            group = self.get_or_create(key.group, now)
            group.offsets.setdefault(key.topic, {})[key.partition] = value
            return
        assert isinstance(key, GroupMetadataKey)
        if value is None:
            group = self.groups.pop(key.group, None)
            if group is not None and not group.is_in(GroupState.DEAD):
                group.mark_dead(now)
            return
        assert isinstance(value, GroupMetadataValue)
        self.get_or_create(key.group, now).persisted = value

    def replay(self, records: Iterable[tuple[Key, Value | None]], now: int) -> None:
        """Apply a log's records, then bring every group to life from its last record."""
        for key, value in records:
            self.apply(key, value, now)
        for group in self.groups.values():
            if group.persisted is not None:
                group.load(group.persisted, now)

    def snapshot(self) -> dict[str, Any]:
        """What survives a restart: offsets and the persisted group metadata of every group
        that holds either (a group with neither is indistinguishable from no group)."""
        out = {}
        for gid, g in self.groups.items():
            if not g.offsets and g.persisted is None:
                continue
            out[gid] = (
                {t: dict(p) for t, p in g.offsets.items()},
                g.persisted,
            )
        return out
