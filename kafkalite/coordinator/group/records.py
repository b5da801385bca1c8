"""Keys and values of the `__consumer_offsets` records, byte for byte as Kafka writes them.

A key is an int16 *record type* followed by the key struct (never flexible)::

    type 0 or 1 -> OffsetCommitKey   group: string, topic: string, partition: int32
    type 2      -> GroupMetadataKey  group: string

(type 0 is the pre-0.9 offset key; the same layout.) Other types belong to the newer group
protocols (KIP-848 consumer groups, share and streams groups); they are reported as
:class:`UnknownRecordTypeError` so a loader can skip them, as Kafka's loader does.

A value is an int16 *version* followed by the value struct at that version, with compact
encodings and tagged-field buffers from the first flexible version (4) on. A null value is a
tombstone. Kafka writes OffsetCommitValue v3 (v1 when the commit carries an expire timestamp)
and GroupMetadataValue v3: the highest non-flexible versions, so that older brokers and tools
can still read them (KIP-915). Every version 0-4 is read.

The structs are encoded by kafka-python's JSON-driven codec from the message specs in
``schemas/``, the way kafka-python builds ConsumerProtocolSubscription: no hand-written layouts.
"""
from __future__ import annotations

import io
import struct
from dataclasses import dataclass
from typing import Any, Optional, Union

from kafka.protocol.api_data import ApiData

from kafkalite.coordinator.group.types import GroupSnapshot, MemberSnapshot, OffsetAndMetadata

_SCHEMAS = "kafkalite.coordinator.group.schemas"


# The class name selects the spec file (``schemas/<name>.json``).
class OffsetCommitKey(ApiData, load_json=_SCHEMAS):
    pass


class GroupMetadataKey(ApiData, load_json=_SCHEMAS):
    pass


class OffsetCommitValue(ApiData, load_json=_SCHEMAS):
    pass


class GroupMetadataValue(ApiData, load_json=_SCHEMAS):
    pass


_INT16 = struct.Struct(">h")

# Record types (the int16 in front of a key).
LEGACY_OFFSET_COMMIT_KEY_TYPE = 0
OFFSET_COMMIT_KEY_TYPE = 1
GROUP_METADATA_KEY_TYPE = 2

# Value versions Kafka writes.
OFFSET_COMMIT_VALUE_VERSION = 3
OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRE_TIMESTAMP = 1
GROUP_METADATA_VALUE_VERSION = 3

MAX_VALUE_VERSION = 4       # the highest version of both value specs this broker reads


class RecordDecodeError(ValueError):
    """Bytes that are not a valid `__consumer_offsets` key or value."""


class UnknownRecordTypeError(RecordDecodeError):
    """A key whose record type is neither an offset commit nor classic group metadata."""

    def __init__(self, record_type: int) -> None:
        super().__init__(f"Unknown record type {record_type}")
        self.record_type = record_type


@dataclass(frozen=True, slots=True)
class OffsetKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class GroupKey:
    group: str


# -- partitioning ------------------------------------------------------------------------------

def java_string_hash(s: str) -> int:
    """Java's String.hashCode: h = 31*h + c over the UTF-16 code units, in int32 arithmetic."""
    data = s.encode("utf-16-be", "surrogatepass")
    h = 0
    for (unit,) in struct.iter_unpack(">H", data):
        h = (31 * h + unit) & 0xFFFFFFFF
    return h - 0x1_0000_0000 if h & 0x8000_0000 else h


def java_abs(n: int) -> int:
    """Kafka's Utils.abs: Math.abs, except that Integer.MIN_VALUE (whose abs overflows) is 0."""
    return 0 if n == -0x8000_0000 else abs(n)


def partition_for(group_id: str, num_partitions: int) -> int:
    """The `__consumer_offsets` partition of a group: Utils.abs(groupId.hashCode) % count."""
    if num_partitions <= 0:
        raise ValueError(f"num_partitions must be positive, got {num_partitions}")
    return java_abs(java_string_hash(group_id)) % num_partitions


# -- encoding ----------------------------------------------------------------------------------

def _encode(cls: type[ApiData], version: int, **fields: Any) -> bytes:
    try:
        return cls(**fields).encode(version=version, header=False)
    except struct.error as e:   # a string or array longer than its int16/int32 length prefix
        raise ValueError(f"cannot encode {cls.name} v{version}: {e}") from e


def _require_str(name: str, value: object) -> str:
    # kafka-python writes None as a null string; Kafka's non-nullable fields must not be null.
    if not isinstance(value, str):
        raise ValueError(f"{name} must be a string, got {value!r}")
    return value


def offset_commit_key(group: str, topic: str, partition: int) -> bytes:
    return _INT16.pack(OFFSET_COMMIT_KEY_TYPE) + _encode(
        OffsetCommitKey, 0, group=_require_str("group", group), topic=_require_str("topic", topic),
        partition=partition)


def group_metadata_key(group: str) -> bytes:
    return _INT16.pack(GROUP_METADATA_KEY_TYPE) + _encode(
        GroupMetadataKey, 0, group=_require_str("group", group))


def offset_commit_value_version(offset: OffsetAndMetadata) -> int:
    """v1 is the only version holding an expire timestamp; otherwise Kafka writes v3."""
    if offset.expire_timestamp != -1:
        return OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRE_TIMESTAMP
    return OFFSET_COMMIT_VALUE_VERSION


