"""Shared value types of the group coordinator and its storage (the `__consumer_offsets` topic).

The coordinator (group_coordinator.py, group_metadata.py) keeps live state; the storage layer
(group_metadata_manager.py, records.py) turns these snapshots into Kafka's record layouts and
back. Both sides use only these types to talk to each other.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

GROUP_METADATA_TOPIC_NAME = "__consumer_offsets"


@dataclass(frozen=True, slots=True)
class OffsetAndMetadata:
    """A committed offset (Kafka's OffsetAndMetadata / OffsetCommitValue)."""
    offset: int
    leader_epoch: int = -1            # -1: unknown (OffsetCommitValue v3+)
    metadata: str = ""
    commit_timestamp: int = -1
    expire_timestamp: int = -1        # only OffsetCommitValue v1 carries it; -1: none


@dataclass(frozen=True, slots=True)
class MemberSnapshot:
    member_id: str
    group_instance_id: Optional[str]
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes               # the protocol metadata of the group's chosen protocol
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupSnapshot:
    """What GroupMetadataValue stores: the group as of its last completed rebalance."""
    group_id: str
    protocol_type: str                # "" for a group only used for offsets (simple consumers)
    generation: int
    protocol_name: Optional[str]
    leader: Optional[str]
    current_state_timestamp: int      # ms; -1 unknown
    members: tuple[MemberSnapshot, ...] = ()

    @property
    def is_empty(self) -> bool:
        return not self.members


@dataclass
class LoadedPartition:
    """Everything one `__consumer_offsets` partition holds, after replaying its log (latest record
    per key wins; tombstones remove)."""
    groups: dict[str, GroupSnapshot] = field(default_factory=dict)
    offsets: dict[str, dict[tuple[str, int], OffsetAndMetadata]] = field(default_factory=dict)
    # Transactional offset commits (TxnOffsetCommit) whose transaction had no COMMIT/ABORT marker
    # yet at the end of the log: producer id -> group -> (topic, partition) -> offset.
    pending_transactional_offsets: dict[int, dict[str, dict[tuple[str, int], OffsetAndMetadata]]] = \
        field(default_factory=dict)
    # The log offsets of the records behind `offsets` and `pending_transactional_offsets` (same
    # shapes): a transactional commit completed later replaces a plain one only if written after
    # it (Kafka's CommitRecordMetadataAndOffset.olderThan).
    offset_record_offsets: dict[str, dict[tuple[str, int], int]] = field(default_factory=dict)
    pending_transactional_record_offsets: dict[int, dict[str, dict[tuple[str, int], int]]] = \
        field(default_factory=dict)
