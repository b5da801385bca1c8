"""DelayedFetch: a fetch waits for `min_bytes` of new data up to `max_wait_ms`, and completes as
soon as an append (or an error) makes it satisfiable — never by polling."""
from __future__ import annotations

import asyncio
from typing import Callable

from kafkalite.purgatory import DelayedOperation
from kafkalite.replica.partition import TopicPartition
from kafkalite.replica.results import FetchPartitionRequest, FetchPartitionResult


class DelayedFetch(DelayedOperation):
    def __init__(self, delay_ms: int, min_bytes: int,
                 fetch_infos: list[tuple[TopicPartition, FetchPartitionRequest]],
                 available_bytes: Callable[[TopicPartition, FetchPartitionRequest], int | None],
                 read: Callable[[], list[tuple[TopicPartition, FetchPartitionResult]]],
                 future: asyncio.Future[list[tuple[TopicPartition, FetchPartitionResult]]]) -> None:
        super().__init__(delay_ms)
        self.min_bytes = min_bytes
        self.fetch_infos = fetch_infos
        self.available_bytes = available_bytes   # None: the partition can answer now (error, moved)
        self.read = read
        self.future = future

    def try_complete(self) -> bool:
        accumulated = 0
        for tp, info in self.fetch_infos:
            n = self.available_bytes(tp, info)
            if n is None:
                return self.force_complete()
            accumulated += n
        if accumulated >= self.min_bytes:
            return self.force_complete()
        return False

    def on_expiration(self) -> None:
        pass

    def on_complete(self) -> None:
        # Like Kafka, re-read the logs on completion so the answer reflects the newest data.
        if self.future.done():
            return
        try:
            self.future.set_result(self.read())
        except Exception as e:  # surfaced to the handler, which closes nothing but logs
            self.future.set_exception(e)
