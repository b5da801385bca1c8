"""ControllerChannelManager and ControllerBrokerRequestBatch: how the controller talks to brokers.

One request queue and one sender task per live broker, the controller's own broker included. Other
brokers are reached over the network, as in Kafka; the own broker is reached over loopback, or,
when the broker hands the channel its request handler (`own_broker_handler`), through a direct call
with the request object: the same handler, given what decoding the encoded request would give (a
unit test compares the two), without encoding and decoding a 10,000-partition request in the
process that built it. A sender
sends its queue's requests one at a time and retries a request whose connection failed until it
is answered or the broker is removed (it died, or this broker stopped being the controller).

A batch collects, during one controller event, the LeaderAndIsr, UpdateMetadata and StopReplica
changes per broker, and `send_requests_to_brokers` turns them into at most one request of each
kind per broker, in Kafka's order (LeaderAndIsr, then UpdateMetadata, then StopReplica).
"""
from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Iterable, Optional

from kafka.protocol.api_message import ApiMessage

from kafkalite.cluster.metadata_cache import BrokerInfo
from kafkalite.controller.controller_context import ControllerContext, ReplicaAssignment
from kafkalite.controller.states import LeaderIsrAndControllerEpoch
from kafkalite.network.broker_client import BrokerConnection
from kafkalite.protocol.inter_broker import LeaderAndIsrRequest, StopReplicaRequest, UpdateMetadataRequest, row_type
from kafkalite.cluster.topic_partition import TopicPartition
from kafkalite.slices import Steps, run_at_once, run_in_slices
from kafkalite.tasks import cancel_and_wait

log = logging.getLogger(__name__)

# the versions Kafka 3.9 (inter.broker.protocol.version 3.9) uses between brokers
LEADER_AND_ISR_VERSION = 7
UPDATE_METADATA_VERSION = 8
STOP_REPLICA_VERSION = 4

LEADER_DURING_DELETE = -2        # LeaderAndIsr.LeaderDuringDelete: the topic is being deleted
EPOCH_DURING_DELETE = -2         # LeaderAndIsr.EpochDuringDelete, StopReplica's deletion epoch
NO_EPOCH = -1

# a failover sends every partition: its entries are built as rows (see row_type)
_LeaderAndIsrPartitionRow = row_type(
    LeaderAndIsrRequest[LEADER_AND_ISR_VERSION].LeaderAndIsrTopicState.LeaderAndIsrPartitionState,
    LEADER_AND_ISR_VERSION)
_UpdateMetadataPartitionRow = row_type(
    UpdateMetadataRequest[UPDATE_METADATA_VERSION].UpdateMetadataTopicState.UpdateMetadataPartitionState,
    UPDATE_METADATA_VERSION)

ResponseCallback = Callable[[int, ApiMessage], None]
# The own broker's request handler: (request, api version) -> the response object
OwnBrokerHandler = Callable[[ApiMessage, int], Awaitable[Any]]
# A StopReplica response, with the partitions that request asked the broker to delete.
StopReplicaCallback = Callable[[int, ApiMessage, frozenset[TopicPartition]], None]


@dataclass
class _QueuedRequest:
    request: ApiMessage
    api_version: int
    callback: Optional[ResponseCallback]


class _BrokerSender:
    """Kafka's RequestSendThread: one broker's queue, drained by one task."""

    def __init__(self, controller_id: int, broker: BrokerInfo, listener_name: str,
                 request_timeout_ms: int, retry_backoff_ms: int,
                 address: Optional[tuple[str, int]] = None,
                 handler: Optional[OwnBrokerHandler] = None) -> None:
        self.broker = broker
        self.handler = handler
        if address is None:
            ep = broker.endpoint(listener_name) or broker.endpoints[0]
            address = (ep.host, ep.port)
        self.connection = BrokerConnection(address[0], address[1], client_id=f"controller-{controller_id}",
                                           request_timeout_ms=request_timeout_ms)
        self.queue: asyncio.Queue[_QueuedRequest] = asyncio.Queue()
        self.retry_backoff_ms = retry_backoff_ms
        self.task = asyncio.get_running_loop().create_task(
            self._run(), name=f"controller-sender-{controller_id}-to-{broker.broker_id}")

    async def _run(self) -> None:
        while True:
            item = await self.queue.get()
            while True:
                try:
                    if self.handler is not None:
                        response = await self.handler(item.request, item.api_version)
                    else:
                        response = await self.connection.send(item.request, item.api_version)
                    break
                except asyncio.CancelledError:
                    raise
                except Exception as e:     # connection refused/reset, timeout: retry until removed
                    log.warning("Controller failed to send %s to broker %d: %s; retrying in %d ms",
                                type(item.request).__name__, self.broker.broker_id, e, self.retry_backoff_ms)
                    await asyncio.sleep(self.retry_backoff_ms / 1000)
            if item.callback is not None:
                try:
                    item.callback(self.broker.broker_id, response)
                except Exception:
                    log.exception("controller response callback failed")

    async def close(self) -> None:
        await cancel_and_wait(self.task)
        await self.connection.close()


