"""Producer ids come from blocks reserved in the metadata store (/latest_producer_id_block), so an
id is never handed out twice, not across brokers nor across restarts (Kafka's ProducerIdManager)."""
from __future__ import annotations

import asyncio
import logging
from typing import Awaitable, Callable, Optional

from kafkalite.protocol.errors import ErrorCode, KafkaApiError

log = logging.getLogger(__name__)


class ProducerIdManager:
    """Blocks claimed from /latest_producer_id_block with a conditional write, so no two brokers
    ever hand out the same id. The next block is
    fetched in the background once 90% of the current one is used (as Kafka's
    RPCProducerIdManager prefetches); an id asked for while no block is ready is refused with
    COORDINATOR_LOAD_IN_PROGRESS, which clients retry."""

    PREFETCH_FRACTION = 0.9

    def __init__(self, broker_id: int, allocate_block: Callable[[int], Awaitable[tuple[int, int]]]) -> None:
        self.broker_id = broker_id
        self._allocate_block = allocate_block   # broker id -> (first id, block size)
        self._next = 0
        self._end = 0
        self._block_start = 0
        self._next_block: Optional[tuple[int, int]] = None
        self._fetching: Optional[asyncio.Task[None]] = None

    async def ensure_block(self) -> None:
        """Claim the first block on the first InitProducerId (as Kafka 3.9 does: no block is
        claimed at start-up), waiting for it rather than failing the first request; later blocks
        are prefetched."""
        if self._next < self._end or self._next_block is not None:
            return
        self._prefetch()
        fetching = self._fetching
        if fetching is not None:
            await asyncio.shield(fetching)

    def _prefetch(self) -> None:
        if self._fetching is None and self._next_block is None:
            async def fetch() -> None:
                try:
                    self._next_block = await self._allocate_block(self.broker_id)
                except Exception:
                    log.exception("could not allocate a producer id block")
                finally:
                    self._fetching = None
            self._fetching = asyncio.get_running_loop().create_task(fetch())

    def generate_producer_id(self) -> int:
        if self._next >= self._end:
            if self._next_block is None:
                self._prefetch()
                raise KafkaApiError(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
                                    "Producer ID block is full. Waiting for next block")
            start, size = self._next_block
            self._next_block = None
            self._next, self._end, self._block_start = start, start + size, start
        pid = self._next
        self._next += 1
        if self._next - self._block_start >= self.PREFETCH_FRACTION * (self._end - self._block_start):
            self._prefetch()
        return pid

    async def shutdown(self) -> None:
        if self._fetching is not None:
            self._fetching.cancel()
            try:
                await self._fetching
            except asyncio.CancelledError:
                pass
