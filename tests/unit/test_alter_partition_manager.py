"""AlterPartitionManager against in-process controllers on localhost that decode our AlterPartition
requests and answer with our codec (a real cluster is in tests/cluster/test_alter_partition_cluster.py)."""
from __future__ import annotations

import asyncio
import struct
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Optional, Union

import pytest
import uvloop

from kafkalite.cluster.metadata_cache import BrokerEndpoint, BrokerInfo, MetadataCache
from kafkalite.cluster.topic_partition import TopicPartition
from kafkalite.config.server_config import KafkaConfig
from kafkalite.protocol.errors import ErrorCode, KafkaApiError
from kafkalite.protocol.header import decode_request_header
from kafkalite.protocol.inter_broker import AlterPartitionRequest, AlterPartitionResponse
from kafkalite.replica.alter_partition_manager import (AlterPartitionManager, LeaderAndIsr,
                                                       controller_endpoint_from)

TOPIC_A, TOPIC_B = "a", "b"
ID_A, ID_B = uuid.UUID(int=0xA), uuid.UUID(int=0xB)
ZERO_UUID = uuid.UUID(int=0)


@dataclass
class Seen:
    """One request as the controller decoded it."""
    api_key: int
    api_version: int
    client_id: str
    broker_id: int
    broker_epoch: int
    # (topic name or id, partition, leader epoch, isr with broker epochs, recovery state, partition epoch)
    partitions: list[tuple[Any, int, int, list[tuple[int, int]], int, int]]


# what a script returns: a response, DROP (close the connection) or SILENT (never answer)
DROP, SILENT = "drop", "silent"
Answer = Union[AlterPartitionResponse, str]
Script = Callable[[int, Any, int], Awaitable[Answer]]


@dataclass
class FakeController:
    """A localhost server decoding AlterPartition; `script(n, request, version)` answers the n-th."""
    script: Script
    seen: list[Seen] = field(default_factory=list)
    connections: int = 0
    server: Optional[asyncio.base_events.Server] = None
    writers: list[asyncio.StreamWriter] = field(default_factory=list)

    async def __aenter__(self) -> "FakeController":
        async def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            self.connections += 1
            self.writers.append(writer)
            try:
                while True:
                    (size,) = struct.unpack(">i", await reader.readexactly(4))
                    frame = await reader.readexactly(size)
                    header, pos = decode_request_header(frame, flexible=True)
                    v = header.api_version
                    req = AlterPartitionRequest.decode(frame[pos:], version=v)
                    self.seen.append(Seen(header.api_key, v, header.client_id, req.broker_id, req.broker_epoch, [
                        (t.topic_id if v >= 2 else t.topic_name, p.partition_index, p.leader_epoch,
                         [(b.broker_id, b.broker_epoch) for b in p.new_isr_with_epochs] if v >= 3
                         else [(b, -1) for b in p.new_isr], p.leader_recovery_state, p.partition_epoch)
                        for t in req.topics for p in t.partitions]))
                    answer = await self.script(len(self.seen) - 1, req, v)
                    if answer is SILENT:
                        await reader.read()  # until the client gives up and closes
                        return
                    if answer is DROP:
                        return
                    assert isinstance(answer, AlterPartitionResponse)
                    payload = struct.pack(">i", header.correlation_id) + b"\x00" + bytes(answer.encode(version=v))
                    writer.write(struct.pack(">i", len(payload)) + payload)
                    await writer.drain()
            except (ConnectionError, asyncio.IncompleteReadError):
                pass
            finally:
                writer.close()

        self.server = await asyncio.start_server(on_connect, "127.0.0.1", 0)
        return self

    @property
    def port(self) -> int:
        assert self.server is not None
        return self.server.sockets[0].getsockname()[1]

    async def __aexit__(self, *exc: object) -> None:
        assert self.server is not None
        self.server.close()
        for w in self.writers:
            w.close()
        await asyncio.sleep(0)


