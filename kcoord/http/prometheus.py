"""``/metrics``: kcoord's metrics in Prometheus' text format, under the names Kafka's metrics get
from the Prometheus JMX exporter (and, for consumer lag, from kafka-exporter), so dashboards and
alerts written for Kafka read kcoord unchanged.

A :class:`prometheus_client.registry.Collector` reads everything at scrape time: the
``(name, tags)`` snapshot of :class:`~kcoord.metrics.Metrics`, the request counters, the
partition logs and the groups' committed offsets. Nothing is counted twice.

How the names are made (JMX exporter, ``lowercaseOutputName: true``; names sanitized to
``[a-z0-9_]``):

- group-coordinator-metrics are Kafka Metrics: MBean ``kafka.server:type=group-coordinator-metrics``
  with the tags as key properties and the metric as attribute. No rule of the exporter's Kafka
  example configs matches them, so its default naming applies: ``<domain>_<type>_<attribute>``
  with the other key properties as labels, untyped -
  ``offset-commit-count`` -> ``kafka_server_group_coordinator_metrics_offset_commit_count``,
  ``group-count{protocol=classic}`` -> ``..._group_count{protocol="classic"}``. Here the counts
  of meters stay untyped, as the exporter shows them; every other value is a gauge.
- socket-server-metrics (per listener, Kafka Metrics too) by the same default naming:
  ``kafka_server_socket_server_metrics_connection_count{listener,networkprocessor}``, and the
  ``connection_creation_total``, ``connection_close_total``, ``successful_authentication_total``,
  ``failed_authentication_total`` counts; ``connection_refused_total{reason}`` (per_ip, broker)
  is kcoord's own (Kafka's acceptor waits for a free slot where kcoord closes the excess).
- RequestMetrics are Yammer metrics, named by the rules of ``kafka-2_0_0.yml``:
  ``kafka.network<type=RequestMetrics, name=RequestsPerSec, request=.., version=..><>Count``
  -> ``kafka_network_requestmetrics_requests_total{request,version}`` (counter), ErrorsPerSec ->
  ``kafka_network_requestmetrics_errors_total{request,error}``. TotalTimeMs, a histogram in
  Kafka, is a Prometheus histogram here: ``kafka_network_requestmetrics_totaltimems_bucket{request,le}``
  with ``_count`` (the exporter's name) and ``_sum``, in place of the exporter's quantile gauges.
- Log metrics: ``kafka.log<type=Log, name=LogEndOffset, topic=.., partition=..><>Value`` ->
  ``kafka_log_log_logendoffset{topic,partition}``, likewise ``logstartoffset``, ``size`` and
  ``numlogsegments``.
- The log cleaner's ``kafka.log<type=LogCleanerManager, name=uncleanable-partitions-count,
  logDirectory=..><>Value`` -> ``kafka_log_logcleanermanager_uncleanable_partitions_count
  {logDirectory}``: the logs a cleaning pass failed on, over the data plane's cleaner and each
  coordinator's.
- Consumer lag as kafka-exporter reports it: ``kafka_consumergroup_current_offset`` and
  ``kafka_consumergroup_lag`` ``{consumergroup,topic,partition}``, their ``_sum`` per topic, and
  ``kafka_consumergroup_members{consumergroup}``; share groups (not in kafka-exporter) get
  ``kafka_sharegroup_start_offset`` and ``kafka_sharegroup_lag`` ``{sharegroup,topic,partition}``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

from prometheus_client.metrics_core import CounterMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector, CollectorRegistry

from kcoord.apis.services import Services
from kcoord.http import views
from kcoord.metrics import REQUEST_TIME_BUCKETS_MS, MetricKey, Metrics, RequestMetrics
from kcoord.protocol.errors import ErrorCode

GROUP_COORDINATOR = "kafka_server_group_coordinator_metrics_"
SOCKET_SERVER = "kafka_server_socket_server_metrics_"
REQUEST_METRICS = "kafka_network_requestmetrics_"
LOG = "kafka_log_log_"

_UNSAFE = re.compile(r"[^a-zA-Z0-9_]")


def safe_name(name: str) -> str:
    """The JMX exporter's safeName: every character outside [a-zA-Z0-9_] becomes ``_``."""
    return _UNSAFE.sub("_", name).lower()


