"""What groups know of topics: subscribed names resolved to ids and partition counts.

Consumer and share groups assign topic partitions by topic id; the data plane knows the topics.
Groups see them only through these small interfaces, which the broker passes in.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable
from typing import Protocol

# topic name -> (topic id, partition count), or None if no such (non-internal) topic exists
TopicLookup = Callable[[str], tuple[uuid.UUID, int] | None]


class TopicsView(Protocol):
    """The topics as groups see them (the data plane's PartitionManager provides it)."""

    def lookup(self, name: str) -> tuple[uuid.UUID, int] | None:
        """(id, partition count) of an existing topic that is not internal."""
        ...

    def names(self) -> Iterable[str]:
        """Every topic that is not internal (what a regular-expression subscription can match)."""
        ...

    def name_of(self, topic_id: uuid.UUID) -> str | None:
        """The name of an existing topic that is not internal, by its id."""
        ...

    @property
    def version(self) -> int:
        """Changes whenever a topic is created or deleted or gains partitions."""
        ...