def accept_all(request: Any, version: int, error_for: Optional[dict[tuple[Any, int], ErrorCode]] = None,
               leave_out: frozenset[tuple[Any, int]] = frozenset(), recovery_state: int = 0
               ) -> AlterPartitionResponse:
    """What a controller answers when it writes every change (partition epoch + 1), except the
    partitions in `error_for` (that error) and `leave_out` (not in the answer)."""
    error_for = error_for or {}
    R = AlterPartitionResponse
    topics = []
    for t in request.topics:
        key = t.topic_id if version >= 2 else t.topic_name
        parts = []
        for p in t.partitions:
            if (key, p.partition_index) in leave_out:
                continue
            error = error_for.get((key, p.partition_index), ErrorCode.NONE)
            isr = [b.broker_id for b in p.new_isr_with_epochs] if version >= 3 else list(p.new_isr)
            parts.append(R.TopicData.PartitionData(
                partition_index=p.partition_index, error_code=int(error), leader_id=request.broker_id,
                leader_epoch=p.leader_epoch, isr=isr if error == ErrorCode.NONE else [],
                leader_recovery_state=recovery_state, partition_epoch=p.partition_epoch + 1))
        topics.append(R.TopicData(topic_id=t.topic_id, topic_name=t.topic_name, partitions=parts))
    return R(throttle_time_ms=0, error_code=0, topics=topics)


def top_level(error: ErrorCode) -> AlterPartitionResponse:
    return AlterPartitionResponse(throttle_time_ms=0, error_code=int(error), topics=[])


def shrink(isr: tuple[int, ...], partition_epoch: int = 4, leader_epoch: int = 2) -> LeaderAndIsr:
    return LeaderAndIsr(leader=1, leader_epoch=leader_epoch, isr=isr, leader_recovery_state=0,
                        partition_epoch=partition_epoch)


def manager_for(port_of: Callable[[], Optional[int]], broker_epoch: Callable[[], int] = lambda: 77,
                socket_timeout_ms: int = 30000) -> AlterPartitionManager:
    def endpoint() -> Optional[tuple[int, str, int]]:
        port = port_of()
        return None if port is None else (0, "127.0.0.1", port)
    return AlterPartitionManager(1, broker_epoch, endpoint, KafkaConfig.model_validate(
        {"controller.socket.timeout.ms": socket_timeout_ms}))


def run(test: Callable[[], Awaitable[None]]) -> None:
    """On the standard event loop and on uvloop, which the broker runs on."""
    asyncio.run(asyncio.wait_for(test(), 20))  # type: ignore[arg-type]
    uvloop.run(asyncio.wait_for(test(), 20))  # type: ignore[arg-type]


def test_first_request_v3_with_topic_ids_and_no_broker_epochs_in_the_isr() -> None:
    async def script(n: int, req: Any, v: int) -> Answer:
        return accept_all(req, v)

    async def test() -> None:
        async with FakeController(script) as ctl:
            m = manager_for(lambda: ctl.port)
            m.start()
            f = m.submit(TopicPartition(TOPIC_A, 0), ID_A, shrink((1, 2)), controller_epoch=3)
            assert await f == LeaderAndIsr(1, 2, (1, 2), 0, 5)
            assert m.unsent_isr_updates == {}
            assert ctl.seen == [Seen(56, 3, "broker-1", 1, 77, [(ID_A, 0, 2, [(1, -1), (2, -1)], 0, 4)])]
            await m.shutdown()

    run(test)


def test_a_topic_without_id_goes_by_name_at_v1() -> None:
    async def script(n: int, req: Any, v: int) -> Answer:
        return accept_all(req, v)

    async def test() -> None:
        async with FakeController(script) as ctl:
            m = manager_for(lambda: ctl.port)
            m.start()
            fa = m.submit(TopicPartition(TOPIC_A, 0), ID_A, shrink((1,)), 3)
            fb = m.submit(TopicPartition(TOPIC_B, 1), ZERO_UUID, shrink((1, 3)), 3)
            assert await fa == LeaderAndIsr(1, 2, (1,), 0, 5)
            assert await fb == LeaderAndIsr(1, 2, (1, 3), 0, 5)
            assert ctl.seen == [Seen(56, 1, "broker-1", 1, 77, [(TOPIC_A, 0, 2, [(1, -1)], 0, 4),
                                                                 (TOPIC_B, 1, 2, [(1, -1), (3, -1)], 0, 4)])]
            await m.shutdown()

    run(test)


