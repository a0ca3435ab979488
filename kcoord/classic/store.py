"""The classic groups of one coordinator partition and how their records replay.

Offset commits (record types 0/1) and group metadata (type 2) are applied here, live and at
start-up alike. A group comes into existence with its first record (an offset commit creates a
group without protocol type: a standalone consumer's) and goes with its tombstone.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from kcoord.classic.group import ClassicGroup, GroupConfig, GroupState
from kcoord.classic.records import (
    GROUP_METADATA_KEY_TYPE,
    OFFSET_COMMIT_TYPES,
    GroupMetadataKey,
    GroupMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
    decode_record,
)
from kcoord.groups.store import GroupNamespace, GroupsById
from kcoord.runtime.outcome import Outcome, Record
from kcoord.runtime.records import RecordRegistry
from kcoord.runtime.shard import Loader

GROUP_TYPE = "classic"


class ClassicGroups(GroupsById[ClassicGroup]):
    group_type = GROUP_TYPE

    def __init__(self, namespace: GroupNamespace, config: GroupConfig) -> None:
        self.namespace = namespace
        self.config = config
        super().__init__()
        self.replayers: Mapping[type, Callable[[Any, Any, int], None]] = {
            OffsetCommitKey: self._replay_offset,
            GroupMetadataKey: self._replay_group,
        }

    def get_or_create(self, group_id: str, now: int) -> ClassicGroup | None:
        """The group, created if no group of any type has the id; None if another type has it."""
        group = self.groups.get(group_id)
        if group is None and self.namespace.group_type(group_id) is None:
            group = self._create(group_id, now)
        return group

    def _create(self, group_id: str, now: int) -> ClassicGroup:
        group = self.groups[group_id] = ClassicGroup(group_id, self.config, now)
        return group

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

    def _replay_offset(self, key: OffsetCommitKey, value: OffsetCommitValue | None, now: int) -> None:
        if value is None:
            group = self.groups.get(key.group)
            if group is not None:
                parts = group.offsets.get(key.topic)
                if parts is not None:
                    parts.pop(key.partition, None)
                    if not parts:
                        del group.offsets[key.topic]
            return
        group = self.groups.get(key.group) or self._create(key.group, now)
        parts = group.offsets.get(key.topic)
        if parts is None:
            parts = group.offsets[key.topic] = {}
        parts[key.partition] = value

    def loaders(self, registry: RecordRegistry, now: int) -> Mapping[int, Loader]:
        loader = _OffsetsLoader(self, now)
        return {t: loader for t in (*OFFSET_COMMIT_TYPES, GROUP_METADATA_KEY_TYPE)}

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
    def on_timer(self, group_id: str, now: int) -> Outcome:
        group = self.groups.get(group_id)
        return group.on_timer(now) if group is not None else Outcome()

    def snapshot(self) -> dict[str, Any]:
        """Offsets and the persisted metadata of every group that holds either (a group with
        neither is indistinguishable from no group)."""
        return {
            gid: ({t: dict(p) for t, p in g.offsets.items()}, g.persisted)
            for gid, g in self.groups.items()
            if g.offsets or g.persisted is not None
        }


_GROUP_KEY_KIND = GROUP_METADATA_KEY_TYPE.to_bytes(2, "big")
_OFFSET_KEY = (1).to_bytes(2, "big")


class _OffsetsLoader:
    """Start-up replay of the classic records, decoding only the last record of each offset key.

    Offset commits dominate these logs and most are overwritten by a later commit of the same
    partition, so only the last record of each offset key is decoded and applied, with the same
    end state as applying them all: a group's offset records are held back as bytes (later ones
    replacing earlier ones) and applied at the end of the log; the value that brings a group
    (back) into existence is applied where it is, so groups are created where the log creates
    them; a group tombstone drops what is held for the group, since it removes the group with all
    its offsets anyway; an offset tombstone for a group that has had no offset value since it
    (last) came into existence removes nothing and is skipped.
    """

    __slots__ = ("_groups", "_held", "_live", "_now")

    def __init__(self, groups: ClassicGroups, now: int) -> None:
        self._groups = groups
        self._now = now
        self._held: dict[bytes, dict[bytes, bytes | None]] = {}  # group key bytes -> key rest -> value
        self._live: set[bytes] = set()  # groups with offset values since their last tombstone

    def feed(self, offset: int, key: bytes, value: bytes | None) -> None:
        group_kind = key[:2] == _GROUP_KEY_KIND
        if not group_kind and len(key) >= 4 and key[2] < 0x80:
            g = key[2 : 4 + ((key[2] << 8) | key[3])]  # the group id with its length
            if g in self._live:
                held = self._held.get(g)
                if held is None:
                    held = self._held[g] = {}
                held[key[2:]] = value
            elif value is not None:
                self._live.add(g)
                k, v = decode_record(key, value)
                self._groups.replay(k, v, self._now)
            return
        if group_kind and value is None:
            g = key[2:]
            self._held.pop(g, None)
            self._live.discard(g)
        k, v = decode_record(key, value)
        self._groups.replay(k, v, self._now)

    def finish(self) -> None:
        replay, now = self._groups.replay, self._now
        for held in self._held.values():
            for rest, value in held.items():
                k, v = decode_record(_OFFSET_KEY + rest, value)
                replay(k, v, now)
        self._held.clear()
        self._live.clear()
