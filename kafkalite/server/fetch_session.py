"""Incremental fetch sessions (KIP-227), as Kafka's FetchSession.scala defines them.

A full fetch (epoch 0) may create a session that caches the partitions and what was last sent
for each; later incremental fetches (epoch n > 0) name only changed partitions, forget others,
and get back only partitions whose data or offsets changed. Epoch -1 closes a session.
"""
from __future__ import annotations

import random
import uuid
from collections import OrderedDict
from dataclasses import dataclass
from typing import Optional

from kafkalite.protocol.errors import ErrorCode

INITIAL_EPOCH = 0
FINAL_EPOCH = -1
INVALID_SESSION_ID = 0

# A partition is keyed by (topic id, topic name, partition); with topic ids (v13+) the name may
# be unknown, without them the id is the zero uuid.
PartitionKey = tuple[uuid.UUID, str, int]


@dataclass
class CachedPartition:
    key: PartitionKey
    fetch_offset: int
    max_bytes: int
    current_leader_epoch: int = -1
    log_start_offset: int = -1
    # what the last response told the client (-1: nothing yet, so the first response includes it)
    high_watermark: int = -1
    last_stable_offset: int = -1   # recorded only: Kafka does not compare it (HW moves with it)
    leader_log_start_offset: int = -1
    # Fetch v12+: the fetcher's last fetched epoch (followers), for the diverging-epoch check
    last_fetched_epoch: int = -1

    def maybe_update_response(self, error: ErrorCode, high_watermark: int, last_stable_offset: int,
                              log_start_offset: int, has_records: bool, *,
                              preferred_read_replica: int = -1, diverging_epoch: bool = False) -> bool:
        """Kafka's CachedPartition.maybeUpdateResponseData: must this partition be in an
        incremental response? Updates the cached values as a side effect."""
        must_respond = has_records
        if self.high_watermark != high_watermark:
            must_respond = True
            self.high_watermark = high_watermark
        if self.leader_log_start_offset != log_start_offset:
            must_respond = True
            self.leader_log_start_offset = log_start_offset
        if preferred_read_replica >= 0 or diverging_epoch:
            must_respond = True
        if error != ErrorCode.NONE:
            # an invalid cached HW makes the partition reappear once the error goes away
            self.high_watermark = -1
            must_respond = True
        self.last_stable_offset = last_stable_offset
        return must_respond


def partition_identity(key: PartitionKey) -> tuple[object, int]:
    """Kafka's CachedPartition equality: by topic id when there is one (the name may be unknown),
    otherwise by topic name."""
    topic_id, name, partition = key
    return (topic_id, partition) if topic_id.int else (name, partition)


@dataclass
class FetchSession:
    session_id: int
    uses_topic_ids: bool
    partitions: "OrderedDict[PartitionKey, CachedPartition]"
    epoch: int = 1
    created_ms: int = 0
    last_used_ms: int = 0
    privileged: bool = False       # created by a follower (replica_id >= 0)
    # Kafka's eviction bookkeeping, refreshed only when the session is touched:
    cached_size: int = -1
    evictable_by_all: bool = False
    evictable_by_privileged: bool = False


@dataclass
class RequestedPartition:
    key: PartitionKey
    fetch_offset: int
    max_bytes: int
    current_leader_epoch: int
    log_start_offset: int
    last_fetched_epoch: int = -1


class FetchSessionError(Exception):
    def __init__(self, code: ErrorCode) -> None:
        super().__init__(code.name)
        self.code = code


@dataclass
class FetchContext:
    """What to fetch for this request and how to shape the response."""
    kind: str                                  # "sessionless" | "full" | "incremental"
    partitions: list[CachedPartition]
    session: Optional[FetchSession] = None
    uses_topic_ids: bool = False


def next_epoch(epoch: int) -> int:
    """Kafka's FetchMetadata.nextEpoch."""
    if epoch < 0:
        return FINAL_EPOCH
    return 1 if epoch == 2**31 - 1 else epoch + 1


