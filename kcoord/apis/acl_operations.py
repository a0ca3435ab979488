"""The operations each resource type reports in the authorized-operations bitfields of Metadata,
DescribeCluster, DescribeGroups, ConsumerGroupDescribe and ShareGroupDescribe (Kafka's AclOperation
codes). apis/authorization.py reports those the authorizer allows, or all of them without one.
"""

from __future__ import annotations

# AclOperation codes: 3 READ, 4 WRITE, 5 CREATE, 6 DELETE, 7 ALTER, 8 DESCRIBE, 9 CLUSTER_ACTION,
# 10 DESCRIBE_CONFIGS, 11 ALTER_CONFIGS, 12 IDEMPOTENT_WRITE; per resource type as Kafka 4's
# AclEntry.supportedOperations (groups have configs since KIP-848 and KIP-932).
TOPIC_OPERATIONS = {3, 4, 5, 6, 7, 8, 10, 11}
CLUSTER_OPERATIONS = {5, 7, 8, 9, 10, 11, 12}
GROUP_OPERATIONS = {3, 6, 8, 10, 11}  # READ, DELETE, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS


def bitfield(ops: set[int]) -> int:
    """The operations as the int32 bitfield the newer APIs carry (bit n = operation code n)."""
    value = 0
    for bit in ops:
        value |= 1 << bit
    return value
