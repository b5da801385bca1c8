"""Asking another broker's transaction coordinator about a transaction (Kafka's
AddPartitionsToTxnManager, KIP-890): AddPartitionsToTxn v5 (the highest version both sides
speak; v4+ are the brokers' versions) with verify_only=true to check that partitions are in the
producer's ongoing transaction before its first batch is appended, or verify_only=false to add
them (the ADD_PARTITION operation of transaction version 2 clients, Produce v12+).

As Kafka's manager: the transactions for one coordinator broker are batched into one request,
with one request in flight per broker (the ones arriving meanwhile leave together next); at most
one entry per transactional id waits in a batch: a newer one at a higher epoch fences the
waiting one (INVALID_PRODUCER_EPOCH), one at the same epoch replaces it (the waiting one gets
NETWORK_EXCEPTION: its client is most likely retrying), one at a lower epoch is answered
INVALID_PRODUCER_EPOCH at once. A failed request (disconnected, timed out) answers every
partition NETWORK_EXCEPTION; a top-level error answers it for every partition
(CLUSTER_AUTHORIZATION_FAILED as INVALID_TXN_STATE, which clients understand).

Answers are the coordinator's per-partition errors, unverified partitions only and untranslated:
TransactionVerifier maps them for the client's request version, as it does the local
coordinator's.
"""
from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Any, Callable, Optional

from kafka.protocol.producer.transaction import AddPartitionsToTxnRequest

from kafkalite.cluster.metadata_cache import NO_LEADER
from kafkalite.cluster.topic_validation import TRANSACTION_STATE_TOPIC_NAME
from kafkalite.network.inter_broker_connections import InterBrokerConnections
from kafkalite.protocol.errors import ErrorCode
from kafkalite.replica.partition import TopicPartition

log = logging.getLogger(__name__)

ADD_PARTITIONS_TO_TXN_VERSION = 5

Errors = dict[TopicPartition, ErrorCode]


@dataclass
class _PendingTransaction:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    partitions: list[TopicPartition]
    verify_only: bool
    future: "asyncio.Future[Errors]"

    def all(self, error: ErrorCode) -> Errors:
        return {tp: error for tp in self.partitions}


class _Node:
    def __init__(self) -> None:
        self.pending: dict[str, _PendingTransaction] = {}
        self.ready = asyncio.Event()
        self.task: Optional[asyncio.Task[None]] = None


def build_request(batch: list[_PendingTransaction]) -> Any:
    Txn = AddPartitionsToTxnRequest.AddPartitionsToTxnTransaction
    Topic = AddPartitionsToTxnRequest.AddPartitionsToTxnTopic
    txns = []
    for t in batch:
        by_topic: dict[str, list[int]] = {}
        for tp in t.partitions:
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        txns.append(Txn(transactional_id=t.transactional_id, producer_id=t.producer_id,
                        producer_epoch=t.producer_epoch, verify_only=t.verify_only,
                        topics=[Topic(name=n, partitions=ps) for n, ps in by_topic.items()]))
    return AddPartitionsToTxnRequest[ADD_PARTITIONS_TO_TXN_VERSION](transactions=txns)


def unverified_by_transaction(response: Any) -> dict[str, Errors]:
    """The partitions each transaction of the answer did not verify (or add), with the error."""
    out: dict[str, Errors] = {}
    for result in response.results_by_transaction or ():
        errors = out.setdefault(result.transactional_id, {})
        for topic in result.topic_results or ():
            for p in topic.results_by_partition or ():
                if p.partition_error_code != ErrorCode.NONE:
                    try:
                        code = ErrorCode(p.partition_error_code)
                    except ValueError:
                        code = ErrorCode.UNKNOWN_SERVER_ERROR
                    errors[TopicPartition(topic.name, p.partition_index)] = code
    return out


