"""The share groups of one coordinator partition and how their records replay.

Share group metadata (record type 102) and share-partition state (SHARE_CHECKPOINT 100 and
SHARE_DELTA 101) are applied here, live and at start-up alike. A SHARE_DELTA points back to the
log offset of the previous state record of its share-partition (BackOffset, the seed's chain):
the offsets are known only when records are appended, so ``link`` fills them in then, and the
start-up loader remembers where the log left each chain.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, Final

from kcoord.groups.store import GroupNamespace, GroupsById
from kcoord.protocol.fields import RecordFormatError
from kcoord.runtime.outcome import Outcome, Record
from kcoord.runtime.records import RecordRegistry
from kcoord.runtime.shard import Loader
from kcoord.share.config import SharePartitionConfig
from kcoord.share.group import ShareGroup
from kcoord.share.partition import SharePartition
from kcoord.share.records import (
    SHARE_RECORD_TYPES,
    ShareCheckpointKey,
    ShareDeltaKey,
    ShareDeltaValue,
    ShareGroupKey,
    ShareGroupValue,
    decode_share_record,
)
from kcoord.share.topics import TopicLookup

GROUP_TYPE: Final = "share"

# (group id, topic id, partition) of a share-partition's records
_ChainKey = tuple[str, uuid.UUID, int]
_STATE_KEYS = frozenset((ShareCheckpointKey, ShareDeltaKey))


class ShareGroups(GroupsById[ShareGroup]):
    group_type: ClassVar[str] = GROUP_TYPE

    def __init__(
        self,
        namespace: GroupNamespace,
        partition_config: Callable[[dict[str, str]], SharePartitionConfig],
        topics: TopicLookup,
        records_available: Callable[[str], None],
    ) -> None:
        """``partition_config`` gives the share-partition settings for a group's config overrides;
        ``topics`` resolves subscribed topic names; ``records_available(group_id)`` is told when a
        timer made records of the group deliverable again (lock timeouts, members gone)."""
        self.namespace = namespace
        self._partition_config = partition_config
        self.topics = topics
        self.records_available = records_available
        super().__init__()
        # Log offset of the last state record of each share-partition (BackOffset of the next delta).
        self._last_offset: dict[_ChainKey, int] = {}
        self.replayers: Mapping[type, Callable[[Any, Any, int], None]] = {
            ShareGroupKey: self._replay_group,
            ShareCheckpointKey: self._replay_partition,
            ShareDeltaKey: self._replay_partition,
        }

    def get_or_create(self, group_id: str) -> ShareGroup | None:
        """The group, created if no group of any type has the id; None if another type has it."""
        group = self.groups.get(group_id)
        if group is None and self.namespace.group_type(group_id) is None:
            group = self._create(group_id)
        return group

    def _create(self, group_id: str) -> ShareGroup:
        group = self.groups[group_id] = ShareGroup(group_id)
        group.configs = self.namespace.configs_of(group_id)
        return group

    def partition_config(self, group_id: str) -> SharePartitionConfig:
        return self._partition_config(self.namespace.configs_of(group_id))

    # --- records ----------------------------------------------------------------------------------
    def replay(self, key: Any, value: Any, now: int) -> None:
        self.replayers[type(key)](key, value, now)

    def _replay_group(self, key: ShareGroupKey, value: ShareGroupValue | None, now: int) -> None:
        if value is None:
            share = self.groups.pop(key.group, None)
            if share is not None:
                share.dead = True
            return
        share = self.groups.get(key.group) or self._create(key.group)
        share.persisted_epoch = value.group_epoch
        if value.group_epoch > share.group_epoch:  # replay; live writes are already there
            share.group_epoch = share.assignment_epoch = value.group_epoch

    def _replay_partition(self, key: ShareCheckpointKey | ShareDeltaKey, value: Any, now: int) -> None:
        share = self.groups.get(key.group_id)
        if share is None:
            if value is None:
                return
            share = self._create(key.group_id)
        pkey = (key.topic_id, key.partition)
        sp = share.partitions.get(pkey)
        if sp is None:
            if value is None:
                return
            sp = SharePartition(
                key.group_id, key.topic_id, key.partition, self.partition_config(key.group_id), 0
            )
            share.partitions[pkey] = sp
        sp.apply(key, value)
        if sp.deleted:
            del share.partitions[pkey]

    def loaders(self, registry: RecordRegistry, now: int) -> Mapping[int, Loader]:
        loader = _StateLoader(self, now)
        return {t: loader for t in SHARE_RECORD_TYPES}

    def loaded(self, now: int) -> None:
        pass

    def link(self, records: list[Record], base_offset: int) -> list[Record]:
        """Fill in BackOffset of SHARE_DELTA records: their offsets are known only now."""
        if _STATE_KEYS.isdisjoint({type(key) for key, _ in records}):
            return records  # offset commits: nothing to link
        out = records
        for i, (key, value) in enumerate(records):
            if type(key) not in _STATE_KEYS or value is None:
                continue
            chain = (key.group_id, key.topic_id, key.partition)
            if isinstance(value, ShareDeltaValue):
                if out is records:
                    out = list(records)
                out[i] = (key, dataclasses.replace(value, back_offset=self._last_offset.get(chain, -1)))
            self._last_offset[chain] = base_offset + i
        return out

    def configs_changed(self, group_id: str, configs: dict[str, str]) -> None:
        share = self.groups.get(group_id)
        if share is not None:
            share.configs = configs
            part_config = self.partition_config(group_id)
            for sp in share.partitions.values():
                sp.config = part_config

    # --- timers ---------------------------------------------------------------------------------
    def expire_offsets(self, group_id: str, now: int, retention_ms: int) -> Outcome:
        return Outcome()  # share groups have no committed offsets (their state is share-partitions')

    def on_timer(self, group_id: str, now: int) -> Outcome:
        group = self.groups.get(group_id)
        if group is None:
            return Outcome()
        out = group.on_timer(now, self.topics)
        self.records_available(group_id)
        return out

    def snapshot(self) -> dict[str, Any]:
        return {gid: sg.snapshot() for gid, sg in self.groups.items()}


class _StateLoader:
    """Start-up replay of share-partition state records, remembering where each chain ends."""

    __slots__ = ("_groups", "_now")

    def __init__(self, groups: ShareGroups, now: int) -> None:
        self._groups = groups
        self._now = now

    def feed(self, offset: int, key: bytes, value: bytes | None) -> None:
        k, v = decode_share_record(key, value)
        if v is not None:  # tombstones of superseded deltas are not in the chain (as in ``link``)
            self._groups._last_offset[(k.group_id, k.topic_id, k.partition)] = offset
        self._groups.replay(k, v, self._now)

    def feed_transactional(
        self, offset: int, producer_id: int, producer_epoch: int, key: bytes, value: bytes | None
    ) -> None:
        raise RecordFormatError(f"share-partition state is never transactional (offset {offset})")

    def end_transaction(self, offset: int, producer_id: int, producer_epoch: int, commit: bool) -> None:
        pass  # markers end offset commits' transactions, not share state

    def finish(self) -> None:
        pass
