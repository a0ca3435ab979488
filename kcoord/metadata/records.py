"""``__cluster_metadata`` records: Kafka's metadata record schemas, framed as KRaft frames them.

A value is what Kafka's MetadataRecordSerde writes: unsigned varints frame version (1), the
record's api key and its version, then the record (flexible v0): UserScramCredentialRecord (11),
RemoveUserScramCredentialRecord (22), AccessControlEntryRecord (18),
RemoveAccessControlEntryRecord (19).

KRaft's log is never compacted (snapshots bound it); kcoord's coordinator logs are, so each record
has a key naming what it is about, and the cleaner keeps only the latest record of a key:

- ``int16 11, int8 mechanism, int16-length user``: a user's credential for one mechanism; the
  value is its UserScramCredentialRecord, or the RemoveUserScramCredentialRecord that deleted it.
- ``int16 18, 16-byte uuid``: one ACL by its id; the value is its AccessControlEntryRecord, or
  the RemoveAccessControlEntryRecord that deleted it.

A removal supersedes the credential (salt and keys included) or the ACL, so compaction leaves
only the small removal record behind.
"""

from __future__ import annotations

import dataclasses
import struct
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kafka.protocol.schemas.fields.codecs import EncodeBufferPool

from kcoord.protocol.fields import RecordFormatError
from kcoord.protocol.record_schemas import read_record, schema_class
from kcoord.runtime.outcome import Record
from kcoord.runtime.records import Encoder

FRAME_VERSION = 1  # MetadataRecordSerde's DEFAULT_FRAME_VERSION
SCRAM_KEY_TYPE = 11  # UserScramCredentialRecord's api key
ACL_KEY_TYPE = 18  # AccessControlEntryRecord's api key
USER_SCRAM_CREDENTIAL = 11
REMOVE_USER_SCRAM_CREDENTIAL = 22
ACCESS_CONTROL_ENTRY = 18
REMOVE_ACCESS_CONTROL_ENTRY = 19

_H = struct.Struct(">h")
_HB = struct.Struct(">hb")


@dataclass(frozen=True, slots=True)
class ScramCredentialKey:
    name: str
    mechanism: int  # Kafka's ScramMechanism type: 1 SCRAM-SHA-256, 2 SCRAM-SHA-512


@dataclass(frozen=True, slots=True)
class UserScramCredentialRecord:
    name: str
    mechanism: int
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def __repr__(self) -> str:  # never the keys in a log line or a test failure
        return f"UserScramCredentialRecord({self.name!r}, {self.mechanism}, iterations={self.iterations})"


@dataclass(frozen=True, slots=True)
class RemoveUserScramCredentialRecord:
    name: str
    mechanism: int


@dataclass(frozen=True, slots=True)
class AclKey:
    id: uuid.UUID


@dataclass(frozen=True, slots=True)
class AccessControlEntryRecord:
    id: uuid.UUID
    resource_type: int
    resource_name: str
    pattern_type: int
    principal: str
    host: str
    operation: int
    permission_type: int


@dataclass(frozen=True, slots=True)
class RemoveAccessControlEntryRecord:
    id: uuid.UUID


MetadataValue = (
    UserScramCredentialRecord
    | RemoveUserScramCredentialRecord
    | AccessControlEntryRecord
    | RemoveAccessControlEntryRecord
)


def _codec(name: str) -> tuple[Any, Any]:
    cls = schema_class(name)
    return (
        cls._struct.compiled_encode_into(0, compact=True, tagged=True),
        cls._struct.compiled_decode_from(0, compact=True, tagged=True, data_class=cls),
    )


# api key -> (record class, encoder, decoder), all at version 0, the only one Kafka has.
_SCHEMAS: dict[int, tuple[type, Any, Any]] = {
    USER_SCRAM_CREDENTIAL: (UserScramCredentialRecord, *_codec("UserScramCredentialRecord")),
    REMOVE_USER_SCRAM_CREDENTIAL: (
        RemoveUserScramCredentialRecord,
        *_codec("RemoveUserScramCredentialRecord"),
    ),
    ACCESS_CONTROL_ENTRY: (AccessControlEntryRecord, *_codec("AccessControlEntryRecord")),
    REMOVE_ACCESS_CONTROL_ENTRY: (RemoveAccessControlEntryRecord, *_codec("RemoveAccessControlEntryRecord")),
}
_API_KEY = {cls: key for key, (cls, _e, _d) in _SCHEMAS.items()}
_FIELDS = {cls: tuple(f.name for f in dataclasses.fields(cls)) for cls, _e, _d in _SCHEMAS.values()}


