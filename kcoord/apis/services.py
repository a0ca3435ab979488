"""What request handlers may use: the one object every handler gets besides its request.

A handler is ``handle(services, ctx, req)`` and returns the response, a :class:`Reply` when the
answer comes later (an operation in a coordinator actor, an fsync, a long poll), or None when
the request gets no answer (Produce with acks=0). Everything a handler reaches is named here,
with its type; there is no way to the server or to another handler's module state.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from kcoord.apis.long_poll import Shutdown
from kcoord.clock import Clock
from kcoord.config import BrokerConfig
from kcoord.dataplane.fetch_sessions import FetchSessionCache
from kcoord.dataplane.partitions import PartitionManager
from kcoord.dataplane.producer_ids import ProducerIdManager
from kcoord.endpoints import Endpoint
from kcoord.groups.store import GroupStore
from kcoord.metadata.authorizer import StandardAuthorizer
from kcoord.metadata.store import MetadataStore
from kcoord.metrics import Metrics
from kcoord.runtime.runtime import CoordinatorRuntime
from kcoord.share.coordinator import ShareCoordinator
from kcoord.storage.flush import Flusher
from kcoord.transaction.coordinator import TransactionStore


class Cluster(Protocol):
    """This broker as the cluster it is: its id, the cluster's id, its addresses."""

    @property
    def node_id(self) -> int: ...

    @property
    def cluster_id(self) -> str: ...

    def advertised(self, listener: str) -> Endpoint:
        """Where clients that came in on ``listener`` should connect."""
        ...


@dataclass(frozen=True, slots=True)
class Services:
    config: BrokerConfig
    clock: Clock
    cluster: Cluster
    partitions: PartitionManager
    producer_ids: ProducerIdManager
    fetch_sessions: FetchSessionCache
    flusher: Flusher  # Produce acks=all answers once its batches are durable
    groups: CoordinatorRuntime[GroupStore]  # the group coordinator (classic and share groups)
    transactions: CoordinatorRuntime[TransactionStore]  # the transaction coordinator
    share: ShareCoordinator  # share groups' record delivery, sessions and long polls
    metadata: CoordinatorRuntime[MetadataStore]  # SCRAM credentials and ACLs (__cluster_metadata)
    authorizer: StandardAuthorizer | None  # None: no authorizer.class.name, everything allowed
    metrics: Metrics
    shutdown: Shutdown  # long polls answer at once when the broker stops
    api_versions: Callable[[], Any]  # a fresh ApiVersions response listing the served versions
