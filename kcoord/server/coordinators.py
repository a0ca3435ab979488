"""The coordinators this broker runs, each on its own coordinator runtime.

The group coordinator: classic, KIP-848 consumer and share groups in the partitions of
``__consumer_offsets``, their records registered with one registry, their state in one GroupStore
per partition. The transaction coordinator: transactional ids in the partitions of
``__transaction_state``, a TransactionStore per partition. The security metadata: SCRAM
credentials and ACLs in the one partition of ``__cluster_metadata``, a MetadataStore.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from kcoord.classic.group import GroupConfig
from kcoord.classic.metrics import register_classic_group_metrics
from kcoord.classic.records import CLASSIC_RECORDS
from kcoord.classic.store import ClassicGroups
from kcoord.clock import Clock
from kcoord.config import BrokerConfig
from kcoord.consumer.group import ConsumerGroupConfig
from kcoord.consumer.records import CONSUMER_RECORDS
from kcoord.consumer.store import ConsumerGroups
from kcoord.groups import OFFSETS_TOPIC
from kcoord.groups.migration import MigrationPolicy
from kcoord.groups.records import GROUP_RECORDS, OFFSET_COMMIT_TYPES, OffsetCommitKey
from kcoord.groups.store import GroupStore, offset_expiration
from kcoord.groups.topics import TopicsView
from kcoord.metadata import CLUSTER_METADATA_TOPIC
from kcoord.metadata.authorizer import StandardAuthorizer, parse_super_users
from kcoord.metadata.records import METADATA_RECORDS
from kcoord.metadata.store import MetadataStore
from kcoord.metrics import (
    OFFSET_DELETION,
    OFFSET_EXPIRATION,
    PARTITION_LOAD_TIME,
    Meter,
    Metrics,
)
from kcoord.runtime.outcome import Operation, Outcome
from kcoord.runtime.records import RecordRegistry
from kcoord.runtime.runtime import CoordinatorRuntime
from kcoord.share.config import share_partition_config
from kcoord.share.records import SHARE_RECORDS
from kcoord.share.store import ShareGroups
from kcoord.storage.compaction_rules import HistoryRetention
from kcoord.storage.flush import Flusher
from kcoord.storage.log import LogConfig
from kcoord.storage.log_cleaner import LogCleaner
from kcoord.transaction import TRANSACTION_STATE_TOPIC
from kcoord.transaction.coordinator import (
    MarkerJob,
    TransactionConfig,
    TransactionStore,
    abort_timed_out,
    expire_transactional_ids,
)
from kcoord.transaction.records import TRANSACTION_RECORDS


def group_records() -> RecordRegistry:
    return RecordRegistry([CLASSIC_RECORDS, CONSUMER_RECORDS, SHARE_RECORDS, GROUP_RECORDS])


def classic_group_config(config: BrokerConfig) -> GroupConfig:
    return GroupConfig(
        min_session_timeout_ms=config.group_min_session_timeout_ms,
        max_session_timeout_ms=config.group_max_session_timeout_ms,
        initial_rebalance_delay_ms=config.group_initial_rebalance_delay_ms,
        max_size=config.group_max_size,
    )


def consumer_group_config(config: BrokerConfig) -> ConsumerGroupConfig:
    return ConsumerGroupConfig(
        session_timeout_ms=config.group_consumer_session_timeout_ms,
        heartbeat_interval_ms=config.group_consumer_heartbeat_interval_ms,
        max_size=config.group_consumer_max_size,
        assignors=tuple(config.group_consumer_assignors.split(",")),
        migration_policy=MigrationPolicy(config.group_consumer_migration_policy),
        classic_max_size=config.group_max_size,
    )


def group_store(
    config: BrokerConfig,
    topics: TopicsView,
    records_available: Callable[[str], None],
    consumer_rebalanced: Callable[[], None] = lambda: None,
) -> GroupStore:
    """The groups of one ``__consumer_offsets`` partition, every group type plugged in."""
    classic = classic_group_config(config)
    consumer = consumer_group_config(config)
    return GroupStore(
        [
            lambda ns: ClassicGroups(ns, classic),
            lambda ns: ConsumerGroups(ns, consumer, topics, consumer_rebalanced),
            lambda ns: ShareGroups(
                ns, lambda configs: share_partition_config(configs, config), topics.lookup, records_available
            ),
        ],
        classic_groups=ClassicGroups,
    )


def group_runtime(
    config: BrokerConfig,
    flusher: Flusher,
    clock: Clock,
    topics: TopicsView,
    records_available: Callable[[str], None],
    consumer_rebalanced: Callable[[], None] = lambda: None,
    metrics: Metrics | None = None,
) -> CoordinatorRuntime[GroupStore]:
    runtime = CoordinatorRuntime(
        OFFSETS_TOPIC,
        config.offsets_topic_num_partitions,
        config.data_dir,
        LogConfig(
            segment_bytes=config.offsets_topic_segment_bytes,
            roll_ms=7 * 24 * 3_600_000,
            retention_ms=-1,
            retention_bytes=-1,
            index_interval_bytes=config.log_index_interval_bytes,
            preallocate=config.log_preallocate,
            preallocate_zeros=True,  # small appends, each synced: see preallocation.py
        ),
        group_records(),
        lambda _partition: group_store(config, topics, records_available, consumer_rebalanced),
        flusher,
        clock.now_ms,
        coordinator_cleaner(config, clock, offset_history(config)),
        snapshot_interval_records=config.coordinator_snapshot_interval_records,
    )
    expiration = offset_expiration(config.offsets_retention_minutes * 60_000)
    if metrics is not None:
        expiration = _counting_expired_offsets(expiration, metrics.meter(OFFSET_EXPIRATION, ()))
    runtime.every("kcoord-offsets-expiration", config.offsets_retention_check_interval_ms, expiration)
    return runtime


def coordinator_cleaner(
    config: BrokerConfig, clock: Clock, history: HistoryRetention | None = None
) -> LogCleaner:
    """The log cleaner of a coordinator topic, on the broker's log.cleaner.* settings."""
    return LogCleaner(
        clock,
        config.log_cleaner_delete_retention_ms,
        config.log_cleaner_backoff_ms,
        config.log_cleaner_min_cleanable_ratio,
        history,
    )


