"""Live state of a classic consumer group and its members (Kafka's GroupMetadata / MemberMetadata).

The coordinator owns these objects and mutates them on the event loop; there are no locks because
everything runs on one thread. Transition rules, protocol selection, the consumer-protocol
subscription parser and offset expiration are small pure functions so the state machine can be
tested without a broker.

States (Kafka's GroupState):
  Empty ──join──▶ PreparingRebalance ──all joined / timeout──▶ CompletingRebalance ──leader sync──▶ Stable
  any ──▶ Dead (unloaded, deleted, or expired); Stable/CompletingRebalance ──▶ PreparingRebalance
  (member change); PreparingRebalance ──▶ Empty (nobody rejoined).
"""
from __future__ import annotations

import enum
import struct
import uuid
from collections import Counter
from dataclasses import dataclass
from typing import Callable, Iterable, Optional

from kafkalite.coordinator.group.group_metadata_manager import expired_offsets as storage_expired_offsets
from kafkalite.coordinator.group.types import GroupSnapshot, MemberSnapshot, OffsetAndMetadata
from kafkalite.protocol.errors import ErrorCode

CONSUMER_PROTOCOL_TYPE = "consumer"
UNKNOWN_MEMBER_ID = ""
UNKNOWN_GENERATION_ID = -1
NO_LEADER = ""
NO_PROTOCOL = ""
# Kafka's GroupCoordinator.NewMemberJoinTimeoutMs: a new member parked in JoinGroup cannot
# heartbeat, so its join is timed out after this long instead of its session timeout.
NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000

TopicPartitionKey = tuple[str, int]


class GroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"

    def __str__(self) -> str:
        return self.value


# Kafka's GroupState.validPreviousStates
VALID_PREVIOUS_STATES: dict[GroupState, frozenset[GroupState]] = {
    GroupState.PREPARING_REBALANCE: frozenset({GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY}),
    GroupState.COMPLETING_REBALANCE: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.STABLE: frozenset({GroupState.COMPLETING_REBALANCE}),
    GroupState.DEAD: frozenset(GroupState),
    GroupState.EMPTY: frozenset({GroupState.PREPARING_REBALANCE}),
}


def is_valid_transition(current: GroupState, target: GroupState) -> bool:
    return current in VALID_PREVIOUS_STATES[target]


def parse_state(name: str) -> Optional[GroupState]:
    """A ListGroups state filter entry, case-insensitively (Kafka lower-cases both sides)."""
    for s in GroupState:
        if s.value.lower() == name.lower():
            return s
    return None


# -- results handed to the waiting JoinGroup / SyncGroup requests ---------------------------------

@dataclass(frozen=True)
class JoinGroupMember:
    member_id: str
    group_instance_id: Optional[str]
    metadata: bytes


@dataclass(frozen=True)
class JoinGroupResult:
    member_id: str
    error: ErrorCode
    generation_id: int = UNKNOWN_GENERATION_ID
    protocol_type: Optional[str] = None
    protocol_name: Optional[str] = None
    leader_id: str = NO_LEADER
    skip_assignment: bool = False
    members: tuple[JoinGroupMember, ...] = ()


@dataclass(frozen=True)
class SyncGroupResult:
    error: ErrorCode
    protocol_type: Optional[str] = None
    protocol_name: Optional[str] = None
    assignment: bytes = b""


JoinCallback = Callable[[JoinGroupResult], None]
SyncCallback = Callable[[SyncGroupResult], None]


@dataclass(frozen=True)
class MemberSummary:
    member_id: str
    group_instance_id: Optional[str]
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@dataclass(frozen=True)
class GroupSummary:
    state: str
    protocol_type: str
    protocol: str
    members: tuple[MemberSummary, ...]


@dataclass(frozen=True)
class GroupOverview:
    group_id: str
    protocol_type: str
    state: str
    group_type: str = "classic"


DEAD_GROUP_SUMMARY = GroupSummary(str(GroupState.DEAD), "", NO_PROTOCOL, ())
EMPTY_GROUP_SUMMARY = GroupSummary("", "", NO_PROTOCOL, ())


# -- members -------------------------------------------------------------------------------------

def scala_option(value: Optional[str]) -> str:
    """An optional string as Kafka's log lines print a Scala Option: Some(x) or None."""
    return "None" if value is None else f"Some({value})"


