"""Producer ids come from blocks reserved in the metadata store, so an id is never handed out
twice, not even across restarts (Kafka's ProducerIdManager)."""
from __future__ import annotations

from kafkalite.controller.metadata_store import MetadataStore

PRODUCER_ID_BLOCK_SIZE = 1000


class ProducerIdManager:
    def __init__(self, broker_id: int, store: MetadataStore, block_size: int = PRODUCER_ID_BLOCK_SIZE) -> None:
        self.broker_id = broker_id
        self.store = store
        self.block_size = block_size
        self._next = 0
        self._end = 0

    def generate_producer_id(self) -> int:
        if self._next >= self._end:
            start = self.store.allocate_producer_id_block(self.broker_id, self.block_size)
            self._next, self._end = start, start + self.block_size
        pid = self._next
        self._next += 1
        return pid
