"""A topic's ``compression.type``: the codec batches are stored with (Kafka's LogValidator).

``producer`` (the default) stores every batch as the producer compressed it: nothing is decoded
on the produce path. Any other value recompresses each batch whose codec differs from it with
that codec (at the topic's ``compression.<codec>.level``) before the append; a batch that
already has the topic's codec is stored as sent, as Kafka assigns its offsets in place then.
Control batches (transaction markers) never come from producers and are written by the broker
uncompressed; they are never recompressed.
"""

from __future__ import annotations

from kcoord.config import BrokerConfig
from kcoord.dataplane.topic_config import effective
from kcoord.protocol import records
from kcoord.protocol.records import BatchHeader
from kcoord.storage import record_filter

# compression.type values -> the codec id in a batch's attributes.
CODECS = {"uncompressed": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
# The level config of each codec that has one (snappy has none).
LEVEL_CONFIGS = {1: "compression.gzip.level", 3: "compression.lz4.level", 4: "compression.zstd.level"}


def topic_codec(configs: dict[str, str], broker: BrokerConfig) -> tuple[int, int | None] | None:
    """(codec id, level) batches of the topic are stored with; None for ``producer``."""
    name = effective("compression.type", configs, broker)
    if name == "producer":
        return None
    codec = CODECS[name]
    level_config = LEVEL_CONFIGS.get(codec)
    level = int(effective(level_config, configs, broker)) if level_config else None
    return codec, level


def apply_topic_codec(
    data: bytearray | memoryview, headers: list[BatchHeader], codec: tuple[int, int | None] | None
) -> tuple[bytearray | memoryview, list[BatchHeader]]:
    """The validated batches in ``data`` as the topic stores them: unchanged (the same objects)
    when no batch needs recompressing, else a new buffer and its headers."""
    if codec is None:
        return data, headers
    target, level = codec
    if all(h.compression == target or h.is_control for h in headers):
        return data, headers
    out = bytearray()
    for h in headers:
        batch = memoryview(data)[h.position : h.position + h.size]
        if h.compression == target or h.is_control:
            out += batch
        else:
            out += record_filter.recompress(batch, h, target, level)
    return out, list(records.iter_headers(out))