class MemberMetadata:
    """One member: its protocols (in preference order), timeouts, assignment, and the callbacks of
    the JoinGroup / SyncGroup request it has parked, if any."""

    def __init__(self, member_id: str, group_instance_id: Optional[str], client_id: str, client_host: str,
                 rebalance_timeout_ms: int, session_timeout_ms: int, protocol_type: str,
                 supported_protocols: list[tuple[str, bytes]]) -> None:
        self.member_id = member_id
        self.group_instance_id = group_instance_id
        self.client_id = client_id
        self.client_host = client_host
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.session_timeout_ms = session_timeout_ms
        self.protocol_type = protocol_type
        self.supported_protocols = supported_protocols
        self.assignment = b""
        self.awaiting_join_callback: Optional[JoinCallback] = None
        self.awaiting_sync_callback: Optional[SyncCallback] = None
        self.is_new = False
        # Set while a heartbeat (or anything proving liveness) completes the pending DelayedHeartbeat.
        self.heartbeat_satisfied = False

    def __repr__(self) -> str:
        """Kafka's MemberMetadata.toString, which its log lines print."""
        return (f"MemberMetadata(memberId={self.member_id}, groupInstanceId={scala_option(self.group_instance_id)}, "
                f"clientId={self.client_id}, clientHost={self.client_host}, sessionTimeoutMs={self.session_timeout_ms}, "
                f"rebalanceTimeoutMs={self.rebalance_timeout_ms}, "
                f"supportedProtocols=List({', '.join(name for name, _ in self.supported_protocols)}))")

    @property
    def is_static_member(self) -> bool:
        return self.group_instance_id is not None

    @property
    def is_awaiting_join(self) -> bool:
        return self.awaiting_join_callback is not None

    @property
    def is_awaiting_sync(self) -> bool:
        return self.awaiting_sync_callback is not None

    def has_satisfied_heartbeat(self) -> bool:
        if self.is_new:
            # new members can be expired while awaiting join, so this comes first
            return self.heartbeat_satisfied
        if self.is_awaiting_join or self.is_awaiting_sync:
            # a member waiting in a rebalance is alive by definition
            return True
        return self.heartbeat_satisfied

    def metadata(self, protocol: str) -> bytes:
        for name, meta in self.supported_protocols:
            if name == protocol:
                return meta
        raise ValueError(f"member {self.member_id} does not support protocol {protocol}")

    def matches(self, protocols: list[tuple[str, bytes]]) -> bool:
        """Same protocols, same order, same metadata bytes."""
        return len(protocols) == len(self.supported_protocols) and all(
            a[0] == b[0] and bytes(a[1]) == bytes(b[1]) for a, b in zip(protocols, self.supported_protocols))

    def vote(self, candidates: set[str]) -> str:
        """The member's most preferred protocol among the candidates."""
        for name, _ in self.supported_protocols:
            if name in candidates:
                return name
        raise ValueError(f"member {self.member_id} supports none of the candidate protocols")

    def summary(self, protocol: str) -> MemberSummary:
        return MemberSummary(self.member_id, self.group_instance_id, self.client_id, self.client_host,
                             self.metadata(protocol), self.assignment)

    def summary_no_metadata(self) -> MemberSummary:
        return MemberSummary(self.member_id, self.group_instance_id, self.client_id, self.client_host, b"", b"")


def protocol_names(protocols: Iterable[tuple[str, bytes]]) -> set[str]:
    return {name for name, _ in protocols}


def generate_member_id(client_id: str, group_instance_id: Optional[str]) -> str:
    """`<client id or group instance id>-<uuid>`, as Kafka builds member ids."""
    prefix = group_instance_id if group_instance_id is not None else client_id
    return f"{prefix}-{uuid.uuid4()}"


def parse_subscribed_topics(metadata: bytes) -> set[str]:
    """Topics of a ConsumerProtocol subscription, read with the v0 layout every version starts
    with (version int16, topics [string]). Raises ValueError on malformed bytes."""
    buf = bytes(metadata)
    try:
        pos = 2  # the version
        (n,) = struct.unpack_from(">i", buf, pos)
        pos += 4
        if n < 0 or n > len(buf):
            raise ValueError(f"bad topic count {n}")
        topics = set()
        for _ in range(n):
            (ln,) = struct.unpack_from(">h", buf, pos)
            pos += 2
            if ln < 0 or pos + ln > len(buf):
                raise ValueError("bad topic name length")
            topics.add(buf[pos:pos + ln].decode("utf-8"))
            pos += ln
        return topics
    except (struct.error, UnicodeDecodeError) as e:
        raise ValueError(str(e)) from None


