"""The record registry: which records a coordinator log holds, and their bytes.

Coordinator logs use Kafka's ``__consumer_offsets`` layout: a record key is an int16 record type
followed by the key's fields, a value is an int16 version followed by that version's fields, and
a null value is a tombstone. The runtime reads and writes records only through the codecs that
coordinator kinds register here: a codec names the record types (key type ids) it reads and the
key classes it writes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol

from kcoord.protocol.fields import RecordFormatError
from kcoord.runtime.outcome import Record

__all__ = ["Encoder", "RecordCodec", "RecordFormatError", "RecordRegistry", "record_type"]

Encoder = Callable[[Any, Any], tuple[bytes, bytes | None]]  # (key, value) -> (key bytes, value bytes)


class RecordCodec(Protocol):
    """The records of one coordinator kind."""

    @property
    def key_types(self) -> tuple[int, ...]:
        """The int16 record types (the first two bytes of a key) this codec reads."""
        ...

    @property
    def encoders(self) -> Mapping[type, Encoder]:
        """Key class -> the encoder of records with such a key."""
        ...

    def decode(self, key: bytes, value: bytes | None) -> Record: ...


def record_type(key: bytes) -> int:
    if len(key) < 2:
        raise RecordFormatError("a record key holds at least its int16 type")
    return int.from_bytes(key[:2], "big", signed=True)


class RecordRegistry:
    def __init__(self, codecs: Iterable[RecordCodec] = ()) -> None:
        self._by_type: dict[int, RecordCodec] = {}
        self._encoders: dict[type, Encoder] = {}
        for codec in codecs:
            self.register(codec)

    def register(self, codec: RecordCodec) -> None:
        for t in codec.key_types:
            if t in self._by_type:
                raise ValueError(f"record type {t} is registered twice")
            self._by_type[t] = codec
        for cls, encoder in codec.encoders.items():
            if cls in self._encoders:
                raise ValueError(f"records keyed by {cls.__name__} are registered twice")
            self._encoders[cls] = encoder

    @property
    def key_types(self) -> tuple[int, ...]:
        return tuple(self._by_type)

    def codec(self, key_type: int) -> RecordCodec:
        codec = self._by_type.get(key_type)
        if codec is None:
            raise RecordFormatError(f"unknown record type {key_type}")
        return codec

    def decode(self, key: bytes, value: bytes | None) -> Record:
        return self.codec(record_type(key)).decode(key, value)

    def encode(self, key: Any, value: Any) -> tuple[bytes, bytes | None]:
        encoder = self._encoders.get(type(key))
        if encoder is None:
            raise TypeError(f"no codec writes records keyed by {type(key).__name__}")
        return encoder(key, value)

    def encode_all(self, records: list[Record]) -> list[tuple[bytes, bytes | None]]:
        encoders = self._encoders
        try:
            return [encoders[type(key)](key, value) for key, value in records]
        except KeyError as e:
            raise TypeError(f"no codec writes records keyed by {e.args[0].__name__}") from None