def encode_value(value: MetadataValue) -> bytes:
    api_key = _API_KEY[type(value)]
    encode = _SCHEMAS[api_key][1]
    with EncodeBufferPool.acquire() as out:
        # Frame version 1, the api key (< 128) and version 0, each a one-byte unsigned varint.
        out.buf[0:3] = bytes((FRAME_VERSION, api_key, 0))
        out.pos = 3
        encode(value, out)
        return bytes(out.buf[: out.pos])


def _uvarint(buf: bytes, pos: int, what: str) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(buf):
            raise RecordFormatError(f"metadata record ends inside its {what}")
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            break
        shift += 7
        if shift > 28:
            raise RecordFormatError(f"metadata record's {what} is too large")
    if value > 0x7FFF:
        raise RecordFormatError(f"metadata record's {what} {value} is too large")
    return value, pos


def decode_value(value: bytes) -> MetadataValue:
    frame, pos = _uvarint(value, 0, "frame version")
    if frame != FRAME_VERSION:
        raise RecordFormatError(f"unknown metadata record frame version {frame}")
    api_key, pos = _uvarint(value, pos, "type")
    version, pos = _uvarint(value, pos, "version")
    schema = _SCHEMAS.get(api_key)
    if schema is None:
        raise RecordFormatError(f"unknown metadata record type {api_key}")
    if version != 0:
        raise RecordFormatError(f"unknown version {version} of metadata record type {api_key}")
    cls, _encode, decode = schema
    d = read_record(decode, value, pos)
    fields = {name: getattr(d, name) for name in _FIELDS[cls]}
    for name in ("salt", "stored_key", "server_key"):
        if name in fields:
            fields[name] = bytes(fields[name] or b"")
    if any(v is None for v in fields.values()):
        raise RecordFormatError(f"metadata record type {api_key} with a null field")
    return cls(**fields)  # type: ignore[no-any-return]


def _encode_scram(key: ScramCredentialKey, value: MetadataValue | None) -> tuple[bytes, bytes | None]:
    name = key.name.encode()
    key_bytes = _HB.pack(SCRAM_KEY_TYPE, key.mechanism) + _H.pack(len(name)) + name
    return key_bytes, None if value is None else encode_value(value)


def _encode_acl(key: AclKey, value: MetadataValue | None) -> tuple[bytes, bytes | None]:
    return _H.pack(ACL_KEY_TYPE) + key.id.bytes, None if value is None else encode_value(value)


def decode_record(key: bytes, value: bytes | None) -> Record:
    if len(key) < 2:
        raise RecordFormatError("a record key holds at least its int16 type")
    (key_type,) = _H.unpack_from(key)
    k: ScramCredentialKey | AclKey
    if key_type == SCRAM_KEY_TYPE:
        if len(key) < 5:
            raise RecordFormatError("a SCRAM credential key is type, mechanism and user")
        _t, mechanism = _HB.unpack_from(key)
        (length,) = _H.unpack_from(key, 3)
        if len(key) != 5 + length:
            raise RecordFormatError("a SCRAM credential key's user name does not fill the key")
        try:
            k = ScramCredentialKey(key[5:].decode(), mechanism)
        except UnicodeDecodeError as e:
            raise RecordFormatError(f"a SCRAM credential key's user name: {e}") from e
        kinds: tuple[type, ...] = (UserScramCredentialRecord, RemoveUserScramCredentialRecord)
    elif key_type == ACL_KEY_TYPE:
        if len(key) != 18:
            raise RecordFormatError("an ACL key is its type and a 16-byte id")
        k = AclKey(uuid.UUID(bytes=key[2:]))
        kinds = (AccessControlEntryRecord, RemoveAccessControlEntryRecord)
    else:
        raise RecordFormatError(f"unknown record type {key_type}")
    if value is None:
        return k, None
    v = decode_value(value)
    if not isinstance(v, kinds):
        raise RecordFormatError(f"a {type(v).__name__} under a {type(k).__name__}")
    return k, v


class MetadataRecords:
    """The record codec of ``__cluster_metadata`` for the runtime's registry."""

    key_types: tuple[int, ...] = (SCRAM_KEY_TYPE, ACL_KEY_TYPE)

    @property
    def encoders(self) -> Mapping[type, Encoder]:
        return {ScramCredentialKey: _encode_scram, AclKey: _encode_acl}

    @staticmethod
    def decode(key: bytes, value: bytes | None) -> Record:
        return decode_record(key, value)


METADATA_RECORDS = MetadataRecords()
