"""The one table of served APIs: key -> versions served, handler, error response.

ApiVersions is generated from it and the dispatcher refuses everything it does not list, so a
version is advertised exactly when it is dispatched. A version is listed only when every field
of it is honoured (SKIPPED.md lists what is left out and why).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

from kcoord.apis import (
    acls,
    admin,
    api_versions,
    cluster,
    configs,
    consumer_groups,
    fetch,
    find_coordinator,
    groups,
    list_offsets,
    metadata,
    offsets,
    produce,
    producer_id,
    producers,
    sasl,
    scram,
    share_fetch,
    share_groups,
    topics,
    transactions,
)
from kcoord.apis.context import RequestContext
from kcoord.apis.services import Services
from kcoord.protocol.groups_codec import decode_heartbeat, decode_sync_group
from kcoord.protocol.messages import ApiKey, ApiMessage, request_class, response_class
from kcoord.protocol.offsets_codec import decode_offset_commit, decode_offset_fetch
from kcoord.protocol.produce_codec import decode_produce

Handler = Callable[[Services, RequestContext, Any], Any]  # -> response, Reply, or None
ErrorResponse = Callable[[Any, int, int, str | None], Any]


class Decoder(Protocol):
    """(frame, position after the request header, version) -> (request, end); refuses forbidden
    nulls."""

    def __call__(self, buf: bytes, pos: int, version: int) -> tuple[Any, int]: ...


@dataclass(frozen=True)
class ApiSpec:
    key: ApiKey
    min_version: int
    max_version: int
    handler: Handler
    error_response: ErrorResponse | None
    # A hand-written decoder for the served versions (the hottest APIs), instead of kafka-python's.
    decoder: Decoder | None = None
    request_cls: type[ApiMessage] = field(init=False)
    response_cls: type[ApiMessage] = field(init=False)

    def __post_init__(self) -> None:
        req, resp = request_class(self.key), response_class(self.key)
        if req is None or resp is None:
            raise ValueError(f"no schema for {self.key!r}")
        if self.max_version > req.max_version:
            raise ValueError(
                f"{self.key.name}: v{self.max_version} is beyond its schema (v{req.max_version})"
            )
        object.__setattr__(self, "request_cls", req)
        object.__setattr__(self, "response_cls", resp)

    @property
    def name(self) -> str:
        return self.key.name


class EncodedOnce:
    """An answer that never changes: its bytes are kept per version. Reads its fields as the
    message's."""

    __slots__ = ("_encoded", "_message")

    def __init__(self, message: ApiMessage) -> None:
        self._message = message
        self._encoded: dict[int, bytes] = {}

    def __getattr__(self, name: str) -> Any:
        return getattr(self._message, name)

    def encode(self, version: int) -> bytes:
        data = self._encoded.get(version)
        if data is None:
            data = self._encoded[version] = self._message.encode(version=version)
        return data


class ApiTable:
    def __init__(self, specs: list[ApiSpec]) -> None:
        self._specs: dict[int, ApiSpec] = {}
        for spec in specs:
            if spec.key in self._specs:
                raise ValueError(f"{spec.key.name} listed twice")
            self._specs[int(spec.key)] = spec
        self._api_versions: EncodedOnce | None = None

    def get(self, api_key: int) -> ApiSpec | None:
        return self._specs.get(api_key)

    def __iter__(self) -> Iterator[ApiSpec]:
        return iter(sorted(self._specs.values(), key=lambda s: s.key))

    def api_versions_error(self, code: int) -> Any:
        """The v0 answer to an ApiVersions version we do not serve: as Kafka, only the
        ApiVersions entry is listed, so the client can retry at a version we share."""
        resp = response_class(ApiKey.ApiVersions)
        spec = self._specs[int(ApiKey.ApiVersions)]
        entry = resp.ApiVersion(api_key=spec.key, min_version=spec.min_version, max_version=spec.max_version)
        return resp(error_code=code, api_keys=[entry])

    def api_versions(self) -> Any:
        """The ApiVersions answer. The table never changes, so it is built once and encoded once
        per version: every client connection asks for it first (a thousand-member rebalance
        spent 8 % of its CPU rebuilding and encoding it)."""
        if self._api_versions is None:
            self._api_versions = EncodedOnce(self._build_api_versions())
        return self._api_versions

    def _build_api_versions(self) -> Any:
        resp = response_class(ApiKey.ApiVersions)
        return resp(
            error_code=0,
            api_keys=self.version_entries(),
            throttle_time_ms=0,
            supported_features=[
                resp.SupportedFeatureKey(name=name, min_version=0, max_version=level)
                for name, level in FEATURES
            ],
            finalized_features_epoch=FINALIZED_FEATURES_EPOCH,
            finalized_features=[
                resp.FinalizedFeatureKey(name=name, max_version_level=level, min_version_level=level)
                for name, level in FEATURES
            ],
        )

    def version_entries(self) -> list[Any]:
        entry = response_class(ApiKey.ApiVersions).ApiVersion
        return [entry(api_key=s.key, min_version=s.min_version, max_version=s.max_version) for s in self]