def offset_history(config: BrokerConfig) -> HistoryRetention | None:
    """Superseded offset commits the cleaner keeps (offsets.history.retention.ms, 0: none)."""
    if config.offsets_history_retention_ms <= 0:
        return None
    prefixes = tuple(t.to_bytes(2, "big") for t in OFFSET_COMMIT_TYPES)
    return HistoryRetention(prefixes, config.offsets_history_retention_ms)


def transaction_runtime(
    config: BrokerConfig,
    flusher: Flusher,
    clock: Clock,
    next_producer_id: Callable[[], int],
    send_markers: Callable[[MarkerJob], None],
) -> CoordinatorRuntime[TransactionStore]:
    txn_config = TransactionConfig(transactional_id_expiration_ms=config.transactional_id_expiration_ms)
    runtime = CoordinatorRuntime(
        TRANSACTION_STATE_TOPIC,
        config.transaction_state_log_num_partitions,
        config.data_dir,
        LogConfig(
            segment_bytes=config.transaction_state_log_segment_bytes,
            roll_ms=7 * 24 * 3_600_000,
            retention_ms=-1,
            retention_bytes=-1,
            index_interval_bytes=config.log_index_interval_bytes,
            preallocate=config.log_preallocate,
            preallocate_zeros=True,  # small appends, each synced: see preallocation.py
        ),
        RecordRegistry([TRANSACTION_RECORDS]),
        lambda _partition: TransactionStore(txn_config, next_producer_id, send_markers),
        flusher,
        clock.now_ms,
        coordinator_cleaner(config, clock),
        snapshot_interval_records=config.coordinator_snapshot_interval_records,
    )
    runtime.every(
        "kcoord-transaction-abort",
        config.transaction_abort_timed_out_transaction_cleanup_interval_ms,
        abort_timed_out,
    )
    runtime.every(
        "kcoord-transactional-id-expiration",
        config.transaction_remove_expired_transaction_cleanup_interval_ms,
        expire_transactional_ids,
    )
    return runtime


def metadata_runtime(
    config: BrokerConfig, flusher: Flusher, clock: Clock
) -> CoordinatorRuntime[MetadataStore]:
    """SCRAM credentials and ACLs in the one partition of ``__cluster_metadata``."""
    return CoordinatorRuntime(
        CLUSTER_METADATA_TOPIC,
        1,
        config.data_dir,
        LogConfig(
            segment_bytes=config.metadata_log_segment_bytes,
            roll_ms=7 * 24 * 3_600_000,
            retention_ms=-1,
            retention_bytes=-1,
            index_interval_bytes=config.log_index_interval_bytes,
            preallocate=config.log_preallocate,
            preallocate_zeros=True,  # small appends, each synced: see preallocation.py
        ),
        RecordRegistry([METADATA_RECORDS]),
        lambda _partition: MetadataStore(),
        flusher,
        clock.now_ms,
        coordinator_cleaner(config, clock),
        snapshot_interval_records=config.coordinator_snapshot_interval_records,
    )


def authorizer(config: BrokerConfig) -> StandardAuthorizer | None:
    """The authorizer ``authorizer.class.name`` asks for (it reads the ACLs once they are
    loaded), or None."""
    if not config.authorizer_class_name:
        return None
    return StandardAuthorizer(parse_super_users(config.super_users), config.allow_everyone_if_no_acl_found)


Expiration = Callable[[GroupStore], Iterator[tuple[str, Operation[GroupStore]]]]


def _counting_expired_offsets(expiration: Expiration, meter: Meter) -> Expiration:
    """The expiry operations, recording Kafka's offset-expiration: one per offset tombstone."""

    def count(op: Operation[GroupStore]) -> Operation[GroupStore]:
        def counted(store: GroupStore, now: int) -> Outcome:
            out = op(store, now)
            expired = sum(1 for key, value in out.records if value is None and type(key) is OffsetCommitKey)
            if expired:
                meter.record(now, expired)
            return out

        return counted

    def ops(store: GroupStore) -> Iterator[tuple[str, Operation[GroupStore]]]:
        for group_id, op in expiration(store):
            yield group_id, count(op)

    return ops


def register_group_coordinator_metrics(metrics: Metrics, runtime: CoordinatorRuntime[GroupStore]) -> None:
    """The group coordinator's gauges that no single group kind owns: the classic groups' (the
    consumer and share kinds register their own), and ``offset-count``, every offset retained."""
    register_classic_group_metrics(
        metrics, lambda: (g for store in runtime.states() for g in store.kind(ClassicGroups).groups.values())
    )
    # offset-commit is Metrics' own (Metrics.offset_commits, recorded by every OffsetCommit).
    metrics.meter(OFFSET_DELETION, ())
    metrics.gauge(
        "offset-count",
        (),
        lambda: sum(
            len(parts)
            for store in runtime.states()
            for topics in store.offsets.committed.values()
            for parts in topics.values()
        ),
    )


def record_partition_load_times(metrics: Metrics, runtime: CoordinatorRuntime[GroupStore]) -> None:
    """partition-load-time (avg, max) of every coordinator partition, once they are loaded."""
    load_time = metrics.avg_max(PARTITION_LOAD_TIME, ())
    for seconds in runtime.load_seconds:
        load_time.record(seconds * 1000)
