"""What share groups read of the data plane: topics by name or id, and their partitions' logs.

Share groups assign topic partitions and deliver records straight from the partitions' logs, as
Kafka's share-partition leader does. The data plane's Topic and Partition provide this; share
groups know them only through these protocols, which the broker passes in.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Protocol

from kcoord.groups.topics import TopicLookup
from kcoord.storage.log import Log
from kcoord.storage.txn_index import AbortedTxn

__all__ = ["SharedPartition", "SharedTopic", "TopicLookup", "Topics"]


class SharedPartition(Protocol):
    @property
    def log(self) -> Log: ...

    @property
    def log_start_offset(self) -> int: ...

    @property
    def high_watermark(self) -> int: ...

    @property
    def last_stable_offset(self) -> int: ...

    def aborted_transactions(self, fetch_offset: int, upper_bound: int) -> Sequence[AbortedTxn]:
        """The aborted transactions overlapping [fetch_offset, upper_bound) (read_committed)."""
        ...


class SharedTopic(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def topic_id(self) -> uuid.UUID: ...

    @property
    def internal(self) -> bool: ...

    @property
    def partitions(self) -> Sequence[SharedPartition]: ...


class Topics(Protocol):
    def get(self, name: str) -> SharedTopic | None: ...

    def get_by_id(self, topic_id: uuid.UUID) -> SharedTopic | None: ...