def _default_named(
    prefix: str, mbean_type: str, samples: Iterable[tuple[MetricKey, float]], untyped: set[str]
) -> Iterator[Metric]:
    """Kafka Metrics of one MBean type as the JMX exporter's default naming shows them: one family
    per metric, ``<prefix><metric>`` with the tags as labels; ``untyped`` names are counts the
    exporter leaves untyped, the rest gauges."""
    families: dict[str, Metric] = {}
    for (name, t), value in sorted(samples, key=lambda kv: kv[0]):
        family = families.get(name)
        if family is None:
            kind = "unknown" if name in untyped else "gauge"
            family = families[name] = Metric(prefix + safe_name(name), f"{mbean_type} {name}", kind)
        family.add_sample(family.name, {safe_name(k): v for k, v in t}, float(value))
    yield from families.values()


def group_coordinator_metrics(metrics: Metrics) -> Iterator[Metric]:
    meter_counts = {name + "-count" for name, _ in metrics.meters}
    yield from _default_named(
        GROUP_COORDINATOR,
        "kafka.server:type=group-coordinator-metrics",
        metrics.snapshot().items(),
        meter_counts,
    )


def socket_server_metrics(metrics: Metrics) -> Iterator[Metric]:
    """``kafka.server:type=socket-server-metrics`` by the exporter's default naming, as the group
    coordinator's: ``connection-count{listener,networkProcessor}`` ->
    ``kafka_server_socket_server_metrics_connection_count{listener,networkprocessor}``; the
    ``-total`` counts untyped as the exporter shows them."""
    samples = [(key, read()) for key, read in metrics.socket_server.items()]
    totals = {name for (name, _), _ in samples if name.endswith("-total")}
    yield from _default_named(SOCKET_SERVER, "kafka.server:type=socket-server-metrics", samples, totals)


def _error_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return str(code)


def request_metrics(requests: RequestMetrics) -> Iterator[Metric]:
    counts = CounterMetricFamily(
        REQUEST_METRICS + "requests",
        "kafka.network:type=RequestMetrics,name=RequestsPerSec: requests by name and version",
        labels=["request", "version"],
    )
    for (request, version), c in sorted(requests.counters.items()):
        counts.add_metric([request, str(version)], c.count)
    yield counts
    errors = CounterMetricFamily(
        REQUEST_METRICS + "errors",
        "kafka.network:type=RequestMetrics,name=ErrorsPerSec: answers by top-level error code",
        labels=["request", "error"],
    )
    for request, code, n in requests.errors():
        errors.add_metric([request, _error_name(code or 0)], n)
    yield errors
    times = HistogramMetricFamily(
        REQUEST_METRICS + "totaltimems",
        "kafka.network:type=RequestMetrics,name=TotalTimeMs: ms from a request's arrival to its answer",
        labels=["request"],
    )
    bounds = [*(str(b) for b in REQUEST_TIME_BUCKETS_MS), "+Inf"]
    for request, t in sorted(requests.times.items()):
        cumulative, running = [], 0
        for bound, n in zip(bounds, t.buckets, strict=True):
            running += n
            cumulative.append((bound, running))
        times.add_metric([request], cumulative, t.sum_ms)
    yield times


def log_metrics(services: Services) -> Iterator[Metric]:
    names = {
        "logendoffset": "LogEndOffset",
        "logstartoffset": "LogStartOffset",
        "size": "Size",
        "numlogsegments": "NumLogSegments",
    }
    families = {k: Metric(LOG + k, f"kafka.log:type=Log,name={v}", "gauge") for k, v in names.items()}
    for part in services.partitions.all_partitions():
        labels = {"topic": part.topic.name, "partition": str(part.index)}
        log = part.log
        families["logendoffset"].add_sample(LOG + "logendoffset", labels, log.log_end_offset)
        families["logstartoffset"].add_sample(LOG + "logstartoffset", labels, log.log_start_offset)
        families["size"].add_sample(LOG + "size", labels, log.size_bytes)
        families["numlogsegments"].add_sample(LOG + "numlogsegments", labels, len(log.segments))
    yield from families.values()


