"""The groups of one coordinator partition and the one ``apply`` that both live writes and log
replay go through (DESIGN principle 1)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from kcoord.classic.group import ClassicGroup, GroupConfig, GroupState
from kcoord.classic.records import (
    GroupConfigKey,
    GroupMetadataKey,
    GroupMetadataValue,
    Key,
    OffsetCommitKey,
    OffsetCommitValue,
    ShareGroupKey,
    Value,
)
from kcoord.share.group import ShareGroup
from kcoord.share.partition import SharePartition, SharePartitionConfig
from kcoord.share.records import ShareCheckpointKey, ShareDeltaKey


class GroupStore:
    def __init__(
        self,
        config: GroupConfig,
        share_config: Callable[[dict[str, str]], SharePartitionConfig] | None = None,
    ) -> None:
        self.config = config
        self.groups: dict[str, ClassicGroup] = {}
        self.share_groups: dict[str, ShareGroup] = {}
        self.group_configs: dict[str, dict[str, str]] = {}  # GROUP resource config overrides
        self._share_config = share_config or (lambda _configs: SharePartitionConfig())

    def share_partition_config(self, group_id: str) -> SharePartitionConfig:
        return self._share_config(self.group_configs.get(group_id, {}))

    def get_share(self, group_id: str) -> ShareGroup | None:
        return self.share_groups.get(group_id)

    def get_or_create_share(self, group_id: str) -> ShareGroup:
        group = self.share_groups.get(group_id)
        if group is None:
            group = ShareGroup(group_id)
            group.configs = self.group_configs.get(group_id, {})
            self.share_groups[group_id] = group
        return group

    def group_type(self, group_id: str) -> str | None:
        if group_id in self.share_groups:
            return "share"
        if group_id in self.groups:
            return "classic"
        return None

    def get(self, group_id: str) -> ClassicGroup | None:
        return self.groups.get(group_id)

    def get_or_create(self, group_id: str, now: int) -> ClassicGroup:
        group = self.groups.get(group_id)
        if group is None:
            group = ClassicGroup(group_id, self.config, now)
            self.groups[group_id] = group
        return group

    def apply(self, key: Key, value: Value | None, now: int) -> None:
        if type(key) is OffsetCommitKey:  # the common case, checked first
            self._apply_offset(key, value, now)
            return
        if isinstance(key, ShareCheckpointKey | ShareDeltaKey):
            self._apply_share_partition(key, value)
            return
        if isinstance(key, ShareGroupKey):
            if value is None:
                share = self.share_groups.pop(key.group, None)
                if share is not None:
                    share.dead = True
                return
            share = self.get_or_create_share(key.group)
            share.persisted_epoch = value.group_epoch
            if value.group_epoch > share.group_epoch:  # replay; live writes are already there
                share.group_epoch = share.assignment_epoch = value.group_epoch
            return
        if isinstance(key, GroupConfigKey):
            configs = dict(value.configs) if value is not None else {}
            if configs:
                self.group_configs[key.group] = configs
            else:
                self.group_configs.pop(key.group, None)
            share = self.share_groups.get(key.group)
            if share is not None:
                share.configs = configs
                part_config = self.share_partition_config(key.group)
                for sp in share.partitions.values():
                    sp.config = part_config
            return
        assert isinstance(key, GroupMetadataKey)
        if value is None:
            group = self.groups.pop(key.group, None)
            if group is not None and not group.is_in(GroupState.DEAD):
                group.mark_dead(now)
            return
        assert isinstance(value, GroupMetadataValue)
        self.get_or_create(key.group, now).persisted = value

    def _apply_offset(self, key: OffsetCommitKey, value: Value | None, now: int) -> None:
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
        group = self.groups.get(key.group) or self.get_or_create(key.group, now)
        parts = group.offsets.get(key.topic)
        if parts is None:
            parts = group.offsets[key.topic] = {}
        parts[key.partition] = value

    def _apply_share_partition(self, key: Any, value: Any) -> None:
        share = self.share_groups.get(key.group_id)
        if share is None:
            if value is None:
                return
            share = self.get_or_create_share(key.group_id)
        pkey = (key.topic_id, key.partition)
        sp = share.partitions.get(pkey)
        if sp is None:
            if value is None:
                return
            sp = SharePartition(
                key.group_id, key.topic_id, key.partition, self.share_partition_config(key.group_id), 0
            )
            share.partitions[pkey] = sp
        sp.apply(key, value)
        if sp.deleted:
            del share.partitions[pkey]

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
        out: dict[str, Any] = {}
        for gid, g in self.groups.items():
            if not g.offsets and g.persisted is None:
                continue
            out[gid] = (
                {t: dict(p) for t, p in g.offsets.items()},
                g.persisted,
            )
        for gid, sg in self.share_groups.items():
            out["share:" + gid] = sg.snapshot()
        if self.group_configs:
            out["configs"] = {g: dict(c) for g, c in self.group_configs.items()}
        return out