def offset_commit_value(offset: OffsetAndMetadata, version: Optional[int] = None) -> bytes:
    """The value Kafka writes for a commit (``version`` forces another one, for tests/tools).
    Fields a version lacks are dropped, as Kafka's ignorable fields are."""
    v = offset_commit_value_version(offset) if version is None else version
    if not 0 <= v <= MAX_VALUE_VERSION:
        raise ValueError(f"OffsetCommitValue version {v} is not supported")
    return _INT16.pack(v) + _encode(
        OffsetCommitValue, v, offset=offset.offset, leader_epoch=offset.leader_epoch,
        metadata=_require_str("metadata", offset.metadata),
        commit_timestamp=offset.commit_timestamp, expire_timestamp=offset.expire_timestamp)


def group_metadata_value(group: GroupSnapshot, version: int = GROUP_METADATA_VALUE_VERSION) -> bytes:
    if not 0 <= version <= MAX_VALUE_VERSION:
        raise ValueError(f"GroupMetadataValue version {version} is not supported")
    member_cls = GroupMetadataValue.MemberMetadata
    members = [
        member_cls(member_id=_require_str("member_id", m.member_id),
                   group_instance_id=m.group_instance_id,
                   client_id=_require_str("client_id", m.client_id),
                   client_host=_require_str("client_host", m.client_host),
                   rebalance_timeout=m.rebalance_timeout_ms,
                   session_timeout=m.session_timeout_ms,
                   subscription=bytes(m.subscription), assignment=bytes(m.assignment))
        for m in group.members]
    return _INT16.pack(version) + _encode(
        GroupMetadataValue, version,
        protocol_type=_require_str("protocol_type", group.protocol_type),
        generation=group.generation, protocol=group.protocol_name, leader=group.leader,
        current_state_timestamp=group.current_state_timestamp, members=members)


# -- decoding ----------------------------------------------------------------------------------

def _read_int16(data: bytes, what: str) -> tuple[int, bytes]:
    if len(data) < 2:
        raise RecordDecodeError(f"Could not read version from {what}'s buffer")
    return _INT16.unpack_from(data)[0], data[2:]


def _decode(cls: type[ApiData], body: bytes, version: int) -> Any:
    try:
        return cls.decode(io.BytesIO(body), version=version, header=False)
    except (struct.error, UnicodeDecodeError, ValueError, TypeError, IndexError, OverflowError) as e:
        raise RecordDecodeError(f"Could not read {cls.name} v{version}: {e}") from e


def _non_null(cls: type[ApiData], name: str, value: Any) -> Any:
    if value is None:
        raise RecordDecodeError(f"non-nullable field {name} of {cls.name} was null")
    return value


def decode_key(data: bytes) -> Union[OffsetKey, GroupKey]:
    """Decode a key; raises UnknownRecordTypeError for record types other than 0, 1 and 2."""
    record_type, body = _read_int16(bytes(data), "key")
    if record_type in (LEGACY_OFFSET_COMMIT_KEY_TYPE, OFFSET_COMMIT_KEY_TYPE):
        k = _decode(OffsetCommitKey, body, 0)
        return OffsetKey(_non_null(OffsetCommitKey, "group", k.group),
                         _non_null(OffsetCommitKey, "topic", k.topic), k.partition)
    if record_type == GROUP_METADATA_KEY_TYPE:
        k = _decode(GroupMetadataKey, body, 0)
        return GroupKey(_non_null(GroupMetadataKey, "group", k.group))
    raise UnknownRecordTypeError(record_type)


def _value_version(data: bytes, cls: type[ApiData]) -> tuple[int, bytes]:
    version, body = _read_int16(data, "value")
    if not 0 <= version <= MAX_VALUE_VERSION:
        # Kafka's generated readers refuse versions they do not know.
        raise RecordDecodeError(f"Could not read {cls.name}: unsupported version {version}")
    return version, body


def decode_offset_value(data: Optional[bytes]) -> Optional[OffsetAndMetadata]:
    """A committed offset, or None for a tombstone."""
    if data is None:
        return None
    version, body = _value_version(bytes(data), OffsetCommitValue)
    v = _decode(OffsetCommitValue, body, version)
    return OffsetAndMetadata(
        offset=v.offset,
        leader_epoch=v.leader_epoch if version >= 3 else -1,
        metadata=_non_null(OffsetCommitValue, "metadata", v.metadata),
        commit_timestamp=v.commit_timestamp,
        expire_timestamp=v.expire_timestamp if version == 1 else -1)


def decode_group_value(group_id: str, data: Optional[bytes]) -> Optional[GroupSnapshot]:
    """A group's metadata, or None for a tombstone."""
    if data is None:
        return None
    version, body = _value_version(bytes(data), GroupMetadataValue)
    v = _decode(GroupMetadataValue, body, version)
    cls = GroupMetadataValue
    members = []
    for m in _non_null(cls, "members", v.members):
        session_timeout = m.session_timeout
        # v0 has no rebalance timeout: Kafka uses the session timeout in its place.
        rebalance_timeout = m.rebalance_timeout if version >= 1 and m.rebalance_timeout != -1 \
            else session_timeout
        members.append(MemberSnapshot(
            member_id=_non_null(cls, "memberId", m.member_id),
            group_instance_id=m.group_instance_id if version >= 3 else None,
            client_id=_non_null(cls, "clientId", m.client_id),
            client_host=_non_null(cls, "clientHost", m.client_host),
            rebalance_timeout_ms=rebalance_timeout,
            session_timeout_ms=session_timeout,
            subscription=bytes(_non_null(cls, "subscription", m.subscription)),
            assignment=bytes(_non_null(cls, "assignment", m.assignment))))
    return GroupSnapshot(
        group_id=group_id,
        protocol_type=_non_null(cls, "protocolType", v.protocol_type),
        generation=v.generation,
        protocol_name=v.protocol,
        leader=v.leader,
        current_state_timestamp=v.current_state_timestamp if version >= 2 else -1,
        members=tuple(members))