def log_cleaner_metrics(services: Services) -> Iterator[Metric]:
    name = "kafka_log_logcleanermanager_uncleanable_partitions_count"
    family = Metric(name, "kafka.log:type=LogCleanerManager,name=uncleanable-partitions-count", "gauge")
    cleaners = [services.partitions.cleaner]
    cleaners += [runtime.cleaner for runtime in (services.groups, services.transactions, services.metadata)]
    count = sum(len(cleaner.uncleanable) for cleaner in cleaners if cleaner is not None)
    family.add_sample(name, {"logDirectory": str(services.config.data_dir.resolve())}, count)
    yield family


def lag_metrics(services: Services) -> Iterator[Metric]:
    current = Metric(
        "kafka_consumergroup_current_offset", "Current offset of a consumer group at a partition", "gauge"
    )
    current_sum = Metric(
        "kafka_consumergroup_current_offset_sum", "Current offset of a consumer group at a topic", "gauge"
    )
    lag = Metric(
        "kafka_consumergroup_lag", "Current approximate lag of a consumer group at a partition", "gauge"
    )
    lag_sum = Metric(
        "kafka_consumergroup_lag_sum", "Current approximate lag of a consumer group at a topic", "gauge"
    )
    members = Metric("kafka_consumergroup_members", "Amount of members in a consumer group", "gauge")
    share_start = Metric(
        "kafka_sharegroup_start_offset", "Start offset of a share group at a partition", "gauge"
    )
    share_lag = Metric(
        "kafka_sharegroup_lag", "Records from a share group's start offset to the high watermark", "gauge"
    )
    for g in views.groups(services):
        if g.type == "share":
            for p in g.offsets:
                labels = {"sharegroup": g.group_id, "topic": p.topic, "partition": str(p.partition)}
                share_start.add_sample(share_start.name, labels, p.offset)
                share_lag.add_sample(share_lag.name, labels, p.lag)
            continue
        members.add_sample(members.name, {"consumergroup": g.group_id}, len(g.members))
        sums: dict[str, tuple[int, int]] = {}
        for p in g.offsets:
            labels = {"consumergroup": g.group_id, "topic": p.topic, "partition": str(p.partition)}
            current.add_sample(current.name, labels, p.offset)
            lag.add_sample(lag.name, labels, p.lag)
            offset_total, lag_total = sums.get(p.topic, (0, 0))
            sums[p.topic] = (offset_total + p.offset, lag_total + p.lag)
        for topic, (offset_total, lag_total) in sums.items():
            labels = {"consumergroup": g.group_id, "topic": topic}
            current_sum.add_sample(current_sum.name, labels, offset_total)
            lag_sum.add_sample(lag_sum.name, labels, lag_total)
    yield from (current, current_sum, lag, lag_sum, members, share_start, share_lag)


class KcoordCollector(Collector):
    """Everything ``/metrics`` shows, read at scrape time."""

    def __init__(self, services: Services) -> None:
        self.services = services

    def collect(self) -> Iterable[Metric]:
        metrics = self.services.metrics
        yield from group_coordinator_metrics(metrics)
        yield from socket_server_metrics(metrics)
        yield from request_metrics(metrics.requests)
        yield from log_metrics(self.services)
        yield from log_cleaner_metrics(self.services)
        yield from lag_metrics(self.services)


def registry(services: Services) -> CollectorRegistry:
    """A registry of its own (not the process-wide default): two brokers in one process, as tests
    run them, each show their own metrics."""
    reg = CollectorRegistry(auto_describe=False)
    reg.register(KcoordCollector(services))
    return reg