class ControllerChannelManager:
    def __init__(self, controller_id: int, listener_name: str, request_timeout_ms: int,
                 retry_backoff_ms: int = 100, own_address: Optional[tuple[str, int]] = None,
                 own_broker_handler: Optional[OwnBrokerHandler] = None) -> None:
        self.controller_id = controller_id
        self.own_address = own_address
        self.own_broker_handler = own_broker_handler
        self.listener_name = listener_name
        self.request_timeout_ms = request_timeout_ms
        self.retry_backoff_ms = retry_backoff_ms
        self._senders: dict[int, _BrokerSender] = {}

    def add_broker(self, broker: BrokerInfo) -> None:
        if broker.broker_id not in self._senders:
            is_own = broker.broker_id == self.controller_id
            self._senders[broker.broker_id] = _BrokerSender(
                self.controller_id, broker, self.listener_name, self.request_timeout_ms, self.retry_backoff_ms,
                self.own_address if is_own else None, self.own_broker_handler if is_own else None)

    async def remove_broker(self, broker_id: int) -> None:
        sender = self._senders.pop(broker_id, None)
        if sender is not None:
            await sender.close()

    def send(self, broker_id: int, request: ApiMessage, api_version: int,
             callback: Optional[ResponseCallback] = None) -> None:
        sender = self._senders.get(broker_id)
        if sender is None:
            log.warning("Not sending %s to broker %d, which is not alive", type(request).__name__, broker_id)
            return
        sender.queue.put_nowait(_QueuedRequest(request, api_version, callback))

    async def shutdown(self) -> None:
        for b in list(self._senders):
            await self.remove_broker(b)


@dataclass
class _StopReplicaState:
    leader_epoch: int
    delete: bool


