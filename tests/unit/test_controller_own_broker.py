"""The controller's requests to its own broker go to the handlers as objects (channel_manager's
`own_broker_handler`), not encoded and decoded again in the same process. That is only sound if
a handler reads from the object exactly what it would read from the decoded request; these tests
build the controller's LeaderAndIsr, UpdateMetadata and StopReplica requests as a failover does
(rows, shared lists, several topics, a reassignment, a deletion, an offline replica; at once and
in slices of the event loop) and compare
every field of every version-valid struct, the handlers' views, and the answer the controller
reads, with what the wire would give. The last test runs the channel end to end: a request to
the own broker reaches the handler directly, one to another broker goes over the network."""
from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest

from kafkalite.cluster.metadata_cache import BrokerEndpoint, BrokerInfo
from kafkalite.cluster.topic_partition import TopicPartition
from kafkalite.controller.channel_manager import ControllerBrokerRequestBatch, ControllerChannelManager
from kafkalite.controller.controller_context import ControllerContext
from kafkalite.controller.states import LeaderAndIsr, LeaderIsrAndControllerEpoch
from kafkalite.controller.zk.znodes import ReplicaAssignment
from kafkalite.network.socket_server import ConnectionInfo
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.inter_broker import LeaderAndIsrResponse
from kafkalite.protocol.messages import messages_for
from kafkalite.server.handlers import leader_and_isr, stop_replica, update_metadata
from kafkalite.server.kafka_apis import KafkaApis, decode_body

TOPIC_A, TOPIC_B = uuid.UUID(int=0xA), uuid.UUID(int=0xB)


def broker(b: int) -> BrokerInfo:
    return BrokerInfo(b, (BrokerEndpoint("PLAINTEXT", f"h{b}", 9090 + b, 0),
                          BrokerEndpoint("INTERNAL", f"i{b}", 9190 + b, 0)), rack=f"r{b}" if b != 1 else None)


class CapturingChannel(ControllerChannelManager):
    def __init__(self) -> None:
        super().__init__(0, "PLAINTEXT", 1000)
        self.sent: list[tuple[int, Any, int]] = []

    def send(self, broker_id: int, request: Any, api_version: int, callback: Any = None) -> None:
        self.sent.append((broker_id, request, api_version))


def failover_requests(sliced: bool = False, extra_partitions: int = 0) -> list[tuple[int, Any, int]]:
    """What one controller event sends: LeaderAndIsr to brokers 0 and 1 (2 is offline), one
    UpdateMetadata per live broker, StopReplica with and without deletion. `sliced`: built by
    send_requests_to_brokers_in_slices (as the state machines do) instead of at once."""
    ctx = ControllerContext(epoch=3)
    ctx.set_live_brokers({0: (broker(0), 100), 1: (broker(1), 101)})
    ctx.add_topic("a", TOPIC_A)
    ctx.add_topic("b", TOPIC_B)
    shared = (0, 1, 2)      # a failover's equal replica lists share one value
    for p in range(4):
        ctx.update_partition_replica_assignment(TopicPartition("a", p), ReplicaAssignment(shared))
    ctx.update_partition_replica_assignment(TopicPartition("a", 4), ReplicaAssignment((0, 1, 2), (2,), (1,)))
    ctx.update_partition_replica_assignment(TopicPartition("b", 0), ReplicaAssignment((1, 0)))
    for p in range(extra_partitions):
        ctx.update_partition_replica_assignment(TopicPartition("a", 5 + p), ReplicaAssignment(shared))
    channel = CapturingChannel()
    batch = ControllerBrokerRequestBatch(0, ctx, channel, "PLAINTEXT")
    for tp in ctx.all_partitions():
        lai = LeaderAndIsr(leader=tp.partition % 2, leader_epoch=5 + tp.partition, isr=(0, 1),
                           partition_epoch=7 + tp.partition)
        leadership = LeaderIsrAndControllerEpoch(lai, 2)
        ctx.partition_leadership[tp] = leadership
        assignment = ctx.partition_full_replica_assignment(tp)
        batch.add_leader_and_isr_request_for_brokers([0, 1, 2], tp, leadership, assignment,
                                                     is_new=tp.partition == 3)
    ctx.topics_to_be_deleted.add("b")     # UpdateMetadata says LeaderDuringDelete for b
    batch.add_update_metadata_request_for_brokers([0, 1])
    batch.add_stop_replica_request_for_brokers([0, 1], TopicPartition("b", 0), delete=True)
    batch.add_stop_replica_request_for_brokers([1], TopicPartition("a", 4), delete=False)
    if sliced:
        asyncio.run(batch.send_requests_to_brokers_in_slices(controller_epoch=3))
    else:
        batch.send_requests_to_brokers(controller_epoch=3)
    assert not (batch.leader_and_isr or batch.stop_replica or batch.update_metadata_brokers)
    return channel.sent


@pytest.mark.parametrize("extra_partitions", [0, 3000])
def test_requests_built_in_slices_are_the_same(extra_partitions: int) -> None:
    def encoded(sent: list[tuple[int, Any, int]]) -> list[tuple[int, str, bytes]]:
        return [(b, type(r).__name__, r.encode(version=v)) for b, r, v in sent]
    assert encoded(failover_requests(True, extra_partitions)) == encoded(failover_requests(False, extra_partitions))