# The feature levels this broker runs at (KIP-584), which clients read from ApiVersions v3+.
# transaction.version 1: transactions with KIP-890 part 1's verification, but no epoch bump per
# transaction (part 2, level 2), so clients keep EndTxn/TxnOffsetCommit below v5.
FEATURES = (("transaction.version", 1),)
FINALIZED_FEATURES_EPOCH = 1  # the levels never change on a running broker


def build_table() -> ApiTable:
    """Every API kcoord serves."""

    K = ApiKey
    return ApiTable(
        [
            ApiSpec(K.Produce, 3, 13, produce.handle, produce.error_response, decode_produce),
            ApiSpec(K.Fetch, 4, 18, fetch.handle, fetch.error_response),
            ApiSpec(K.ListOffsets, 0, 11, list_offsets.handle, list_offsets.error_response),
            ApiSpec(K.Metadata, 0, 13, metadata.handle, None),
            ApiSpec(
                K.OffsetForLeaderEpoch,
                2,
                4,
                list_offsets.handle_leader_epoch,
                list_offsets.leader_epoch_error_response,
            ),
            ApiSpec(K.ApiVersions, 0, 4, api_versions.handle, api_versions.error_response),
            ApiSpec(K.SaslHandshake, 0, 1, sasl.handle_handshake, sasl.handshake_error_response),
            ApiSpec(K.SaslAuthenticate, 0, 2, sasl.handle_authenticate, sasl.authenticate_error_response),
            ApiSpec(K.CreateTopics, 2, 7, topics.handle_create, topics.create_error_response),
            ApiSpec(K.DeleteTopics, 1, 6, topics.handle_delete, topics.delete_error_response),
            ApiSpec(
                K.CreatePartitions,
                0,
                3,
                topics.handle_create_partitions,
                topics.create_partitions_error_response,
            ),
            ApiSpec(K.InitProducerId, 0, 5, producer_id.handle, producer_id.error_response),
            ApiSpec(K.DescribeProducers, 0, 0, producers.handle, producers.error_response),
            ApiSpec(K.DescribeConfigs, 1, 4, configs.handle_describe, configs.describe_error_response),
            ApiSpec(
                K.IncrementalAlterConfigs,
                0,
                1,
                configs.handle_incremental_alter,
                configs.incremental_alter_error_response,
            ),
            ApiSpec(K.AlterConfigs, 0, 2, configs.handle_alter, configs.alter_error_response),
            ApiSpec(
                K.ListConfigResources,
                0,
                1,
                configs.handle_list_resources,
                configs.list_resources_error_response,
            ),
            # Admin APIs of one node (apis/admin.py).
            ApiSpec(K.DeleteRecords, 0, 2, admin.handle_delete_records, admin.delete_records_error_response),
            ApiSpec(
                K.DescribeLogDirs,
                1,
                5,
                admin.handle_describe_log_dirs,
                admin.describe_log_dirs_error_response,
            ),
            ApiSpec(K.ElectLeaders, 0, 2, admin.handle_elect_leaders, admin.elect_leaders_error_response),
            ApiSpec(
                K.AlterPartitionReassignments,
                0,
                1,
                admin.handle_alter_partition_reassignments,
                admin.alter_partition_reassignments_error_response,
            ),
            ApiSpec(
                K.ListPartitionReassignments,
                0,
                0,
                admin.handle_list_partition_reassignments,
                admin.list_partition_reassignments_error_response,
            ),
            ApiSpec(
                K.DescribeCluster,
                0,
                2,
                cluster.handle_describe_cluster,
                cluster.describe_cluster_error_response,
            ),
            ApiSpec(K.DescribeTopicPartitions, 0, 0, metadata.handle_describe_topic_partitions, None),
            # Security metadata in __cluster_metadata (apis/acls.py, apis/scram.py).
            ApiSpec(K.DescribeAcls, 0, 3, acls.handle_describe, acls.describe_error_response),
            ApiSpec(K.CreateAcls, 0, 3, acls.handle_create, acls.create_error_response),
            ApiSpec(K.DeleteAcls, 0, 3, acls.handle_delete, acls.delete_error_response),
            ApiSpec(
                K.DescribeUserScramCredentials,
                0,
                0,
                scram.handle_describe,
                scram.describe_error_response,
            ),
            ApiSpec(K.AlterUserScramCredentials, 0, 0, scram.handle_alter, scram.alter_error_response),
            # Group coordinator.
            ApiSpec(
                K.FindCoordinator,
                0,
                6,
                find_coordinator.handle_find_coordinator,
                find_coordinator.find_coordinator_error_response,
            ),
            ApiSpec(K.JoinGroup, 0, 9, groups.handle_join, groups.join_error_response),
            ApiSpec(
                K.Heartbeat, 0, 4, groups.handle_heartbeat, groups.heartbeat_error_response, decode_heartbeat
            ),
            ApiSpec(K.LeaveGroup, 0, 5, groups.handle_leave, groups.leave_error_response),
            ApiSpec(K.SyncGroup, 0, 5, groups.handle_sync, groups.sync_error_response, decode_sync_group),
            ApiSpec(K.DescribeGroups, 0, 6, groups.handle_describe, groups.describe_error_response),
            ApiSpec(K.ListGroups, 0, 5, groups.handle_list, groups.list_error_response),
            ApiSpec(K.DeleteGroups, 0, 2, groups.handle_delete, groups.delete_error_response),
            ApiSpec(
                K.OffsetCommit,
                2,
                10,
                offsets.handle_commit,
                offsets.commit_error_response,
                decode_offset_commit,
            ),
            ApiSpec(
                K.OffsetFetch, 1, 10, offsets.handle_fetch, offsets.fetch_error_response, decode_offset_fetch
            ),
            ApiSpec(K.OffsetDelete, 0, 0, offsets.handle_delete, offsets.delete_error_response),
            ApiSpec(K.TxnOffsetCommit, 0, 4, offsets.handle_txn_commit, offsets.txn_commit_error_response),
            # Transaction coordinator (transaction.version 1; see apis/transactions.py).
            ApiSpec(
                K.AddPartitionsToTxn,
                0,
                3,
                transactions.handle_add_partitions,
                transactions.add_partitions_error_response,
            ),
            ApiSpec(
                K.AddOffsetsToTxn,
                0,
                4,
                transactions.handle_add_offsets,
                transactions.add_offsets_error_response,
            ),
            ApiSpec(K.EndTxn, 0, 4, transactions.handle_end, transactions.end_error_response),
            ApiSpec(
                K.DescribeTransactions,
                0,
                0,
                transactions.handle_describe,
                transactions.describe_error_response,
            ),
            ApiSpec(
                K.ListTransactions,
                0,
                2,
                transactions.handle_list,
                transactions.list_error_response,
            ),
            # Consumer groups of the KIP-848 protocol (group.protocol=consumer).
            ApiSpec(
                K.ConsumerGroupHeartbeat,
                0,
                1,
                consumer_groups.handle_heartbeat,
                consumer_groups.heartbeat_error_response,
            ),
            ApiSpec(
                K.ConsumerGroupDescribe,
                0,
                1,
                consumer_groups.handle_describe,
                consumer_groups.describe_error_response,
            ),
            # Share groups (KIP-932).
            ApiSpec(
                K.ShareGroupHeartbeat,
                1,
                1,
                share_groups.handle_share_heartbeat,
                share_groups.share_heartbeat_error_response,
            ),
            ApiSpec(
                K.ShareGroupDescribe,
                1,
                1,
                share_groups.handle_share_describe,
                share_groups.share_describe_error_response,
            ),
            ApiSpec(
                K.ShareFetch, 1, 2, share_fetch.handle_share_fetch, share_fetch.share_fetch_error_response
            ),
            ApiSpec(
                K.ShareAcknowledge,
                1,
                2,
                share_fetch.handle_share_acknowledge,
                share_fetch.share_acknowledge_error_response,
            ),
            ApiSpec(
                K.DescribeShareGroupOffsets,
                0,
                1,
                share_groups.handle_describe_offsets,
                share_groups.describe_offsets_error_response,
            ),
            ApiSpec(
                K.AlterShareGroupOffsets,
                0,
                0,
                share_groups.handle_alter_offsets,
                share_groups.alter_offsets_error_response,
            ),
            ApiSpec(
                K.DeleteShareGroupOffsets,
                0,
                0,
                share_groups.handle_delete_offsets,
                share_groups.delete_offsets_error_response,
            ),
        ]
    )