@dataclass
class ControllerBrokerRequestBatch:
    """The requests one controller event wants sent (Kafka's AbstractControllerBrokerRequestBatch)."""
    controller_id: int
    context: ControllerContext
    channel: ControllerChannelManager
    inter_broker_listener: str
    on_stop_replica_response: Optional[StopReplicaCallback] = None
    on_leader_and_isr_response: Optional[ResponseCallback] = None
    leader_and_isr: dict[int, dict[TopicPartition, tuple[LeaderIsrAndControllerEpoch, ReplicaAssignment, bool]]] = \
        field(default_factory=dict)
    stop_replica: dict[int, dict[TopicPartition, _StopReplicaState]] = field(default_factory=dict)
    update_metadata_brokers: set[int] = field(default_factory=set)
    update_metadata_partitions: set[TopicPartition] = field(default_factory=set)
    update_metadata_all_partitions: bool = False

    def new_batch(self) -> None:
        if self.leader_and_isr or self.stop_replica or self.update_metadata_brokers:
            raise RuntimeError("controller to broker state change requests batch is not empty while creating "
                               "a new one")

    def clear(self) -> None:
        self.leader_and_isr.clear()
        self.stop_replica.clear()
        self.update_metadata_brokers.clear()
        self.update_metadata_partitions.clear()
        self.update_metadata_all_partitions = False

    def add_leader_and_isr_request_for_brokers(self, broker_ids: list[int], tp: TopicPartition,
                                               leadership: LeaderIsrAndControllerEpoch,
                                               assignment: ReplicaAssignment, is_new: bool) -> None:
        for b in broker_ids:
            if b < 0:
                continue
            per = self.leader_and_isr.setdefault(b, {})
            old = per.get(tp)
            per[tp] = (leadership, assignment, is_new or (old is not None and old[2]))
        # the live or shutting-down brokers straight from the epochs' keys (no set, no sort): a
        # failover calls this once per partition
        self.add_update_metadata_request_for_brokers(self.context.live_broker_epochs, (tp,))

    def add_stop_replica_request_for_brokers(self, broker_ids: list[int], tp: TopicPartition, delete: bool) -> None:
        if self.context.is_topic_queued_for_deletion(tp.topic):
            epoch = EPOCH_DURING_DELETE
        else:
            leadership = self.context.leadership(tp)
            epoch = leadership.leader_and_isr.leader_epoch if leadership is not None else NO_EPOCH
        for b in broker_ids:
            if b < 0:
                continue
            per = self.stop_replica.setdefault(b, {})
            old = per.get(tp)
            per[tp] = _StopReplicaState(epoch, delete or (old is not None and old.delete))

    def add_update_metadata_request_for_brokers(self, broker_ids: Iterable[int],
                                                partitions: Optional[Iterable[TopicPartition]] = None) -> None:
        """`partitions` None means every partition the controller knows (a full update)."""
        self.update_metadata_brokers.update(b for b in broker_ids if b >= 0)
        if partitions is None:
            self.update_metadata_all_partitions = True
        else:
            self.update_metadata_partitions.update(partitions)

    # -- building and sending -----------------------------------------------------------------
    def send_requests_to_brokers(self, controller_epoch: int) -> None:
        try:
            run_at_once(self._send_steps(controller_epoch))
        finally:
            self.clear()

    async def send_requests_to_brokers_in_slices(self, controller_epoch: int) -> None:
        """The same requests, built in slices of the event loop: the rows of a 1,000-partition
        LeaderAndIsr and UpdateMetadata take milliseconds to build. Only the controller's event
        task uses a batch, so nothing changes it between slices."""
        try:
            await run_in_slices(self._send_steps(controller_epoch))
        finally:
            self.clear()

    def _send_steps(self, controller_epoch: int) -> Steps[None]:
        # a step per partition row (see slices); the requests leave in Kafka's order
        yield from self._send_leader_and_isr(controller_epoch)
        yield from self._send_update_metadata(controller_epoch)
        yield from self._send_stop_replica(controller_epoch)

    def _broker_epoch(self, broker_id: int) -> int:
        return self.context.live_broker_epochs.get(broker_id, -1)

    def _send_leader_and_isr(self, controller_epoch: int) -> Steps[None]:
        Req = LeaderAndIsrRequest[LEADER_AND_ISR_VERSION]
        T = Req.LeaderAndIsrTopicState
        P = _LeaderAndIsrPartitionRow
        L = Req.LeaderAndIsrLiveLeader
        for broker_id, states in self.leader_and_isr.items():
            if broker_id not in self.context.live_broker_epochs:
                continue
            by_topic: dict[str, list] = {}
            leaders: set[int] = set()
            for tp in sorted(states):      # TopicPartition orders by (topic, partition)
                leadership, assignment, is_new = states[tp]
                lai = leadership.leader_and_isr
                leaders.add(lai.leader)
                partitions = by_topic.get(tp.topic)
                if partitions is None:
                    partitions = by_topic[tp.topic] = []
                partitions.append(P(tp.partition, leadership.controller_epoch, lai.leader, lai.leader_epoch,
                                    lai.isr, lai.partition_epoch, assignment.replicas,
                                    assignment.adding_replicas, assignment.removing_replicas, is_new,
                                    lai.leader_recovery_state))
                yield None
            live_leaders = []
            for b in sorted(leaders):
                info = self.context.live_brokers.get(b)
                ep = info.endpoint(self.inter_broker_listener) if info is not None else None
                if ep is not None:
                    live_leaders.append(L(broker_id=b, host_name=ep.host, port=ep.port))
            topics = [T(topic_name=t, topic_id=self.context.topic_ids[t], partition_states=ps)
                      for t, ps in by_topic.items() if t in self.context.topic_ids]
            request = Req(controller_id=self.controller_id, is_k_raft_controller=False,
                          controller_epoch=controller_epoch, broker_epoch=self._broker_epoch(broker_id),
                          request_type=0, topic_states=topics, live_leaders=live_leaders)
            self.channel.send(broker_id, request, LEADER_AND_ISR_VERSION, self.on_leader_and_isr_response)

    def _update_metadata_partition_states(self, Req: type) -> Steps[list]:
        T = Req.UpdateMetadataTopicState
        P = _UpdateMetadataPartitionRow
        ctx = self.context
        partitions = ctx.all_partitions() if self.update_metadata_all_partitions \
            else sorted(self.update_metadata_partitions)     # by (topic, partition)
        by_topic: dict[str, list] = {}
        leaderships = ctx.partition_leadership
        for tp in partitions:
            leadership = leaderships.get(tp)
            if leadership is None:
                continue
            lai = leadership.leader_and_isr
            replicas = ctx.partition_replica_assignment(tp)
            offline = [r for r in replicas if not ctx.is_replica_online(r, tp)]
            leader = LEADER_DURING_DELETE if ctx.is_topic_queued_for_deletion(tp.topic) else lai.leader
            ps = by_topic.get(tp.topic)
            if ps is None:
                ps = by_topic[tp.topic] = []
            ps.append(P(tp.partition, leadership.controller_epoch, leader, lai.leader_epoch, lai.isr,
                        lai.partition_epoch, replicas, offline))
            yield None
        return [T(topic_name=t, topic_id=ctx.topic_ids.get(t), partition_states=ps) for t, ps in by_topic.items()
                if t in ctx.topic_ids]

    def _live_brokers(self, Req: type) -> list:
        B = Req.UpdateMetadataBroker
        E = B.UpdateMetadataEndpoint
        out = []
        for b in sorted(self.context.live_brokers):
            info = self.context.live_brokers[b]
            out.append(B(id=b, endpoints=[E(port=ep.port, host=ep.host, listener=ep.listener_name,
                                            security_protocol=ep.security_protocol)
                                          for ep in info.endpoints], rack=info.rack))
        return out

    def _send_update_metadata(self, controller_epoch: int) -> Steps[None]:
        if not self.update_metadata_brokers:
            return
        Req = UpdateMetadataRequest[UPDATE_METADATA_VERSION]
        topic_states = yield from self._update_metadata_partition_states(Req)
        live_brokers = self._live_brokers(Req)
        for broker_id in sorted(self.update_metadata_brokers):
            if broker_id not in self.context.live_broker_epochs:
                continue
            request = Req(controller_id=self.controller_id, is_k_raft_controller=False, request_type=0,
                          controller_epoch=controller_epoch, broker_epoch=self._broker_epoch(broker_id),
                          topic_states=topic_states, live_brokers=live_brokers)
            self.channel.send(broker_id, request, UPDATE_METADATA_VERSION)

    def _send_stop_replica(self, controller_epoch: int) -> Steps[None]:
        Req = StopReplicaRequest[STOP_REPLICA_VERSION]
        T = Req.StopReplicaTopicState
        P = T.StopReplicaPartitionState
        for broker_id, states in self.stop_replica.items():
            if broker_id not in self.context.live_broker_epochs:
                continue
            by_topic: dict[str, list] = {}
            for tp, st in sorted(states.items(), key=lambda kv: (kv[0].topic, kv[0].partition)):
                by_topic.setdefault(tp.topic, []).append(
                    P(partition_index=tp.partition, leader_epoch=st.leader_epoch, delete_partition=st.delete))
                yield None
            request = Req(controller_id=self.controller_id, is_k_raft_controller=False,
                          controller_epoch=controller_epoch, broker_epoch=self._broker_epoch(broker_id),
                          topic_states=[T(topic_name=t, partition_states=ps) for t, ps in by_topic.items()])
            on_response = self.on_stop_replica_response
            # only a partition deleted by this request can complete a topic deletion (Kafka's
            # isPartitionDeleted): the answer to a StopReplica without delete must not
            deleting = frozenset(tp for tp, st in states.items() if st.delete)
            self.channel.send(broker_id, request, STOP_REPLICA_VERSION,
                              None if on_response is None else
                              (lambda b, r, deleting=deleting: on_response(b, r, deleting)))