def java_string_length(s: str) -> int:
    """String.length(): UTF-16 code units (offset.metadata.max.bytes is checked against it)."""
    return len(s.encode("utf-16-le", errors="surrogatepass")) // 2


# -- the group -----------------------------------------------------------------------------------

@dataclass
class CommitRecord:
    """A committed offset and where its record is in `__consumer_offsets` (Kafka's
    CommitRecordMetadataAndOffset). The log offset orders a transactional commit completed later
    against plain ones; None: not appended yet (a pending transactional commit) or unknown."""
    offset_and_metadata: OffsetAndMetadata
    appended_batch_offset: Optional[int] = None

    def older_than(self, other: "CommitRecord") -> bool:
        """Written before `other`; a record of unknown position counts as older."""
        if self.appended_batch_offset is None or other.appended_batch_offset is None:
            return True
        return self.appended_batch_offset < other.appended_batch_offset


class GroupMetadata:
    def __init__(self, group_id: str, initial_state: GroupState, now_ms: int) -> None:
        self.group_id = group_id
        self.state = initial_state
        self.current_state_timestamp: Optional[int] = now_ms
        self.protocol_type: Optional[str] = None
        self.protocol_name: Optional[str] = None
        self.generation_id = 0
        self.leader_id: Optional[str] = None
        self.members: dict[str, MemberMetadata] = {}
        self.static_members: dict[str, str] = {}  # group.instance.id -> member id
        self.pending_members: set[str] = set()    # ids handed out with MEMBER_ID_REQUIRED
        self.num_members_awaiting_join = 0
        self.supported_protocols: Counter[str] = Counter()
        self.offsets: dict[TopicPartitionKey, CommitRecord] = {}
        self.pending_offset_commits: dict[TopicPartitionKey, OffsetAndMetadata] = {}
        # TxnOffsetCommit offsets waiting for their transaction's COMMIT/ABORT marker, per producer id
        self.pending_transactional_offset_commits: dict[int, dict[TopicPartitionKey, CommitRecord]] = {}
        self.pending_sync_members: set[str] = set()
        # For protocol type "consumer": the union of the members' subscriptions, computed at each
        # new generation and on load; None when unknown (then every topic counts as subscribed).
        self.subscribed_topics: Optional[set[str]] = None
        self.new_member_added = False

    # -- queries ---------------------------------------------------------------------------------
    def is_(self, state: GroupState) -> bool:
        return self.state is state

    def has(self, member_id: str) -> bool:
        return member_id in self.members

    def get(self, member_id: str) -> MemberMetadata:
        return self.members[member_id]

    @property
    def size(self) -> int:
        return len(self.members)

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    @property
    def leader_or_empty(self) -> str:
        return self.leader_id if self.leader_id is not None else NO_LEADER

    @property
    def is_consumer_group(self) -> bool:
        return self.protocol_type == CONSUMER_PROTOCOL_TYPE

    @property
    def num_awaiting(self) -> int:
        return self.num_members_awaiting_join

    @property
    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def can_rebalance(self) -> bool:
        return is_valid_transition(self.state, GroupState.PREPARING_REBALANCE)

    def has_all_members_joined(self) -> bool:
        return len(self.members) == self.num_members_awaiting_join and not self.pending_members

    def not_yet_rejoined_members(self) -> list[MemberMetadata]:
        return [m for m in self.members.values() if not m.is_awaiting_join]

    def is_pending_member(self, member_id: str) -> bool:
        return member_id in self.pending_members

    def current_static_member_id(self, group_instance_id: Optional[str]) -> Optional[str]:
        return None if group_instance_id is None else self.static_members.get(group_instance_id)

    def has_received_sync_from_all_members(self) -> bool:
        return not self.pending_sync_members

    # -- membership ------------------------------------------------------------------------------
    def add(self, member: MemberMetadata, callback: Optional[JoinCallback] = None) -> None:
        if member.group_instance_id is not None:
            if member.group_instance_id in self.static_members:
                raise RuntimeError(f"static member {member.group_instance_id} is already in group {self.group_id}")
            self.static_members[member.group_instance_id] = member.member_id
        if not self.members:
            self.protocol_type = member.protocol_type
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        self.supported_protocols.update(protocol_names(member.supported_protocols))
        member.awaiting_join_callback = callback
        if member.is_awaiting_join:
            self.num_members_awaiting_join += 1
        self.pending_members.discard(member.member_id)

    def remove(self, member_id: str) -> None:
        member = self.members.pop(member_id, None)
        if member is not None:
            self.supported_protocols.subtract(protocol_names(member.supported_protocols))
            if member.is_awaiting_join:
                self.num_members_awaiting_join -= 1
            if member.group_instance_id is not None:
                self.static_members.pop(member.group_instance_id, None)
        if self.is_leader(member_id):
            self.leader_id = next(iter(self.members), None)
        self.pending_members.discard(member_id)
        self.pending_sync_members.discard(member_id)

    def add_pending_member(self, member_id: str) -> None:
        if member_id in self.members:
            raise RuntimeError(f"pending member {member_id} is already a member of {self.group_id}")
        self.pending_members.add(member_id)

    def add_pending_sync_member(self, member_id: str) -> None:
        if member_id not in self.members:
            raise RuntimeError(f"pending sync for unknown member {member_id}")
        self.pending_sync_members.add(member_id)

    def remove_pending_sync_member(self, member_id: str) -> None:
        self.pending_sync_members.discard(member_id)

    def maybe_elect_new_joined_leader(self) -> bool:
        """Keep the leader if it rejoined, else elect any member that did. False if the group has
        no leader or nobody rejoined."""
        if self.leader_id is None:
            return False
        leader = self.members.get(self.leader_id)
        if leader is not None and leader.is_awaiting_join:
            return True
        for member_id, member in self.members.items():
            if member.is_awaiting_join:
                self.leader_id = member_id
                return True
        return False

    def replace_static_member(self, group_instance_id: str, old_member_id: str, new_member_id: str) -> MemberMetadata:
        """A static member rejoined with an unknown member id: same member, new id. A request of
        the old id still parked is fenced."""
        member = self.members.pop(old_member_id, None)
        if member is None:
            raise RuntimeError(f"cannot replace non-existing member {old_member_id}")
        self.maybe_invoke_join_callback(member, JoinGroupResult(old_member_id, ErrorCode.FENCED_INSTANCE_ID))
        self.maybe_invoke_sync_callback(member, SyncGroupResult(ErrorCode.FENCED_INSTANCE_ID))
        member.member_id = new_member_id
        self.members[new_member_id] = member
        if self.is_leader(old_member_id):
            self.leader_id = new_member_id
        self.static_members[group_instance_id] = new_member_id
        return member

    def update_member(self, member: MemberMetadata, protocols: list[tuple[str, bytes]], rebalance_timeout_ms: int,
                      session_timeout_ms: int, callback: Optional[JoinCallback]) -> None:
        self.supported_protocols.subtract(protocol_names(member.supported_protocols))
        member.supported_protocols = protocols
        self.supported_protocols.update(protocol_names(protocols))
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms
        if callback is not None and not member.is_awaiting_join:
            self.num_members_awaiting_join += 1
        elif callback is None and member.is_awaiting_join:
            self.num_members_awaiting_join -= 1
        member.awaiting_join_callback = callback

    def maybe_invoke_join_callback(self, member: MemberMetadata, result: JoinGroupResult) -> None:
        callback = member.awaiting_join_callback
        if callback is not None:
            member.awaiting_join_callback = None
            self.num_members_awaiting_join -= 1
            callback(result)

    def maybe_invoke_sync_callback(self, member: MemberMetadata, result: SyncGroupResult) -> bool:
        callback = member.awaiting_sync_callback
        if callback is None:
            return False
        member.awaiting_sync_callback = None
        callback(result)
        return True

    # -- protocols -------------------------------------------------------------------------------
    def candidate_protocols(self) -> set[str]:
        n = len(self.members)
        return {p for p, count in self.supported_protocols.items() if count == n}

    def supports_protocols(self, member_protocol_type: str, member_protocols: set[str]) -> bool:
        if self.is_(GroupState.EMPTY):
            return bool(member_protocol_type) and bool(member_protocols)
        n = len(self.members)
        return (self.protocol_type == member_protocol_type
                and any(self.supported_protocols.get(p, 0) == n for p in member_protocols))

    def select_protocol(self) -> str:
        if not self.members:
            raise RuntimeError("cannot select a protocol for an empty group")
        candidates = self.candidate_protocols()
        votes = Counter(m.vote(candidates) for m in self.members.values())
        return votes.most_common(1)[0][0]

    def is_subscribed_to_topic(self, topic: str) -> bool:
        return True if self.subscribed_topics is None else topic in self.subscribed_topics

    def compute_subscribed_topics(self) -> Optional[set[str]]:
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE:
            return None
        if not self.members:
            return set()
        if self.protocol_name is None:
            return None
        try:
            topics: set[str] = set()
            for m in self.members.values():
                topics |= parse_subscribed_topics(m.metadata(self.protocol_name))
            return topics
        except ValueError:
            return None  # unparsable: the coordinator does not know the subscription

    # -- state -----------------------------------------------------------------------------------
    def transition_to(self, target: GroupState, now_ms: int) -> None:
        if not is_valid_transition(self.state, target):
            raise RuntimeError(f"group {self.group_id} should be in one of "
                               f"{sorted(s.value for s in VALID_PREVIOUS_STATES[target])} before moving to "
                               f"{target}; it is {self.state}")
        self.state = target
        self.current_state_timestamp = now_ms

    def init_next_generation(self, now_ms: int) -> None:
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.subscribed_topics = self.compute_subscribed_topics()
            self.transition_to(GroupState.COMPLETING_REBALANCE, now_ms)
        else:
            self.protocol_name = None
            self.subscribed_topics = self.compute_subscribed_topics()
            self.transition_to(GroupState.EMPTY, now_ms)
        self.pending_sync_members.clear()

    def current_member_metadata(self) -> tuple[JoinGroupMember, ...]:
        if self.is_(GroupState.DEAD) or self.is_(GroupState.PREPARING_REBALANCE):
            raise RuntimeError(f"cannot get member metadata of a group in state {self.state}")
        assert self.protocol_name is not None
        return tuple(JoinGroupMember(m.member_id, m.group_instance_id, m.metadata(self.protocol_name))
                     for m in self.members.values())

    def summary(self) -> GroupSummary:
        if self.is_(GroupState.STABLE):
            assert self.protocol_name is not None
            return GroupSummary(str(self.state), self.protocol_type or "", self.protocol_name,
                                tuple(m.summary(self.protocol_name) for m in self.members.values()))
        return GroupSummary(str(self.state), self.protocol_type or "", NO_PROTOCOL,
                            tuple(m.summary_no_metadata() for m in self.members.values()))

    def overview(self) -> GroupOverview:
        return GroupOverview(self.group_id, self.protocol_type or "", str(self.state))

    def snapshot(self, assignment: dict[str, bytes]) -> GroupSnapshot:
        """What GroupMetadataValue stores, with `assignment` (not yet set on the members when the
        leader's SyncGroup is persisted)."""
        members = tuple(
            MemberSnapshot(member_id=m.member_id, group_instance_id=m.group_instance_id, client_id=m.client_id,
                           client_host=m.client_host, rebalance_timeout_ms=m.rebalance_timeout_ms,
                           session_timeout_ms=m.session_timeout_ms,
                           subscription=m.metadata(self.protocol_name) if self.protocol_name is not None else b"",
                           assignment=assignment.get(m.member_id, b""))
            for m in self.members.values())
        return GroupSnapshot(group_id=self.group_id, protocol_type=self.protocol_type or "",
                             generation=self.generation_id, protocol_name=self.protocol_name,
                             leader=self.leader_id,
                             current_state_timestamp=(self.current_state_timestamp
                                                      if self.current_state_timestamp is not None else -1),
                             members=members)

    # -- offsets ---------------------------------------------------------------------------------
    def offset(self, tp: TopicPartitionKey) -> Optional[OffsetAndMetadata]:
        rec = self.offsets.get(tp)
        return None if rec is None else rec.offset_and_metadata

    def all_offsets(self) -> dict[TopicPartitionKey, OffsetAndMetadata]:
        return {tp: r.offset_and_metadata for tp, r in self.offsets.items()}

    def has_offsets(self) -> bool:
        return bool(self.offsets) or bool(self.pending_offset_commits) or \
            bool(self.pending_transactional_offset_commits)

    def has_pending_offset_commits_for(self, tp: TopicPartitionKey) -> bool:
        """A plain commit in flight or a transactional one not completed (OffsetFetch with
        require_stable answers UNSTABLE_OFFSET_COMMIT for it)."""
        return tp in self.pending_offset_commits or \
            any(tp in txn for txn in self.pending_transactional_offset_commits.values())

    def has_pending_offset_commits_from_producer(self, producer_id: int) -> bool:
        return producer_id in self.pending_transactional_offset_commits

    @property
    def active_producers(self) -> set[int]:
        return set(self.pending_transactional_offset_commits)

    def prepare_offset_commit(self, offsets: dict[TopicPartitionKey, OffsetAndMetadata]) -> None:
        self.pending_offset_commits.update(offsets)

    def on_offset_commit_append(self, tp: TopicPartitionKey, om: OffsetAndMetadata,
                                appended_batch_offset: Optional[int] = None) -> None:
        # Only materialise a commit still pending: a concurrent OffsetDelete/DeleteGroups removed it.
        if tp in self.pending_offset_commits:
            record = CommitRecord(om, appended_batch_offset)
            current = self.offsets.get(tp)
            # a transactional commit completed meanwhile but written later stays
            if current is None or current.older_than(record):
                self.offsets[tp] = record
        if self.pending_offset_commits.get(tp) == om:
            del self.pending_offset_commits[tp]

    # -- transactional offsets (Kafka's prepareTxnOffsetCommit / onTxnOffsetCommitAppend /
    #    failPendingTxnOffsetCommit / completePendingTxnOffsetCommit) -------------------------------
    def prepare_txn_offset_commit(self, producer_id: int, offsets: dict[TopicPartitionKey, OffsetAndMetadata]) -> None:
        pending = self.pending_transactional_offset_commits.setdefault(producer_id, {})
        for tp, om in offsets.items():
            pending[tp] = CommitRecord(om)

    def on_txn_offset_commit_append(self, producer_id: int, tp: TopicPartitionKey, record: CommitRecord) -> None:
        pending = self.pending_transactional_offset_commits.get(producer_id)
        # the same commit still pending (not replaced by a later one, not removed by a deletion)
        if pending is not None and tp in pending and \
                pending[tp].offset_and_metadata == record.offset_and_metadata:
            pending[tp] = record

    def fail_pending_txn_offset_commit(self, producer_id: int, tp: TopicPartitionKey) -> None:
        pending = self.pending_transactional_offset_commits.get(producer_id)
        if pending is None:
            return
        pending.pop(tp, None)
        if not pending:
            del self.pending_transactional_offset_commits[producer_id]

    def complete_pending_txn_offset_commit(self, producer_id: int, is_commit: bool) -> list[TopicPartitionKey]:
        """The producer's transaction ended (its marker is in the log): a COMMIT materialises its
        offsets unless a plain commit written after them exists; an ABORT drops them. Returns
        the partitions whose committed offset changed."""
        pending = self.pending_transactional_offset_commits.pop(producer_id, None)
        if not is_commit or not pending:
            return []
        changed: list[TopicPartitionKey] = []
        for tp, record in pending.items():
            if record.appended_batch_offset is None:
                # its append never completed: there is nothing in the log to commit
                continue
            current = self.offsets.get(tp)
            if current is None or current.older_than(record):
                self.offsets[tp] = record
                changed.append(tp)
        return changed

    def fail_pending_offset_write(self, tp: TopicPartitionKey, om: OffsetAndMetadata) -> None:
        if self.pending_offset_commits.get(tp) == om:
            del self.pending_offset_commits[tp]

    def remove_offsets(self, tps: Iterable[TopicPartitionKey]) -> dict[TopicPartitionKey, OffsetAndMetadata]:
        removed: dict[TopicPartitionKey, OffsetAndMetadata] = {}
        for tp in tps:
            self.pending_offset_commits.pop(tp, None)
            for txn in self.pending_transactional_offset_commits.values():
                txn.pop(tp, None)
            rec = self.offsets.pop(tp, None)
            if rec is not None:
                removed[tp] = rec.offset_and_metadata
        return removed

    def remove_all_offsets(self) -> dict[TopicPartitionKey, OffsetAndMetadata]:
        return self.remove_offsets(list(self.offsets))

    def remove_all_offsets_and_pending_txn_offsets(self) -> dict[TopicPartitionKey, OffsetAndMetadata]:
        """DeleteGroups: every committed offset and every transactional one still pending (as
        Kafka 4's deleteAllOffsets: the pending ones get tombstones too when nothing is committed
        for their partition, so a later COMMIT marker cannot bring them back on a reload)."""
        pending_only: dict[TopicPartitionKey, OffsetAndMetadata] = {}
        for txn in self.pending_transactional_offset_commits.values():
            for tp, record in txn.items():
                if tp not in self.offsets:
                    pending_only[tp] = record.offset_and_metadata
        removed = self.remove_all_offsets()
        self.pending_transactional_offset_commits.clear()
        return {**pending_only, **removed}

    def pending_txn_partitions(self) -> frozenset[TopicPartitionKey]:
        return frozenset(tp for txn in self.pending_transactional_offset_commits.values() for tp in txn)

    def remove_expired_offsets(self, now_ms: int, retention_ms: int) -> dict[TopicPartitionKey, OffsetAndMetadata]:
        expired = expired_offsets(self, now_ms, retention_ms)
        for tp in expired:
            del self.offsets[tp]
        return expired

    def __repr__(self) -> str:
        return (f"GroupMetadata(group_id={self.group_id!r}, generation={self.generation_id}, "
                f"protocol_type={self.protocol_type!r}, state={self.state}, members={list(self.members.values())})")


