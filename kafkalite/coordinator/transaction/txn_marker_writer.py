"""Writing COMMIT/ABORT markers to the partitions of a transaction (the local side of Kafka's
WriteTxnMarkers: KafkaApis.handleWriteTxnMarkersRequest).

The coordinator's marker channel calls this directly for the partitions this broker leads
instead of sending itself WriteTxnMarkers; the WriteTxnMarkers handler calls it for markers that
arrive over the wire from another broker's coordinator. Markers for `__consumer_offsets`
partitions also complete the producer's transactional offset commits in the group coordinator.
"""
from __future__ import annotations

import logging
import time
from typing import Any, Optional

from kafkalite.coordinator.group.types import GROUP_METADATA_TOPIC_NAME
from kafkalite.log.producer_state import ORIGIN_COORDINATOR
from kafkalite.log.record_batch import build_end_txn_marker
from kafkalite.protocol.errors import ErrorCode
from kafkalite.replica.partition import TopicPartition

log = logging.getLogger(__name__)

MARKER_REQUIRED_ACKS = -1
DEFAULT_MARKER_TIMEOUT_MS = 30_000      # request.timeout.ms, what Kafka waits for the ISR


async def write_txn_markers(replica_manager: Any, group_coordinator: Optional[Any], producer_id: int,
                            producer_epoch: int, coordinator_epoch: int, commit: bool,
                            partitions: list[TopicPartition], *,
                            timeout_ms: int = DEFAULT_MARKER_TIMEOUT_MS) -> dict[TopicPartition, ErrorCode]:
    """Append one marker per partition (origin coordinator, acks=-1); the error per partition.

    A partition this broker does not host gets UNKNOWN_TOPIC_OR_PARTITION (Kafka: no log, no
    magic). Once the markers are in, `__consumer_offsets` partitions that took theirs are handed
    to ``group_coordinator.handle_txn_completion``."""
    now = time.time_ns() // 1_000_000
    results: dict[TopicPartition, ErrorCode] = {}
    entries: dict[TopicPartition, bytes] = {}
    for tp in dict.fromkeys(partitions):
        if replica_manager.get_partition(tp) is None:
            results[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            continue
        entries[tp] = build_end_txn_marker(producer_id, producer_epoch, coordinator_epoch, commit, now)
    if entries:
        appended = await replica_manager.append_records(timeout_ms, MARKER_REQUIRED_ACKS, entries,
                                                        origin=ORIGIN_COORDINATOR)
        for tp in entries:
            results[tp] = ErrorCode(appended[tp].error)
    offsets_partitions = [tp.partition for tp, e in results.items()
                          if e == ErrorCode.NONE and tp.topic == GROUP_METADATA_TOPIC_NAME]
    if offsets_partitions and group_coordinator is not None:
        try:
            group_coordinator.handle_txn_completion(producer_id, offsets_partitions, commit)
        except Exception:
            # Kafka answers UNKNOWN_SERVER_ERROR for those partitions (the coordinator retries them)
            log.exception("Received an exception while trying to update the offsets cache on transaction "
                          "marker append")
            for p in offsets_partitions:
                results[TopicPartition(GROUP_METADATA_TOPIC_NAME, p)] = ErrorCode.UNKNOWN_SERVER_ERROR
    return {tp: results[tp] for tp in dict.fromkeys(partitions)}