class AddPartitionsToTxnManager:
    def __init__(self, broker_id: int, metadata_cache: Any, listener_name: str, request_timeout_ms: int,
                 partition_for: Callable[[str], int]) -> None:
        self.broker_id = broker_id
        self.cache = metadata_cache
        self.partition_for = partition_for
        self.connections = InterBrokerConnections(metadata_cache, listener_name,
                                                  f"broker-{broker_id}-add-partitions-to-txn", request_timeout_ms)
        self._nodes: dict[int, _Node] = {}
        self._running = True

    async def shutdown(self) -> None:
        self._running = False
        tasks = [n.task for n in self._nodes.values() if n.task is not None]
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for n in self._nodes.values():
            for t in n.pending.values():
                if not t.future.done():
                    t.future.set_result(t.all(ErrorCode.NETWORK_EXCEPTION))
        self._nodes.clear()
        await self.connections.close()

    def coordinator_of(self, transactional_id: str) -> Optional[int]:
        """The live broker leading the id's `__transaction_state` partition (reachable on the
        inter-broker listener); None: COORDINATOR_NOT_AVAILABLE."""
        topic = self.cache.topic(TRANSACTION_STATE_TOPIC_NAME)
        info = topic.partitions.get(self.partition_for(transactional_id)) if topic is not None else None
        if info is None or info.leader == NO_LEADER:
            return None
        if info.leader != self.broker_id and self.cache.alive_endpoint(info.leader, self.connections.listener_name) is None:
            return None
        return info.leader

    async def verify_transaction(self, coordinator_id: int, transactional_id: str, producer_id: int,
                                 producer_epoch: int, partitions: list[TopicPartition], verify_only: bool = True
                                 ) -> Errors:
        """Ask broker `coordinator_id`; the partitions it did not verify (or add), with its error."""
        loop = asyncio.get_running_loop()
        txn = _PendingTransaction(transactional_id, producer_id, producer_epoch, list(dict.fromkeys(partitions)),
                                  verify_only, loop.create_future())
        if not self._running:
            return txn.all(ErrorCode.NETWORK_EXCEPTION)
        node = self._nodes.get(coordinator_id)
        if node is None:
            node = self._nodes[coordinator_id] = _Node()
        waiting = node.pending.get(transactional_id)
        if waiting is not None:
            if waiting.producer_epoch > producer_epoch:
                return txn.all(ErrorCode.INVALID_PRODUCER_EPOCH)
            waiting.future.set_result(waiting.all(ErrorCode.INVALID_PRODUCER_EPOCH
                                                  if waiting.producer_epoch < producer_epoch
                                                  else ErrorCode.NETWORK_EXCEPTION))
        node.pending[transactional_id] = txn
        if node.task is None or node.task.done():
            node.task = loop.create_task(self._send_loop(coordinator_id, node),
                                         name=f"add-partitions-to-txn-sender-{coordinator_id}")
        node.ready.set()
        return await txn.future

    async def _send_loop(self, coordinator_id: int, node: _Node) -> None:
        while True:
            await node.ready.wait()
            node.ready.clear()
            batch = [t for t in node.pending.values() if not t.future.done()]
            node.pending = {}
            if not batch:
                continue
            answers = await self._send(coordinator_id, batch)
            for t in batch:
                if not t.future.done():
                    t.future.set_result(answers(t))

    async def _send(self, coordinator_id: int, batch: list[_PendingTransaction]
                    ) -> Callable[[_PendingTransaction], Errors]:
        conn = self.connections.connection(coordinator_id)
        if conn is None:
            return lambda t: t.all(ErrorCode.NETWORK_EXCEPTION)
        try:
            response = await conn.send(build_request(batch), ADD_PARTITIONS_TO_TXN_VERSION)
        except (ConnectionError, OSError, asyncio.TimeoutError) as e:
            log.warning("AddPartitionsToTxnRequest failed for node %d with a network exception: %s", coordinator_id, e)
            return lambda t: t.all(ErrorCode.NETWORK_EXCEPTION)
        if response.error_code != ErrorCode.NONE:
            log.error("AddPartitionsToTxnRequest for node %d returned with error %s", coordinator_id,
                      response.error_code)
            # clients must not see CLUSTER_AUTHORIZATION_FAILED: the verification did not complete
            top = ErrorCode.INVALID_TXN_STATE if response.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED \
                else ErrorCode(response.error_code)
            return lambda t: t.all(top)
        unverified = unverified_by_transaction(response)
        # a transaction the answer leaves out was not checked: retriable
        return lambda t: unverified.get(t.transactional_id, t.all(ErrorCode.NETWORK_EXCEPTION))
