"""Incremental fetch sessions (KIP-227), as Kafka's FetchSession.scala defines them.

A full fetch (epoch 0) may create a session that caches the partitions and what was last sent
for each; later incremental fetches (epoch n > 0) name only changed partitions, forget others,
and get back only partitions whose data or offsets changed. Epoch -1 closes a session.
"""
from __future__ import annotations

import itertools
import random
import time
import uuid
from collections import OrderedDict
from dataclasses import dataclass, field
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
    last_stable_offset: int = -1
    leader_log_start_offset: int = -1

    def maybe_update_response(self, error: ErrorCode, high_watermark: int, last_stable_offset: int,
                              log_start_offset: int, has_records: bool) -> bool:
        """Kafka's CachedPartition.maybeUpdateResponseData: must this partition be in an
        incremental response? Updates the cached values as a side effect."""
        must_respond = has_records or error != ErrorCode.NONE
        if self.high_watermark != high_watermark:
            must_respond = True
            self.high_watermark = high_watermark
        if self.last_stable_offset != last_stable_offset:
            must_respond = True
            self.last_stable_offset = last_stable_offset
        if self.leader_log_start_offset != log_start_offset:
            must_respond = True
            self.leader_log_start_offset = log_start_offset
        return must_respond


@dataclass
class FetchSession:
    session_id: int
    uses_topic_ids: bool
    partitions: "OrderedDict[PartitionKey, CachedPartition]"
    epoch: int = 1
    created_ms: int = 0
    last_used_ms: int = 0


@dataclass
class RequestedPartition:
    key: PartitionKey
    fetch_offset: int
    max_bytes: int
    current_leader_epoch: int
    log_start_offset: int


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


class FetchSessionCache:
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
            sid = self._rng.randint(1, 2**31 - 1)
            if sid not in self._sessions:
                return sid

    def maybe_create(self, partitions: list[CachedPartition], uses_topic_ids: bool, now_ms: int) -> int:
        """Cache a new session if there is room (evicting the least recently used one that has
        been idle for eviction_ms); INVALID_SESSION_ID otherwise."""
        if not partitions:
            return INVALID_SESSION_ID
        if len(self._sessions) >= self.max_entries:
            victim = min(self._sessions.values(), key=lambda s: s.last_used_ms)
            if now_ms - victim.last_used_ms < self.eviction_ms:
                return INVALID_SESSION_ID
            del self._sessions[victim.session_id]
        sid = self._new_session_id()
        self._sessions[sid] = FetchSession(
            sid, uses_topic_ids, OrderedDict((p.key, p) for p in partitions), 1, now_ms, now_ms)
        return sid

    def new_context(self, session_id: int, epoch: int, requested: list[RequestedPartition],
                    forgotten: list[PartitionKey], uses_topic_ids: bool, now_ms: int) -> FetchContext:
        if epoch in (INITIAL_EPOCH, FINAL_EPOCH):
            if session_id != INVALID_SESSION_ID:
                self.remove(session_id)
            parts = [CachedPartition(r.key, r.fetch_offset, r.max_bytes, r.current_leader_epoch,
                                     r.log_start_offset) for r in requested]
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
        for r in requested:
            cached = session.partitions.get(r.key)
            if cached is None:
                session.partitions[r.key] = CachedPartition(r.key, r.fetch_offset, r.max_bytes,
                                                            r.current_leader_epoch, r.log_start_offset)
            else:
                cached.fetch_offset = r.fetch_offset
                cached.max_bytes = r.max_bytes
                cached.current_leader_epoch = r.current_leader_epoch
                cached.log_start_offset = r.log_start_offset
        for key in forgotten:
            session.partitions.pop(key, None)
        session.epoch = session.epoch + 1 if session.epoch < 2**31 - 1 else 1
        session.last_used_ms = now_ms
        return FetchContext("incremental", list(session.partitions.values()), session, uses_topic_ids)

    def remove_topic(self, topic_id: uuid.UUID, name: str) -> None:
        """A deleted topic's partitions leave every session."""
        for s in self._sessions.values():
            for key in [k for k in s.partitions if k[1] == name or (topic_id.int and k[0] == topic_id)]:
                del s.partitions[key]