def test_one_request_in_flight_and_what_queued_meanwhile_goes_in_one_batch() -> None:
    async def test() -> None:
        first_answered = asyncio.Event()

        async def script(n: int, req: Any, v: int) -> Answer:
            if n == 0:
                await first_answered.wait()
            return accept_all(req, v)

        async with FakeController(script) as ctl:
            m = manager_for(lambda: ctl.port)
            m.start()
            f0 = m.submit(TopicPartition(TOPIC_A, 0), ID_A, shrink((1, 2)), 3)
            while not ctl.seen:
                await asyncio.sleep(0.01)
            later = [m.submit(TopicPartition(TOPIC_A, 1), ID_A, shrink((1,)), 3),
                     m.submit(TopicPartition(TOPIC_B, 0), ID_B, shrink((1, 3)), 3),
                     m.submit(TopicPartition(TOPIC_A, 2), ID_A, shrink((1, 2, 3), partition_epoch=9), 3)]
            await asyncio.sleep(0.2)
            assert len(ctl.seen) == 1 and m.requests_sent == 1  # nothing else while one is in flight
            assert not any(f.done() for f in [f0, *later])
            first_answered.set()
            assert await f0 == LeaderAndIsr(1, 2, (1, 2), 0, 5)
            assert await asyncio.gather(*later) == [LeaderAndIsr(1, 2, (1,), 0, 5), LeaderAndIsr(1, 2, (1, 3), 0, 5),
                                                    LeaderAndIsr(1, 2, (1, 2, 3), 0, 10)]
            assert [s.partitions for s in ctl.seen] == [
                [(ID_A, 0, 2, [(1, -1), (2, -1)], 0, 4)],
                [(ID_A, 1, 2, [(1, -1)], 0, 4), (ID_A, 2, 2, [(1, -1), (2, -1), (3, -1)], 0, 9),
                 (ID_B, 0, 2, [(1, -1), (3, -1)], 0, 4)]]
            assert ctl.connections == 1
            await m.shutdown()

    run(test)


def test_second_submit_for_a_pending_partition_is_not_attempted() -> None:
    async def test() -> None:
        answer = asyncio.Event()

        async def script(n: int, req: Any, v: int) -> Answer:
            await answer.wait()
            return accept_all(req, v)

        async with FakeController(script) as ctl:
            m = manager_for(lambda: ctl.port)
            tp = TopicPartition(TOPIC_A, 0)
            first = m.submit(tp, ID_A, shrink((1, 2)), 3)  # unsent: not started yet
            dup = m.submit(tp, ID_A, shrink((1,)), 3)
            assert dup.done()
            with pytest.raises(KafkaApiError) as e:
                dup.result()
            assert e.value.code == ErrorCode.OPERATION_NOT_ATTEMPTED
            assert str(e.value) == (f"Failed to enqueue ISR change state {shrink((1,))} for partition "
                                    f"{ID_A}:a-0")
            m.start()
            while not ctl.seen:
                await asyncio.sleep(0.01)
            in_flight_dup = m.submit(tp, ID_A, shrink((1,)), 3)  # in flight now
            assert in_flight_dup.done() and in_flight_dup.exception().code == ErrorCode.OPERATION_NOT_ATTEMPTED
            answer.set()
            assert await first == LeaderAndIsr(1, 2, (1, 2), 0, 5)
            # answered: the partition takes a new change again
            assert await m.submit(tp, ID_A, shrink((1,), partition_epoch=5), 3) == LeaderAndIsr(1, 2, (1,), 0, 6)
            assert [s.partitions for s in ctl.seen] == [[(ID_A, 0, 2, [(1, -1), (2, -1)], 0, 4)],
                                                       [(ID_A, 0, 2, [(1, -1)], 0, 5)]]
            await m.shutdown()

    run(test)


