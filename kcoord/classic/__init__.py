"""Classic consumer groups (JoinGroup/SyncGroup rebalances) and committed offsets: Kafka's
ClassicGroup and OffsetMetadataManager rules as synchronous state machines."""