def expired_offsets(group: GroupMetadata, now_ms: int, retention_ms: int) -> dict[TopicPartitionKey, OffsetAndMetadata]:
    """Kafka's GroupMetadata.removeExpiredOffsets, without the removal: the storage layer's rule
    (`offsets.retention.minutes`, KIP-211) applied to the live group.

    Empty group with a protocol type: retention counts from when it became empty; Stable
    consumer group that knows its subscription: offsets of topics nobody subscribes to expire
    after their commit; no protocol type (offsets-only "simple" consumers): after each commit;
    otherwise nothing. Offsets with a commit in flight, or a transactional commit waiting for its
    transaction's end, never expire (as Kafka 4's hasPendingTransactionalOffsets check).
    """
    ts = group.current_state_timestamp
    return storage_expired_offsets(
        group.all_offsets(), now_ms, retention_ms, protocol_type=group.protocol_type,
        group_empty=group.is_(GroupState.EMPTY), group_stable=group.is_(GroupState.STABLE),
        current_state_timestamp=ts if ts is not None else -1,
        subscribed=group.subscribed_topics,
        pending=frozenset(group.pending_offset_commits) | group.pending_txn_partitions())


def group_from_snapshot(snapshot: GroupSnapshot, offsets: dict[TopicPartitionKey, OffsetAndMetadata],
                        now_ms: int, record_offsets: Optional[dict[TopicPartitionKey, int]] = None) -> GroupMetadata:
    """A loaded group (Kafka's GroupMetadata.loadGroup): Stable if it has members, else Empty."""
    state = GroupState.STABLE if snapshot.members else GroupState.EMPTY
    group = GroupMetadata(snapshot.group_id, state, now_ms)
    group.generation_id = snapshot.generation
    group.protocol_type = snapshot.protocol_type or None
    group.protocol_name = snapshot.protocol_name
    group.leader_id = snapshot.leader
    group.current_state_timestamp = snapshot.current_state_timestamp if snapshot.current_state_timestamp >= 0 else None
    for ms in snapshot.members:
        protocols = [(snapshot.protocol_name or "", bytes(ms.subscription))]
        member = MemberMetadata(ms.member_id, ms.group_instance_id, ms.client_id, ms.client_host,
                                ms.rebalance_timeout_ms, ms.session_timeout_ms, snapshot.protocol_type, protocols)
        member.assignment = bytes(ms.assignment)
        group.add(member)
    # a member added first became leader in add(); the stored leader is the truth
    group.leader_id = snapshot.leader
    group.subscribed_topics = group.compute_subscribed_topics()
    ro = record_offsets or {}
    group.offsets = {tp: CommitRecord(om, ro.get(tp)) for tp, om in offsets.items()}
    return group


def offsets_only_group(group_id: str, offsets: dict[TopicPartitionKey, OffsetAndMetadata], now_ms: int,
                       record_offsets: Optional[dict[TopicPartitionKey, int]] = None) -> GroupMetadata:
    """A group that has committed offsets but no group metadata record (simple consumers)."""
    group = GroupMetadata(group_id, GroupState.EMPTY, now_ms)
    ro = record_offsets or {}
    group.offsets = {tp: CommitRecord(om, ro.get(tp)) for tp, om in offsets.items()}
    return group