def test_top_level_errors_and_failed_sends_keep_the_items_and_retry() -> None:
    # NOT_CONTROLLER, a dropped connection and a timeout resend the same request; STALE_BROKER_EPOCH
    # and other top-level errors build a new one (new broker epoch) after the back-off
    answers: list[Answer] = [top_level(ErrorCode.NOT_CONTROLLER), DROP, SILENT,
                             top_level(ErrorCode.STALE_BROKER_EPOCH), top_level(ErrorCode.UNKNOWN_SERVER_ERROR)]
    times: list[float] = []

    async def script(n: int, req: Any, v: int) -> Answer:
        times.append(time.monotonic())
        return answers[n] if n < len(answers) else accept_all(req, v)

    async def test() -> None:
        times.clear()
        epochs = iter([100, 101, 102])
        async with FakeController(script) as ctl:
            m = manager_for(lambda: ctl.port, broker_epoch=lambda: next(epochs), socket_timeout_ms=300)
            m.start()
            f = m.submit(TopicPartition(TOPIC_A, 0), ID_A, shrink((1, 2)), 3)
            assert await f == LeaderAndIsr(1, 2, (1, 2), 0, 5)
            assert [s.broker_epoch for s in ctl.seen] == [100, 100, 100, 100, 101, 102]
            assert all(s.partitions == [(ID_A, 0, 2, [(1, -1), (2, -1)], 0, 4)] for s in ctl.seen)
            gaps = [b - a for a, b in zip(times, times[1:])]
            assert all(g >= 0.045 for g in gaps), gaps  # the 50 ms back-off
            assert gaps[2] >= 0.3  # the silent controller: controller.socket.timeout.ms
            # NOT_CONTROLLER and every failure drop the connection
            assert ctl.connections == 4
            await m.shutdown()

    run(test)


def test_unknown_controller_is_waited_for_and_a_new_one_is_used() -> None:
    async def old_script(n: int, req: Any, v: int) -> Answer:
        return top_level(ErrorCode.NOT_CONTROLLER)

    async def new_script(n: int, req: Any, v: int) -> Answer:
        return accept_all(req, v)

    async def test() -> None:
        async with FakeController(old_script) as old, FakeController(new_script) as new:
            cache = MetadataCache(broker_id=1)
            m = AlterPartitionManager(1, lambda: 5, controller_endpoint_from(cache, "INTERNAL"), KafkaConfig())
            m.start()
            f = m.submit(TopicPartition(TOPIC_A, 0), ID_A, shrink((1, 2)), 3)
            await asyncio.sleep(0.3)
            assert m.requests_sent == 0 and not f.done()  # no controller known yet
            # the controller known, but not on the inter-broker listener: still nothing to send to
            cache.update_brokers([BrokerInfo(0, (BrokerEndpoint("EXTERNAL", "127.0.0.1", old.port),))], 0)
            await asyncio.sleep(0.3)
            assert m.requests_sent == 0
            cache.update_brokers([BrokerInfo(0, (BrokerEndpoint("INTERNAL", "127.0.0.1", old.port),)),
                                  BrokerInfo(2, (BrokerEndpoint("INTERNAL", "127.0.0.1", new.port),))], 0)
            while len(old.seen) < 2:
                await asyncio.sleep(0.01)
            assert not f.done()
            cache.update_brokers(list(cache.brokers.values()), 2)
            assert await f == LeaderAndIsr(1, 2, (1, 2), 0, 5)
            assert len(new.seen) == 1 and new.seen[0].broker_epoch == 5
            await m.shutdown()

    run(test)