def test_requests_built_in_slices_let_the_loop_run() -> None:
    """Thousands of partitions' rows: other tasks run while they are built."""
    ctx = ControllerContext(epoch=1)
    ctx.set_live_brokers({0: (broker(0), 100)})
    ctx.add_topic("a", TOPIC_A)
    channel = CapturingChannel()
    batch = ControllerBrokerRequestBatch(0, ctx, channel, "PLAINTEXT")
    for p in range(20_000):
        tp = TopicPartition("a", p)
        ctx.update_partition_replica_assignment(tp, ReplicaAssignment((0,)))
        leadership = LeaderIsrAndControllerEpoch(LeaderAndIsr(leader=0, leader_epoch=0, isr=(0,)), 1)
        ctx.partition_leadership[tp] = leadership
        batch.add_leader_and_isr_request_for_brokers([0], tp, leadership, ctx.partition_full_replica_assignment(tp),
                                                     is_new=True)

    async def run() -> int:
        ticks = 0
        done = False

        async def ticker() -> None:
            nonlocal ticks
            while not done:
                ticks += 1
                await asyncio.sleep(0)
        task = asyncio.create_task(ticker())
        await asyncio.sleep(0)
        start = ticks
        await batch.send_requests_to_brokers_in_slices(controller_epoch=1)
        done = True
        await task
        return ticks - start
    assert asyncio.run(run()) >= 10      # ~1 ms slices of ~40 ms of rows
    assert [(b, type(r).__name__) for b, r, _ in channel.sent] == [(0, "LeaderAndIsrRequest"), (0, "UpdateMetadataRequest")]
    assert len(channel.sent[0][1].topic_states[0].partition_states) == 20_000



def wire(message: Any, version: int, response: bool = False) -> Any:
    """The message as the receiving end decodes it."""
    msgs = messages_for(message.API_KEY)
    cls = msgs.response if response else msgs.request
    return decode_body(cls, memoryview(message.encode(version=version)), version)


def fields_of(value: Any, struct: Any, version: int) -> dict[str, Any]:
    """Every field the version has, nested structs included, lists as tuples."""
    out: dict[str, Any] = {}
    for f in struct._fields:
        if not f.for_version_q(version):
            continue
        v = getattr(value, f.name)
        if v is not None and f.is_struct_array():
            v = tuple(fields_of(x, f, version) for x in v)
        elif v is not None and f.is_struct():
            v = fields_of(v, f, version)
        elif isinstance(v, list):
            v = tuple(v)
        out[f.name] = v
    return out


def test_failover_sends_each_kind_to_each_live_broker() -> None:
    kinds = sorted((b, type(r).__name__, v) for b, r, v in failover_requests())
    assert kinds == [(0, "LeaderAndIsrRequest", 7), (0, "StopReplicaRequest", 4), (0, "UpdateMetadataRequest", 8),
                     (1, "LeaderAndIsrRequest", 7), (1, "StopReplicaRequest", 4), (1, "UpdateMetadataRequest", 8)]


@pytest.mark.parametrize("index", range(6))
def test_every_field_of_every_request_is_what_the_wire_gives(index: int) -> None:
    _, request, v = failover_requests()[index]
    decoded = wire(request, v)
    assert fields_of(request, type(request)._struct, v) == fields_of(decoded, type(decoded)._struct, v)


def test_handler_views_are_those_of_the_decoded_requests() -> None:
    sent = failover_requests()
    for _, request, v in sent:
        decoded = wire(request, v)
        if request.API_KEY == leader_and_isr.API_KEY:
            states = leader_and_isr.partition_states(request, v)
            assert states == leader_and_isr.partition_states(decoded, v)
            assert leader_and_isr.topic_ids(request, v) == leader_and_isr.topic_ids(decoded, v)
            assert [x.broker_id for x in request.live_leaders] == [x.broker_id for x in decoded.live_leaders]
            assert len(states) == 6
            reassigning = next(s for s in states if s.tp == TopicPartition("a", 4))
            assert (reassigning.replicas, reassigning.adding_replicas, reassigning.removing_replicas) == \
                ((0, 1, 2), (2,), (1,))
            assert [s.is_new for s in states if s.topic == "a"] == [False, False, False, True, False]
        elif request.API_KEY == update_metadata.API_KEY:
            states = update_metadata.partition_states(request, v)
            assert states == update_metadata.partition_states(decoded, v)
            assert update_metadata.live_brokers(request, v) == update_metadata.live_brokers(decoded, v)
            assert update_metadata.topic_ids(request, v) == update_metadata.topic_ids(decoded, v) == \
                {"a": TOPIC_A, "b": TOPIC_B}
            assert [(s.topic, s.partition, s.leader, s.offline_replicas) for s in states][-2:] == \
                [("a", 4, 0, (2,)), ("b", 0, -2, ())]
        else:
            assert stop_replica.API_KEY == request.API_KEY
        for top in ("controller_id", "controller_epoch", "broker_epoch", "is_k_raft_controller"):
            assert getattr(request, top) == getattr(decoded, top)


