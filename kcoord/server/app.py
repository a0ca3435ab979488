"""The broker process: wires config, storage, the partition manager and the server together."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import signal
from typing import TYPE_CHECKING, Any

import structlog

import kcoord
from kcoord.apis.services import Services
from kcoord.clock import Clock, SystemClock
from kcoord.config import BrokerConfig
from kcoord.consumer.metrics import register_consumer_group_metrics
from kcoord.consumer.store import ConsumerGroups
from kcoord.dataplane.fetch_sessions import FetchSessionCache
from kcoord.dataplane.partitions import PartitionManager
from kcoord.dataplane.producer_ids import ProducerIdManager
from kcoord.endpoints import Endpoint, parse_ip_overrides
from kcoord.metadata.store import MetadataCredentials
from kcoord.metrics import Metrics
from kcoord.server.api_table import build_table
from kcoord.server.connection import ShutdownSignal
from kcoord.server.connection_quotas import ConnectionQuotas
from kcoord.server.coordinators import (
    authorizer,
    group_runtime,
    metadata_runtime,
    record_partition_load_times,
    register_group_coordinator_metrics,
    transaction_runtime,
)
from kcoord.server.dispatcher import Dispatcher
from kcoord.server.listeners import build_listener_security
from kcoord.server.server import KafkaServer
from kcoord.server.socket_metrics import register_socket_server_metrics
from kcoord.server.transaction_markers import TransactionMarkers
from kcoord.share.coordinator import ShareCoordinator
from kcoord.storage import log_dir_failure
from kcoord.storage.flush import Flusher
from kcoord.storage.meta import load_or_create_meta

if TYPE_CHECKING:
    from kcoord.http.server import OpsServer

log = structlog.get_logger(__name__)


class Broker:
    def __init__(self, config: BrokerConfig, clock: Clock | None = None) -> None:
        self.config = config
        self.clock = clock or SystemClock()
        self.node_id = config.node_id
        self.cluster_id = ""
        self.metrics = Metrics(self.clock)
        self.flusher = Flusher(config.log_flush_policy, config.log_flush_interval_ms, config.data_dir)
        self.partitions = PartitionManager(config, self.flusher, self.clock)
        self.producer_ids = ProducerIdManager(config.data_dir)
        consumer_rebalanced = register_consumer_group_metrics(
            self.metrics,
            lambda: (g for store in self.groups.states() for g in store.kind(ConsumerGroups).groups.values()),
        )
        self.groups = group_runtime(
            config,
            self.flusher,
            self.clock,
            self.partitions,
            lambda group_id: self.share.wake(group_id),
            consumer_rebalanced,
            self.metrics,
        )
        register_group_coordinator_metrics(self.metrics, self.groups)
        self.groups.on_failure = self._coordinator_failed
        self.markers = TransactionMarkers(self.partitions, self.groups, self.flusher, self.clock)
        self.transactions = transaction_runtime(
            config, self.flusher, self.clock, self.producer_ids.next_id, self.markers.send
        )
        self.markers.transactions = self.transactions
        self.transactions.on_failure = self._coordinator_failed
        self.metadata = metadata_runtime(config, self.flusher, self.clock)
        self.metadata.on_failure = self._coordinator_failed
        self.authorizer = authorizer(config)
        # Where SASL/SCRAM finds users' credentials (the ScramCredentialSource).
        self.scram_credentials = MetadataCredentials(self.metadata)
        self.fetch_sessions = FetchSessionCache(config.max_incremental_fetch_session_cache_slots, self.clock)
        self.share = ShareCoordinator(config, self.groups, self.partitions, self.metrics)
        self.table = build_table()
        self.shutdown = ShutdownSignal()
        self.services = Services(
            config=config,
            clock=self.clock,
            cluster=self,
            partitions=self.partitions,
            producer_ids=self.producer_ids,
            fetch_sessions=self.fetch_sessions,
            flusher=self.flusher,
            groups=self.groups,
            transactions=self.transactions,
            share=self.share,
            metadata=self.metadata,
            authorizer=self.authorizer,
            metrics=self.metrics,
            shutdown=self.shutdown,
            api_versions=self.table.api_versions,
        )
        self.dispatcher = Dispatcher(self.services, self.table)
        self.server = KafkaServer(
            self.dispatcher,
            config.listener_endpoints(),
            config.socket_request_max_bytes,
            self.shutdown,
            build_listener_security(config, self.scram_credentials),
            ConnectionQuotas(
                config.max_connections,
                config.max_connections_per_ip,
                parse_ip_overrides(config.max_connections_per_ip_overrides),
            ),
            config.connections_max_idle_ms,
        )
        register_socket_server_metrics(self.metrics, self.server.stats, self.server.quotas.refused)
        self.flusher.after_round.append(self.server.write_ready)
        self.flusher.idle = self.server.idle
        self.groups.after_run.append(self.server.write_ready)
        self.transactions.after_run.append(self.server.write_ready)
        self.metadata.after_run.append(self.server.write_ready)
        self.server.add_close_listener(self.share.connection_closed)
        self.ops: OpsServer | None = None
        if config.http_endpoints():
            # Imported only with an endpoint to serve: aiohttp, jinja2 and prometheus_client are
            # a fifth of what the broker imports (bench and test brokers run without one).
            from kcoord.http.server import OpsHttp, OpsServer

            self.ops = OpsServer(OpsHttp(self.services, self.status), config.http_endpoints())
        self._tasks: list[asyncio.Task[Any]] = []
        self._stopping = False
        self.started = asyncio.Event()
        self.fatal = asyncio.Event()  # set when the broker must stop (a coordinator write failed)
        self.failure: BaseException | None = None  # that write's error

    def _coordinator_failed(self, error: BaseException) -> None:
        """A coordinator's write failed, so its memory is ahead of its log: the broker stops, and
        exits with the status Kafka halts with when its log directory fails, so that a supervisor
        restarts it (the restart replays the log) and an operator sees it as a failure."""
        if self.failure is None:
            self.failure = error
        self.fatal.set()

    # --- addresses -------------------------------------------------------------------------
    def advertised(self, listener: str) -> Endpoint:
        """Where clients that came in on ``listener`` should connect (port 0 -> bound port)."""
        for ep in self.config.advertised_endpoints():
            if ep.name == listener:
                if ep.port == 0 and listener in self.server.bound:
                    return Endpoint(ep.name, ep.host, self.server.bound[listener][1])
                return ep
        bound_host, bound_port = next(iter(self.server.bound.values()))
        return Endpoint(listener, bound_host, bound_port)

    # --- lifecycle -------------------------------------------------------------------------
    def status(self) -> str:
        """What /health reports: ready once the logs are replayed and the listeners are up."""
        if self._stopping:
            return "stopping"
        return "ready" if self.started.is_set() else "starting"

    async def start(self) -> None:
        data_dir = self.config.data_dir
        data_dir.mkdir(parents=True, exist_ok=True)
        meta = load_or_create_meta(data_dir, self.node_id)
        self.cluster_id = meta["cluster.id"]
        # Up before the replay: a probe gets 503 "starting" rather than a refused connection.
        if self.ops is not None:
            await self.ops.start()
        # Loading builds millions of objects and frees almost none: no cyclic GC meanwhile.
        gc_was_enabled = gc.isenabled()
        gc.disable()
        try:
            self.partitions.open()
            self.groups.open(unclean=not self.partitions.closed_cleanly)
            self.partitions.add_internal_topic(
                self.groups.topic, self.groups.logs, {"cleanup.policy": "compact"}
            )
            record_partition_load_times(self.metrics, self.groups)
            self.share.record_load_times()
            self.producer_ids.open()
            self.transactions.open(unclean=not self.partitions.closed_cleanly)
            self.partitions.add_internal_topic(
                self.transactions.topic, self.transactions.logs, {"cleanup.policy": "compact"}
            )
            self.metadata.open(unclean=not self.partitions.closed_cleanly)
            if self.authorizer is not None:
                self.authorizer.load(self.metadata.shards[0].state)
        finally:
            if gc_was_enabled:
                gc.enable()
        self.flusher.start()
        self.groups.start()
        self.transactions.start()
        self.metadata.start()
        self.share.forget_deleted_topics()
        await self.server.start()
        self._tasks.append(asyncio.create_task(self._retention_loop(), name="kcoord-retention"))
        self._tasks.append(asyncio.create_task(self.partitions.cleaner.run(), name="kcoord-log-cleaner"))
        log.info(
            "kcoord started",
            node_id=self.node_id,
            cluster_id=self.cluster_id,
            data_dir=str(data_dir),
            flush_policy=self.config.log_flush_policy,
            listeners=[f"{n}://{h}:{p}" for n, (h, p) in self.server.bound.items()],
            http=[f"http://{h}:{p}" for h, p in (self.ops.bound if self.ops is not None else [])],
            compiled=kcoord.compiled,  # whether the request path runs as mypyc's C (setup.py)
        )
        self.started.set()

    async def stop(self) -> None:
        log.info("kcoord stopping")
        self._stopping = True
        try:
            await self.server.stop()
        except TimeoutError:
            log.warning("in-flight requests did not finish before shutdown")
        if self.ops is not None:
            await self.ops.stop()
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await self.metadata.stop()
        await self.transactions.stop()
        await self.groups.stop()
        self.markers.stop()  # before the flusher's last round: no marker is written after it
        await self.flusher.stop()
        self.metadata.close()
        self.transactions.close()
        self.groups.close()
        self.partitions.close()
        log.info("kcoord stopped")

    async def _retention_loop(self) -> None:
        interval = self.config.log_retention_check_interval_ms / 1000
        while True:
            await asyncio.sleep(interval)
            try:
                self.partitions.enforce_retention()
                self.fetch_sessions.evict_expired()
            except Exception:
                log.exception("retention run failed")


GC_GEN0_THRESHOLD = 50_000


def tune_gc() -> None:
    """Keep the cyclic GC off the request path of a started broker.

    Every full collection walks all tracked objects, and after start-up that is mostly what
    never dies (modules, the protocol classes, the replayed groups): tens of milliseconds per
    pass, straight into the p99. ``gc.freeze`` moves them out of the collector's sight (``kcoord
    serve`` froze the modules already, so this pass walks the replayed state only).
    A young collection costs in proportion to the young objects still alive, and with a
    thousand requests in flight that is some 20 000 objects every time, whatever the
    threshold: a larger first threshold makes these passes rarer (requests allocate many
    short-lived objects that reference counting frees anyway; only cyclic garbage waits longer).
    """
    gc.collect()
    gc.freeze()
    _gen0, gen1, gen2 = gc.get_threshold()
    gc.set_threshold(GC_GEN0_THRESHOLD, gen1, gen2)


async def serve_until_signalled(config: BrokerConfig) -> int:
    """Serve until SIGTERM or SIGINT (exit status 0) or a failed coordinator write (status 1)."""
    broker = Broker(config)
    await broker.start()
    tune_gc()
    stop = broker.fatal
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    await broker.stop()
    return 0 if broker.failure is None else log_dir_failure.EXIT_CODE


def run_broker(config: BrokerConfig) -> int:
    """Run the broker on uvloop; returns the process's exit status."""
    import uvloop

    return uvloop.run(serve_until_signalled(config))