def test_partition_errors_fail_their_futures_only() -> None:
    async def script(n: int, req: Any, v: int) -> Answer:
        return accept_all(req, v, error_for={(ID_A, 1): ErrorCode.INVALID_UPDATE_VERSION,
                                             (ID_B, 0): ErrorCode.FENCED_LEADER_EPOCH})

    async def test() -> None:
        async with FakeController(script) as ctl:
            m = manager_for(lambda: ctl.port)
            fs = [m.submit(TopicPartition(TOPIC_A, 0), ID_A, shrink((1,)), 3),
                  m.submit(TopicPartition(TOPIC_A, 1), ID_A, shrink((1,)), 3),
                  m.submit(TopicPartition(TOPIC_B, 0), ID_B, shrink((1,)), 3)]
            m.start()
            results = await asyncio.gather(*fs, return_exceptions=True)
            assert results[0] == LeaderAndIsr(1, 2, (1,), 0, 5)
            assert [(type(r), r.code) for r in results[1:]] == [  # type: ignore[union-attr]
                (KafkaApiError, ErrorCode.INVALID_UPDATE_VERSION), (KafkaApiError, ErrorCode.FENCED_LEADER_EPOCH)]
            assert m.unsent_isr_updates == {} and len(ctl.seen) == 1
            await m.shutdown()

    run(test)


def test_invalid_leader_recovery_state_is_an_unknown_server_error() -> None:
    async def script(n: int, req: Any, v: int) -> Answer:
        return accept_all(req, v, recovery_state=7)

    async def test() -> None:
        async with FakeController(script) as ctl:
            m = manager_for(lambda: ctl.port)
            m.start()
            f = m.submit(TopicPartition(TOPIC_A, 0), ID_A, shrink((1,)), 3)
            with pytest.raises(KafkaApiError) as e:
                await f
            assert e.value.code == ErrorCode.UNKNOWN_SERVER_ERROR
            await m.shutdown()

    run(test)


def test_a_partition_left_out_of_the_answer_is_sent_again() -> None:
    # Kafka keeps it queued ("was sent but not included in the response") and resends it at once;
    # a topic id the request did not carry is ignored
    async def script(n: int, req: Any, v: int) -> Answer:
        if n == 0:
            resp = accept_all(req, v, leave_out=frozenset({(ID_A, 1)}))
            resp.topics.append(AlterPartitionResponse.TopicData(topic_id=uuid.UUID(int=0xC), partitions=[
                AlterPartitionResponse.TopicData.PartitionData(partition_index=0, error_code=0, leader_id=1,
                                                               leader_epoch=2, isr=[1], partition_epoch=1)]))
            return resp
        return accept_all(req, v)

    async def test() -> None:
        async with FakeController(script) as ctl:
            m = manager_for(lambda: ctl.port)
            f0 = m.submit(TopicPartition(TOPIC_A, 0), ID_A, shrink((1,)), 3)
            f1 = m.submit(TopicPartition(TOPIC_A, 1), ID_A, shrink((1, 2)), 3)
            m.start()
            assert await f0 == LeaderAndIsr(1, 2, (1,), 0, 5)
            assert await f1 == LeaderAndIsr(1, 2, (1, 2), 0, 5)
            assert [s.partitions for s in ctl.seen] == [
                [(ID_A, 0, 2, [(1, -1)], 0, 4), (ID_A, 1, 2, [(1, -1), (2, -1)], 0, 4)],
                [(ID_A, 1, 2, [(1, -1), (2, -1)], 0, 4)]]
            await m.shutdown()

    run(test)


def test_shutdown_fails_pending_futures_and_later_submits() -> None:
    async def script(n: int, req: Any, v: int) -> Answer:
        return SILENT

    async def test() -> None:
        async with FakeController(script) as ctl:
            m = manager_for(lambda: ctl.port)
            m.start()
            in_flight = m.submit(TopicPartition(TOPIC_A, 0), ID_A, shrink((1,)), 3)
            while not ctl.seen:
                await asyncio.sleep(0.01)
            unsent = m.submit(TopicPartition(TOPIC_A, 1), ID_A, shrink((1,)), 3)
            await m.shutdown()
            for f in (in_flight, unsent):
                assert f.done() and f.exception().code == ErrorCode.OPERATION_NOT_ATTEMPTED  # type: ignore[union-attr]
            after = m.submit(TopicPartition(TOPIC_A, 0), ID_A, shrink((1,)), 3)
            assert after.done() and after.exception().code == ErrorCode.OPERATION_NOT_ATTEMPTED  # type: ignore[union-attr]
            assert m.unsent_isr_updates == {} and len(ctl.seen) == 1

    run(test)