class FetchSessionCache:
    """Kafka's FetchSessionCache (one shard) and FetchManager.newContext."""

    def __init__(self, max_entries: int = 1000, eviction_ms: int = 120_000) -> None:
        self.max_entries = max_entries
        self.eviction_ms = eviction_ms
        self._sessions: dict[int, FetchSession] = {}
        self._rng = random.Random()

    def __len__(self) -> int:
        return len(self._sessions)

    def get(self, session_id: int) -> Optional[FetchSession]:
        return self._sessions.get(session_id)

    def remove(self, session_id: int) -> Optional[FetchSession]:
        return self._sessions.pop(session_id, None)

    def _new_session_id(self) -> int:
        while True:
            sid = self._rng.randint(1, 2**31 - 2)  # Java's nextInt(1, Int.MaxValue)
            if sid not in self._sessions:
                return sid

    def touch(self, session: FetchSession, now_ms: int) -> None:
        """Record use; a session becomes evictable by size only once it is older than eviction_ms
        at a touch (Kafka evaluates age here, not at eviction time)."""
        session.last_used_ms = now_ms
        session.cached_size = len(session.partitions)
        old = now_ms - session.created_ms > self.eviction_ms
        session.evictable_by_privileged = (not session.privileged) or old
        session.evictable_by_all = old

    def _try_evict(self, privileged: bool, size: int, now_ms: int) -> bool:
        """Kafka's tryEvict: the least recently used session if idle longer than eviction_ms; else
        the least valuable evictable one, (privileged, size, id) ordered, if the new one is worth more."""
        if not self._sessions:
            return False
        lru = min(self._sessions.values(), key=lambda s: (s.last_used_ms, s.session_id))
        if now_ms - lru.last_used_ms > self.eviction_ms:
            del self._sessions[lru.session_id]
            return True
        candidates = [s for s in self._sessions.values()
                      if (s.evictable_by_privileged if privileged else s.evictable_by_all)]
        if not candidates:
            return False
        victim = min(candidates, key=lambda s: (s.privileged, s.cached_size, s.session_id))
        if (privileged, size, 0) < (victim.privileged, victim.cached_size, victim.session_id):
            return False
        del self._sessions[victim.session_id]
        return True

    def maybe_create(self, partitions: list[CachedPartition], uses_topic_ids: bool, now_ms: int,
                     privileged: bool = False) -> int:
        """Cache a new session if there is room or something can be evicted;
        INVALID_SESSION_ID otherwise."""
        if len(self._sessions) >= self.max_entries and not self._try_evict(privileged, len(partitions), now_ms):
            return INVALID_SESSION_ID
        sid = self._new_session_id()
        session = FetchSession(sid, uses_topic_ids, OrderedDict((p.key, p) for p in partitions),
                               next_epoch(INITIAL_EPOCH), now_ms, now_ms, privileged)
        self._sessions[sid] = session
        self.touch(session, now_ms)
        return sid

    def new_context(self, session_id: int, epoch: int, requested: list[RequestedPartition],
                    forgotten: list[PartitionKey], uses_topic_ids: bool, now_ms: int) -> FetchContext:
        if epoch in (INITIAL_EPOCH, FINAL_EPOCH):
            if session_id != INVALID_SESSION_ID:
                self.remove(session_id)  # a full request closes the session it names
            parts = [CachedPartition(r.key, r.fetch_offset, r.max_bytes, r.current_leader_epoch,
                                     r.log_start_offset, last_fetched_epoch=r.last_fetched_epoch) for r in requested]
            if epoch == FINAL_EPOCH:
                return FetchContext("sessionless", parts, None, uses_topic_ids)
            return FetchContext("full", parts, None, uses_topic_ids)
        session = self._sessions.get(session_id)
        if session is None:
            raise FetchSessionError(ErrorCode.FETCH_SESSION_ID_NOT_FOUND)
        if session.epoch != epoch:
            raise FetchSessionError(ErrorCode.INVALID_FETCH_SESSION_EPOCH)
        if session.uses_topic_ids != uses_topic_ids:
            raise FetchSessionError(ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR)
        self._update(session, requested, forgotten)
        if not session.partitions:
            # nothing left to cache: Kafka drops the session and answers sessionless (id 0)
            self.remove(session.session_id)
            parts = [CachedPartition(r.key, r.fetch_offset, r.max_bytes, r.current_leader_epoch,
                                     r.log_start_offset, last_fetched_epoch=r.last_fetched_epoch) for r in requested]
            return FetchContext("sessionless", parts, None, uses_topic_ids)
        self.touch(session, now_ms)
        session.epoch = next_epoch(session.epoch)
        return FetchContext("incremental", list(session.partitions.values()), session, uses_topic_ids)

    @staticmethod
    def _update(session: FetchSession, requested: list[RequestedPartition],
                forgotten: list[PartitionKey]) -> None:
        """Kafka's FetchSession.update: add or refresh the named partitions, then drop the forgotten."""
        index = {partition_identity(k): k for k in session.partitions}
        for r in requested:
            ident = partition_identity(r.key)
            existing = index.get(ident)
            if existing is None:
                session.partitions[r.key] = CachedPartition(r.key, r.fetch_offset, r.max_bytes,
                                                            r.current_leader_epoch, r.log_start_offset,
                                                            last_fetched_epoch=r.last_fetched_epoch)
                index[ident] = r.key
                continue
            cached = session.partitions[existing]
            cached.fetch_offset = r.fetch_offset
            cached.max_bytes = r.max_bytes
            cached.current_leader_epoch = r.current_leader_epoch
            cached.log_start_offset = r.log_start_offset
            cached.last_fetched_epoch = r.last_fetched_epoch
            if existing != r.key and not existing[1] and r.key[1]:
                # the topic name was unknown when the partition was added; keep its place
                cached.key = r.key
                session.partitions = OrderedDict(
                    (r.key if k == existing else k, v) for k, v in session.partitions.items())
                index[ident] = r.key
        for key in forgotten:
            existing = index.pop(partition_identity(key), None)
            if existing is not None:
                del session.partitions[existing]

    def remove_topic(self, topic_id: uuid.UUID, name: str) -> None:
        """A deleted topic's partitions leave every session."""
        for s in self._sessions.values():
            for key in [k for k in s.partitions if k[1] == name or (topic_id.int and k[0] == topic_id)]:
                del s.partitions[key]
