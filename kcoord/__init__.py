"""kcoord: a lightweight Kafka wire-protocol-compatible coordination broker."""

__version__ = "0.1.0"