def test_leader_and_isr_answer_reads_as_the_decoded_one() -> None:
    """The controller reads the handler's response object (rows) as it reads a decoded one."""
    errors = [(TopicPartition("a", 0), ErrorCode.NONE), (TopicPartition("b", 0), ErrorCode.KAFKA_STORAGE_ERROR),
              (TopicPartition("a", 1), ErrorCode.NONE)]
    response = leader_and_isr.build_response(7, ErrorCode.NONE, errors, {"a": TOPIC_A, "b": TOPIC_B})
    decoded = wire(response, 7, response=True)
    assert fields_of(response, LeaderAndIsrResponse[7]._struct, 7) == fields_of(decoded, type(decoded)._struct, 7)
    read = [(t.topic_id, pe.partition_index, pe.error_code) for t in response.topics for pe in t.partition_errors]
    assert read == [(TOPIC_A, 0, 0), (TOPIC_A, 1, 0), (TOPIC_B, 0, ErrorCode.KAFKA_STORAGE_ERROR)]


def test_channel_calls_the_own_broker_handler_and_sends_to_others_over_the_network() -> None:
    """Broker 0's requests reach KafkaApis.handle_request as objects; broker 1's go to its
    address (nothing listens there: the sender retries it, the request stays unanswered)."""
    async def run() -> tuple[list[Any], list[Any]]:
        handled: list[Any] = []

        async def handle(ctx: Any, req: Any) -> Any:
            handled.append((ctx.api_version, ctx.client_id, req))
            return messages_for(req.API_KEY).response[ctx.api_version](error_code=ErrorCode.NONE)
        from kafkalite.server.handler import ApiSpec
        apis = KafkaApis([ApiSpec(update_metadata.API_KEY, 0, 8, handle)])
        conn = ConnectionInfo("controller-0-local", "PLAINTEXT", "localhost", 0)
        channel = ControllerChannelManager(
            0, "PLAINTEXT", 1000, retry_backoff_ms=50,
            own_broker_handler=lambda r, v: apis.handle_request(r, v, "controller-0", conn))
        dead = BrokerInfo(1, (BrokerEndpoint("PLAINTEXT", "127.0.0.1", 1, 0),))
        channel.add_broker(broker(0))
        channel.add_broker(dead)
        answers: list[Any] = []
        requests = [r for b, r, _ in failover_requests() if r.API_KEY == update_metadata.API_KEY]
        channel.send(0, requests[0], 8, lambda b, resp: answers.append((b, resp.error_code)))
        channel.send(1, requests[1], 8, lambda b, resp: answers.append((b, resp.error_code)))
        for _ in range(100):
            if answers:
                break
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.1)
        await channel.shutdown()
        return handled, answers
    handled, answers = asyncio.run(run())
    assert [(v, c) for v, c, _ in handled] == [(8, "controller-0")]
    assert handled[0][2] is not None and handled[0][2].broker_epoch == 100
    assert answers == [(0, ErrorCode.NONE)]


def test_a_local_request_runs_to_its_end_when_the_controller_stops_waiting() -> None:
    """As a request read from a connection: the controller resigning mid-way (its sender
    cancelled) must not leave a LeaderAndIsr half applied; the broker's shutdown cancels it."""
    from kafkalite.server.handler import ApiSpec

    async def run() -> list[str]:
        steps: list[str] = []
        release = asyncio.Event()

        async def handle(ctx: Any, req: Any) -> Any:
            steps.append("started")
            await release.wait()
            steps.append("finished")
            return messages_for(req.API_KEY).response[ctx.api_version](error_code=ErrorCode.NONE)
        apis = KafkaApis([ApiSpec(update_metadata.API_KEY, 0, 8, handle)])
        conn = ConnectionInfo("controller-0-local", "PLAINTEXT", "localhost", 0)
        request = next(r for _, r, _ in failover_requests() if r.API_KEY == update_metadata.API_KEY)
        caller = asyncio.create_task(apis.handle_request(request, 8, "controller-0", conn))
        await asyncio.sleep(0.01)
        caller.cancel()
        await asyncio.sleep(0.01)
        steps.append(f"caller cancelled {caller.cancelled()}")
        release.set()
        await asyncio.sleep(0.01)
        release.clear()
        pending = asyncio.create_task(apis.handle_request(request, 8, "controller-0", conn))
        await asyncio.sleep(0.01)
        await apis.cancel_local_requests()
        await asyncio.sleep(0)
        steps.append(f"after shutdown: caller done {pending.done()}, left {len(apis._local_requests)}")
        # the controller's sender sees a connection that closed (it retries), not its own cancel
        steps.append(type(pending.exception()).__name__)
        try:
            await apis.handle_request(request, 8, "controller-0", conn)
        except ConnectionRefusedError:
            steps.append("refused after shutdown")
        return steps
    assert asyncio.run(run()) == ["started", "caller cancelled True", "finished", "started",
                                  "after shutdown: caller done True, left 0", "ConnectionResetError",
                                  "refused after shutdown"]
