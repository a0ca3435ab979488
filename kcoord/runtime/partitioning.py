"""Which coordinator partition a key belongs to, as Kafka computes it.

Kafka maps a group id or a transactional id to ``Utils.abs(key.hashCode()) % partitions``; kcoord
does the same so that a key lives in the partition Kafka's tools expect.
"""

from __future__ import annotations

import struct
from typing import Final

# Every request for a key asks for its partition, and the hash is a loop over the key's
# characters: the runtime remembers the answers for this many keys in use.
PARTITION_CACHE_KEYS: Final = 1 << 16


def java_string_hash(s: str) -> int:
    """Java's String.hashCode over UTF-16 code units, as a signed 32-bit int."""
    data = s.encode("utf-16-be")
    h = 0
    # Explicitly big-endian units: a native-order cast would swap the bytes of every unit on
    # little-endian machines and put groups in other partitions than Kafka's partitionFor.
    for unit in struct.unpack(f">{len(data) // 2}H", data):
        h = (31 * h + unit) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for(key: str, partitions: int) -> int:
    h = java_string_hash(key)
    return (0 if h == -(1 << 31) else abs(h)) % partitions  # Kafka's Utils.abs
