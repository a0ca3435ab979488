"""Broker configuration under Kafka's own config names.

Every setting is a field of :class:`BrokerConfig` whose Kafka name is the field name with
underscores turned into dots (``log_dirs`` <-> ``log.dirs``). The same name is used in a TOML
file (``log.dirs = "..."`` or nested tables), as an environment variable (``KCOORD_LOG_DIRS``)
and as a flag (``--log-dirs``). Precedence: flag > environment > file > default.
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from kcoord.endpoints import Endpoint, parse_http_listeners, parse_ip_overrides, parse_listeners
from kcoord.security.authenticator import check_mechanisms
from kcoord.security.jaas import parse_jaas_config
from kcoord.security.listeners import (
    SECURITY_PROTOCOLS,
    listener_protocol,
    parse_protocol_map,
)
from kcoord.security.tls import check_store_type, enabled_versions

ENV_PREFIX = "KCOORD_"
LISTENER_PREFIX = "listener.name."
# Settings a listener may override as listener.name.<listener>.<setting> (Kafka's per-listener
# configs), besides <mechanism>.sasl.jaas.config.
PER_LISTENER = (
    "ssl_keystore_type",
    "ssl_keystore_location",
    "ssl_keystore_key",
    "ssl_keystore_certificate_chain",
    "ssl_key_password",
    "ssl_truststore_type",
    "ssl_truststore_location",
    "ssl_truststore_certificates",
    "ssl_client_auth",
    "ssl_enabled_protocols",
    "ssl_cipher_suites",
    "ssl_principal_mapping_rules",
    "sasl_enabled_mechanisms",
    "sasl_jaas_config",
    "sasl_server_max_receive_size",
    "connections_max_reauth_ms",
)
# Settings that hold secrets: DescribeConfigs shows them as sensitive, without their value.
SENSITIVE = frozenset({"ssl_keystore_key", "ssl_key_password", "sasl_jaas_config", "listener_name"})
# Kafka's KRaft authorizer (AclAuthorizer, the ZooKeeper one, went with ZooKeeper in Kafka 4).
STANDARD_AUTHORIZERS = ("org.apache.kafka.metadata.authorizer.StandardAuthorizer",)


def kafka_name(field_name: str) -> str:
    return field_name.replace("_", ".")


def field_name(kafka: str) -> str:
    return kafka.replace(".", "_").replace("-", "_")


class BrokerConfig(BaseModel):
    """All settings with Kafka's names and defaults (kcoord-only settings say so)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    # --- identity and listeners -----------------------------------------------------------
    node_id: int = Field(1, description="This broker's id, reported in Metadata and FindCoordinator.")
    listeners: str = Field(
        "PLAINTEXT://127.0.0.1:9092",
        description="Comma-separated NAME://host:port listeners to bind (port 0 picks a free port).",
    )
    advertised_listeners: str | None = Field(
        None,
        description="NAME://host:port per listener as clients should reach it; default: listeners.",
    )
    listener_security_protocol_map: str = Field(
        "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL",
        description="NAME:PROTOCOL pairs mapping listener names to PLAINTEXT, SSL, SASL_PLAINTEXT or "
        "SASL_SSL; a listener named after a protocol needs no entry.",
    )
    inter_broker_listener_name: str | None = Field(
        None, description="Accepted when it names a configured listener (one node: no other broker)."
    )
    security_inter_broker_protocol: str | None = Field(
        None, description="Accepted when a listener uses this protocol (one node: no other broker)."
    )
    sasl_mechanism_inter_broker_protocol: str | None = Field(
        None,
        description="Accepted when the inter-broker listener (or, without one, some SASL listener) "
        "enables this mechanism (one node: no other broker).",
    )
    listener_name: dict[str, str] = Field(
        default_factory=dict,
        description="Kafka's per-listener overrides listener.name.<listener>.<key> (for example "
        "listener.name.sasl_ssl.plain.sasl.jaas.config), keyed by '<listener>.<key>'; in TOML write "
        "the full quoted key, as a flag or environment variable a JSON object.",
    )
    # --- TLS (SSL and SASL_SSL listeners; each may be overridden per listener) ---------------
    ssl_keystore_type: str = Field(
        "PEM", description="Only PEM (Kafka's default JKS, and PKCS12, are refused: see SKIPPED.md)."
    )
    ssl_keystore_location: str | None = Field(
        None, description="PEM file holding the private key and the certificate chain."
    )
    ssl_keystore_key: str | None = Field(None, description="The private key as inline PEM.")
    ssl_keystore_certificate_chain: str | None = Field(
        None, description="The certificate chain as inline PEM."
    )
    ssl_key_password: str | None = Field(None, description="Password of an encrypted private key.")
    ssl_truststore_type: str = Field("PEM", description="Only PEM.")
    ssl_truststore_location: str | None = Field(
        None, description="PEM file of the CA certificates client certificates are verified against."
    )
    ssl_truststore_certificates: str | None = Field(
        None, description="Trusted CA certificates as inline PEM."
    )
    ssl_client_auth: Literal["none", "requested", "required"] = Field(
        "none", description="Whether TLS clients must (required) or may (requested) present a certificate."
    )
    ssl_enabled_protocols: str = Field("TLSv1.2,TLSv1.3", description="TLS versions accepted.")
    ssl_cipher_suites: str = Field(
        "", description="OpenSSL cipher names for TLSv1.2 (TLSv1.3 suites are OpenSSL's); empty: defaults."
    )
    ssl_principal_mapping_rules: str = Field(
        "DEFAULT",
        description="How a client certificate's DN becomes the principal's name: DEFAULT or "
        "RULE:pattern/replacement/[LU] rules, as Kafka.",
    )
    # --- SASL (SASL_PLAINTEXT and SASL_SSL listeners) ------------------------------------------
    sasl_enabled_mechanisms: str = Field(
        "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        description="Mechanisms served (Kafka's default GSSAPI, and OAUTHBEARER, are not: see SKIPPED.md).",
    )
    sasl_jaas_config: str | None = Field(
        None,
        description="JAAS configuration of PLAIN's users (PlainLoginModule required "
        'user_<name>="<password>";) for listeners without listener.name.<listener>.plain.sasl.jaas.config.',
    )
    sasl_server_max_receive_size: int = Field(
        524288, description="Largest frame accepted on a SASL listener before authentication."
    )
    connections_max_reauth_ms: int = Field(
        0,
        ge=0,
        description="SASL sessions last this long, then the client re-authenticates (KIP-368) or its "
        "connection is closed at its next request; 0: sessions do not expire.",
    )
    connection_failed_authentication_delay_ms: int = Field(
        100, description="Delay before closing a connection whose authentication failed."
    )
    sasl_failed_authentication_max_per_ip: int = Field(
        10,
        description="kcoord: failed SASL authentications allowed per client IP in "
        "sasl.failed.authentication.window.ms; beyond, that IP's authentications fail unchecked "
        "(0: no limit).",
    )
    sasl_failed_authentication_window_ms: int = Field(
        60000, description="kcoord: the window of sasl.failed.authentication.max.per.ip."
    )
    socket_request_max_bytes: int = Field(
        104857600, description="Largest request frame accepted; larger frames close the connection."
    )
    max_connections: int = Field(
        2147483647, ge=0, description="Connections the broker holds at once; the excess is closed."
    )
    max_connections_per_ip: int = Field(
        2147483647, ge=0, description="Connections from one address; the excess is closed at accept."
    )
    max_connections_per_ip_overrides: str = Field(
        "", description="Comma-separated host:count pairs overriding max.connections.per.ip."
    )
    connections_max_idle_ms: int = Field(
        600000, ge=0, description="Close connections that sent and received nothing this long (0: never)."
    )
    http_listeners: str = Field(
        "http://127.0.0.1:9644",
        description=(
            "kcoord: comma-separated http://host:port addresses of the operations endpoint (/metrics, "
            "/health, /api/); empty turns it off."
        ),
    )

    # --- storage ------------------------------------------------------------------------
    log_dirs: str = Field("./kcoord-data", description="Directory holding every log.")
    log_flush_policy: Literal["always", "interval", "os"] = Field(
        "always",
        description=(
            "kcoord: when appended data is fsynced. always = before acknowledging (concurrent "
            "writers share one fsync); interval = every log.flush.interval.ms; os = never "
            "explicitly."
        ),
    )
    log_flush_interval_ms: int = Field(1000, description="fsync period under log.flush.policy=interval.")
    log_segment_bytes: int = Field(1073741824, description="Roll a segment once it reaches this size.")
    log_roll_ms: int | None = Field(None, description="Roll a segment this old; default log.roll.hours.")
    log_roll_hours: int = Field(168, description="Roll a segment this old (hours).")
    log_retention_ms: int | None = Field(
        None, description="Delete segments older than this (-1: never); default log.retention.hours."
    )
    log_retention_hours: int = Field(168, description="Delete segments older than this (hours).")
    log_retention_bytes: int = Field(-1, description="Delete old segments beyond this size (-1: no limit).")
    log_retention_check_interval_ms: int = Field(300000, description="How often retention runs.")
    log_index_interval_bytes: int = Field(4096, description="Bytes between offset-index entries.")
    log_preallocate: bool = Field(
        True,
        description=(
            "Grow the active segment's file ahead of its appends (1-16 MiB at a time; coordinator "
            "logs by writing 1 MiB of zeros), trimmed when it rolls or closes (kcoord: on by "
            "default, unlike Kafka: on ext4, appends that allocate wait for a running sync, and an "
            "fdatasync after an append that grows the file costs ~40 us more)."
        ),
    )
    log_cache_retain_bytes: int = Field(
        16 << 20,
        ge=-1,
        description=(
            "kcoord: bytes at the end of each topic partition's segments kept in the page cache "
            "once fsynced; older synced pages are dropped, so that appends recycle pages instead "
            "of taking fresh ones (a 100 KiB write cost 8x the kernel time once a few GB had gone "
            "into the page cache). Consumers further behind read from the disk. -1 leaves the "
            "page cache to the kernel. Coordinator logs are never dropped."
        ),
    )
    log_message_timestamp_type: Literal["CreateTime", "LogAppendTime"] = Field(
        "CreateTime", description="Default message.timestamp.type of new topics."
    )
    message_max_bytes: int = Field(
        1048588, description="Largest record batch accepted (default max.message.bytes)."
    )

    # --- topics -------------------------------------------------------------------------
    auto_create_topics_enable: bool = Field(True, description="Create unknown topics on Metadata/Produce.")
    num_partitions: int = Field(1, description="Partitions of auto-created topics.")
    default_replication_factor: int = Field(1, description="Only 1 is possible on one broker.")

    # --- fetch sessions and producers ------------------------------------------------------
    max_incremental_fetch_session_cache_slots: int = Field(
        1000, description="Incremental fetch sessions kept at once (0 refuses them)."
    )
    producer_id_expiration_ms: int = Field(
        86400000, description="Forget an idempotent producer's state after this long without writes."
    )

    # --- coordinator (groups and offsets) -----------------------------------------------------
    # Kafka's default is 50, to spread coordinators over brokers. On one node every partition is one
    # more file each group-commit fsync has to flush; applies only when the topic is created.
    offsets_topic_num_partitions: int = Field(
        1, description="Coordinator partitions of __consumer_offsets (when it is created)."
    )
    offsets_retention_minutes: int = Field(10080, description="KIP-211 offset retention.")
    offsets_retention_check_interval_ms: int = Field(600000, description="How often offsets expire.")
    offsets_history_retention_ms: int = Field(
        604800000,
        ge=0,
        description="Keep superseded offset commits this long when compacting __consumer_offsets "
        "(offset history, rewind to a time); 0 keeps only the latest, as Kafka.",
    )
    offset_metadata_max_bytes: int = Field(4096, description="Largest committed metadata string.")
    group_min_session_timeout_ms: int = Field(6000, description="Smallest session timeout accepted.")
    group_max_session_timeout_ms: int = Field(1800000, description="Largest session timeout accepted.")
    group_initial_rebalance_delay_ms: int = Field(
        3000, description="Wait for more joiners of an empty group."
    )
    group_max_size: int = Field(2147483647, description="Most members of one classic group.")
    # --- KIP-848 consumer groups (group.protocol=consumer) ---------------------------------
    group_consumer_session_timeout_ms: int = Field(
        45000, description="A consumer-protocol member that does not heartbeat for this long is fenced."
    )
    group_consumer_heartbeat_interval_ms: int = Field(
        5000, description="How often consumer-protocol members heartbeat."
    )
    group_consumer_max_size: int = Field(2147483647, description="Most members of one consumer group.")
    group_consumer_assignors: str = Field(
        "uniform,range", description="Server-side assignors, comma-separated; the first is the default."
    )
    group_consumer_migration_policy: Literal["disabled", "upgrade", "downgrade", "bidirectional"] = Field(
        "bidirectional",
        description="Online migration between the classic and the consumer protocol: a classic group "
        "upgraded when a consumer-protocol member joins, a consumer group downgraded when its last "
        "consumer-protocol member leaves.",
    )
    # --- share groups (KIP-932); each group may override its share.* configs ------------------
    group_share_session_timeout_ms: int = Field(45000, description="Default share.session.timeout.ms.")
    group_share_min_session_timeout_ms: int = Field(45000, description="Smallest share.session.timeout.ms.")
    group_share_max_session_timeout_ms: int = Field(60000, description="Largest share.session.timeout.ms.")
    group_share_heartbeat_interval_ms: int = Field(5000, description="Default share.heartbeat.interval.ms.")
    group_share_min_heartbeat_interval_ms: int = Field(
        5000, description="Smallest share.heartbeat.interval.ms."
    )
    group_share_max_heartbeat_interval_ms: int = Field(
        15000, description="Largest share.heartbeat.interval.ms."
    )
    group_share_max_size: int = Field(200, description="Most members of one share group.")
    group_share_record_lock_duration_ms: int = Field(
        30000, description="Default share.record.lock.duration.ms (acquisition lock)."
    )
    group_share_min_record_lock_duration_ms: int = Field(
        15000, description="Smallest share.record.lock.duration.ms."
    )
    group_share_max_record_lock_duration_ms: int = Field(
        60000, description="Largest share.record.lock.duration.ms."
    )
    group_share_delivery_count_limit: int = Field(5, description="Default share.delivery.count.limit.")
    group_share_min_delivery_count_limit: int = Field(2, description="Smallest share.delivery.count.limit.")
    group_share_max_delivery_count_limit: int = Field(10, description="Largest share.delivery.count.limit.")
    group_share_partition_max_record_locks: int = Field(
        2000, description="Default share.partition.max.record.locks (records in flight per share-partition)."
    )
    group_share_max_share_sessions: int = Field(2000, description="Share sessions kept at once.")
    group_share_isolation_level: Literal["read_uncommitted", "read_committed"] = Field(
        "read_uncommitted", description="Default share.isolation.level."
    )
    offsets_topic_segment_bytes: int = Field(
        104857600, description="Segment size of the coordinator logs (__consumer_offsets)."
    )
    # kcoord's own: Kafka replays the whole coordinator log at start-up (docs/coordinator-records.md).
    coordinator_snapshot_interval_records: int = Field(
        100000,
        ge=0,
        description="Snapshot a coordinator partition's state every this many records appended, "
        "and at least 50 per key it holds (and at a clean shutdown), so a restart replays only the "
        "log after it; 0: only at shutdown.",
    )

    # --- transaction coordinator ---------------------------------------------------------------
    # Kafka's default is 50 (see offsets.topic.num.partitions for why one node takes 1).
    transaction_state_log_num_partitions: int = Field(
        1, description="Coordinator partitions of __transaction_state (when it is created)."
    )
    transaction_state_log_segment_bytes: int = Field(
        104857600, description="Segment size of __transaction_state."
    )
    transaction_max_timeout_ms: int = Field(
        900000,
        description="Largest transaction timeout a producer may ask for (INVALID_TRANSACTION_TIMEOUT).",
    )
    transactional_id_expiration_ms: int = Field(
        604800000, description="Forget a transactional id after this long without a transaction."
    )
    transaction_abort_timed_out_transaction_cleanup_interval_ms: int = Field(
        10000, description="How often transactions open past their timeout are aborted."
    )
    transaction_remove_expired_transaction_cleanup_interval_ms: int = Field(
        3600000, description="How often idle transactional ids expire."
    )
    log_cleaner_backoff_ms: int = Field(15000, description="How often the log cleaner looks for work.")
    log_cleaner_min_cleanable_ratio: float = Field(
        0.5, description="Clean a log once this share of its closed segments is new since the last cleaning."
    )
    log_cleaner_delete_retention_ms: int = Field(
        86400000, description="Keep tombstones this long when compacting."
    )

    # --- authorization (kcoord/metadata/authorizer.py) ----------------------------------------
    authorizer_class_name: str = Field(
        "",
        description=(
            "org.apache.kafka.metadata.authorizer.StandardAuthorizer turns ACLs on; empty: no authorizer "
            "(every request allowed, the ACL APIs answer SECURITY_DISABLED)."
        ),
    )
    super_users: str = Field(
        "", description="Semicolon-separated principals (User:alice) allowed everything."
    )
    allow_everyone_if_no_acl_found: bool = Field(
        False, description="Allow an operation on a resource that no ACL names at all."
    )
    metadata_log_segment_bytes: int = Field(
        1073741824, description="Segment size of __cluster_metadata (SCRAM credentials and ACLs)."
    )

    @field_validator("group_consumer_migration_policy", mode="before")
    @classmethod
    def _policy_any_case(cls, v: object) -> object:
        return v.lower() if isinstance(v, str) else v  # Kafka parses the policy case-insensitively

    @field_validator("group_consumer_assignors")
    @classmethod
    def _known_assignors(cls, v: str) -> str:
        names = [n.strip() for n in v.split(",") if n.strip()]
        known = ("uniform", "range")
        if not names or any(n not in known for n in names):
            raise ValueError(f"group.consumer.assignors must name some of {', '.join(known)}")
        return ",".join(names)

    @field_validator("listener_name", mode="before")
    @classmethod
    def _listener_overrides_from_json(cls, v: object) -> object:
        # A flag or environment variable carries the mapping as a JSON object.
        if isinstance(v, str):
            try:
                return json.loads(v) if v.strip() else {}
            except json.JSONDecodeError as e:
                raise ValueError(
                    f"listener.name must be a JSON object of '<listener>.<key>': value: {e}"
                ) from None
        return v

    @field_validator("ssl_keystore_type", "ssl_truststore_type")
    @classmethod
    def _pem_only(cls, v: str, info: Any) -> str:
        return check_store_type(kafka_name(info.field_name), v)

    @field_validator("ssl_client_auth", mode="before")
    @classmethod
    def _client_auth_any_case(cls, v: object) -> object:
        return v.lower() if isinstance(v, str) else v

    @field_validator("ssl_enabled_protocols")
    @classmethod
    def _tls_versions(cls, v: str) -> str:
        enabled_versions(v)
        return v

    @field_validator("ssl_principal_mapping_rules")
    @classmethod
    def _mapping_rules(cls, v: str) -> str:
        from kcoord.security.ssl_principal import SslPrincipalMapper

        SslPrincipalMapper(v)
        return v

    @field_validator("sasl_enabled_mechanisms")
    @classmethod
    def _mechanisms(cls, v: str) -> str:
        return ",".join(check_mechanisms([m.strip().upper() for m in v.split(",") if m.strip()]))

    @field_validator("sasl_jaas_config")
    @classmethod
    def _jaas(cls, v: str | None) -> str | None:
        if v is not None:
            parse_jaas_config(v)
        return v

    @model_validator(mode="after")
    def _listeners_and_security(self) -> BrokerConfig:
        mapping = parse_protocol_map(self.listener_security_protocol_map)
        names = [e.name for e in parse_listeners(self.listeners)]
        protocols = {name: listener_protocol(name, mapping) for name in names}
        if self.inter_broker_listener_name is not None and self.security_inter_broker_protocol is not None:
            raise ValueError(
                "Only one of inter.broker.listener.name and security.inter.broker.protocol should be set."
            )
        inter_broker = self.inter_broker_listener_name
        if inter_broker is not None and inter_broker.upper() not in protocols:
            raise ValueError(
                f"inter.broker.listener.name {inter_broker} is not a listener (listeners: {', '.join(names)})"
            )
        if self.security_inter_broker_protocol is not None:
            wanted = self.security_inter_broker_protocol.upper()
            if wanted not in SECURITY_PROTOCOLS:
                raise ValueError(f"security.inter.broker.protocol {wanted} is not a security protocol")
            if wanted not in protocols.values():
                raise ValueError(f"security.inter.broker.protocol {wanted}: no listener uses it")
        self._check_inter_broker_mechanism(protocols)
        lowered = {n.lower(): n for n in names}
        for key, value in self.listener_name.items():
            listener, _, setting = key.partition(".")
            if listener not in lowered:
                raise ValueError(
                    f"listener.name.{key}: {listener} is not a listener (names are lower case: "
                    f"{', '.join(lowered)})"
                )
            field = field_name(setting)
            mechanism, _, rest = setting.partition(".")
            if rest in ("sasl.jaas.config", "connections.max.reauth.ms") and mechanism.upper() in (
                "PLAIN",
                "SCRAM-SHA-256",
                "SCRAM-SHA-512",
            ):
                field = field_name(rest)
            if field not in PER_LISTENER:
                raise ValueError(f"listener.name.{key}: {setting} is not a per-listener setting")
            # The same checks as the broker-wide setting.
            BrokerConfig.model_validate({field: value})
        return self

    def _check_inter_broker_mechanism(self, protocols: dict[str, str]) -> None:
        mechanism = self.sasl_mechanism_inter_broker_protocol
        if mechanism is None:
            return
        if self.inter_broker_listener_name is not None:
            candidates = [self.inter_broker_listener_name.upper()]
        else:
            candidates = [n for n, p in protocols.items() if p in ("SASL_PLAINTEXT", "SASL_SSL")]
        for name in candidates:
            enabled = str(
                self.listener_name.get(
                    f"{name.lower()}.sasl.enabled.mechanisms", self.sasl_enabled_mechanisms
                )
            )
            if protocols[name] in (
                "SASL_PLAINTEXT",
                "SASL_SSL",
            ) and mechanism.upper() in enabled.upper().split(","):
                return
        raise ValueError(
            f"sasl.mechanism.inter.broker.protocol {mechanism} is not enabled on "
            f"{'listener ' + candidates[0] if len(candidates) == 1 else 'any SASL listener'}"
        )

    def listener_protocols(self) -> dict[str, str]:
        """Each listener's security protocol."""
        mapping = parse_protocol_map(self.listener_security_protocol_map)
        return {e.name: listener_protocol(e.name, mapping) for e in self.listener_endpoints()}

    def listener_setting(self, listener: str, field: str, mechanism: str | None = None) -> Any:
        """``field`` for ``listener``: listener.name.<listener>.[<mechanism>.]<setting> if set, else
        the broker-wide setting (Kafka's lookup order)."""
        prefix = listener.lower() + "."
        setting = kafka_name(field)
        if mechanism is not None:
            value = self.listener_name.get(f"{prefix}{mechanism.lower()}.{setting}")
            if value is not None:
                return getattr(type(self).model_validate({field: value}), field)
        value = self.listener_name.get(prefix + setting)
        if value is None:
            return getattr(self, field)
        return getattr(type(self).model_validate({field: value}), field)

    @field_validator("authorizer_class_name")
    @classmethod
    def _known_authorizer(cls, v: str) -> str:
        # Kafka's KRaft authorizer is the one kcoord implements; another class would be a
        # different policy silently replaced by this one.
        v = v.strip()
        if v and v not in STANDARD_AUTHORIZERS:
            raise ValueError(
                f"authorizer.class.name {v!r} is not available; kcoord implements only "
                f"{STANDARD_AUTHORIZERS[0]} (or empty: no authorizer)"
            )
        return v

    @field_validator("http_listeners")
    @classmethod
    def _http_listeners(cls, v: str) -> str:
        parse_http_listeners(v)
        return v

    @field_validator("max_connections_per_ip_overrides")
    @classmethod
    def _ip_overrides(cls, v: str) -> str:
        parse_ip_overrides(v)
        return v

    @field_validator("node_id")
    @classmethod
    def _non_negative(cls, v: int) -> int:
        if v < 0:
            raise ValueError("must be >= 0")
        return v

    @field_validator("socket_request_max_bytes", "log_segment_bytes", "message_max_bytes")
    @classmethod
    def _positive(cls, v: int) -> int:
        if v <= 0:
            raise ValueError("must be > 0")
        return v

    # --- derived values (Kafka's precedence between the ms and hours forms) ---------------------
    @property
    def effective_log_roll_ms(self) -> int:
        return self.log_roll_ms if self.log_roll_ms is not None else self.log_roll_hours * 3_600_000

    @property
    def effective_log_retention_ms(self) -> int:
        if self.log_retention_ms is not None:
            return self.log_retention_ms
        return self.log_retention_hours * 3_600_000

    @property
    def data_dir(self) -> Path:
        return Path(self.log_dirs)

    def listener_endpoints(self) -> list[Endpoint]:
        return parse_listeners(self.listeners)

    def http_endpoints(self) -> list[Endpoint]:
        return parse_http_listeners(self.http_listeners)

    def advertised_endpoints(self) -> list[Endpoint]:
        bound = self.listener_endpoints()
        if not self.advertised_listeners:
            return bound
        advertised = {e.name: e for e in parse_listeners(self.advertised_listeners)}
        return [advertised.get(e.name, e) for e in bound]

    def kafka_items(self) -> dict[str, Any]:
        """Every setting under its Kafka name (DescribeConfigs on the broker resource)."""
        return {kafka_name(k): v for k, v in self.model_dump().items()}


def load_toml(path: Path) -> dict[str, Any]:
    """Read a TOML config file; dotted keys and nested tables both map to Kafka names."""
    with open(path, "rb") as f:
        raw = tomllib.load(f)
    flat: dict[str, Any] = {}

    def walk(prefix: str, node: dict[str, Any]) -> None:
        for key, value in node.items():
            name = f"{prefix}.{key}" if prefix else key
            if isinstance(value, dict):
                walk(name, value)
            else:
                flat[name] = value

    walk("", raw)
    values: dict[str, Any] = {}
    overrides: dict[str, str] = {}
    for key, value in flat.items():
        if key.startswith(LISTENER_PREFIX):
            # Kafka's listener.name.<listener>.<key>: one mapping field (BrokerConfig.listener_name).
            overrides[key[len(LISTENER_PREFIX) :]] = str(value)
        else:
            values[field_name(key)] = value
    if overrides:
        values["listener_name"] = overrides
    return values


def build_config(file_values: dict[str, Any], overrides: dict[str, Any]) -> BrokerConfig:
    """Defaults <- file <- overrides (env and flags, already merged by the CLI)."""
    values = dict(file_values)
    values.update(overrides)
    return BrokerConfig(**values)
