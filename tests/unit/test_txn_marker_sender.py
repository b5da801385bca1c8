"""The transaction marker channel's sender (TransactionMarkerChannelManager) over a real socket:
a marker whose request cannot be sent for an unexpected reason is answered "no answer" (the
coordinator retries it) instead of leaving its transaction waiting for ever, and the
destination's sender keeps serving the markers after it. The same error on each retry is logged
with its traceback once, not per retry."""
from __future__ import annotations

import asyncio
import logging
import struct
import uuid

import pytest
from kafka.protocol.producer.transaction import WriteTxnMarkersRequest, WriteTxnMarkersResponse

from kafkalite.cluster.metadata_cache import BrokerEndpoint, BrokerInfo, MetadataCache, PartitionInfo, TopicInfo
from kafkalite.coordinator.transaction.transaction_marker_channel_manager import (
    WRITE_TXN_MARKERS_VERSION, TransactionMarkerChannelManager)
from kafkalite.protocol.errors import ErrorCode
from kafkalite.replica.partition import TopicPartition

ME, LEADER = 0, 1
SIZE = struct.Struct(">i")


async def leader_answering_none(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                                seen: list[list[tuple[int, str, list[int]]]]) -> None:
    """A leader that writes every marker: each WriteTxnMarkers is answered NONE per partition."""
    R = WriteTxnMarkersResponse[WRITE_TXN_MARKERS_VERSION]
    while True:
        try:
            (size,) = SIZE.unpack(await reader.readexactly(4))
        except asyncio.IncompleteReadError:
            break
        request = WriteTxnMarkersRequest[WRITE_TXN_MARKERS_VERSION].decode(await reader.readexactly(size),
                                                                         header=True)
        seen.append([(m.producer_id, t.name, list(t.partition_indexes)) for m in request.markers for t in m.topics])
        response = R(markers=[R.WritableTxnMarkerResult(producer_id=m.producer_id, topics=[
            R.WritableTxnMarkerResult.WritableTxnMarkerTopicResult(name=t.name, partitions=[
                R.WritableTxnMarkerResult.WritableTxnMarkerTopicResult.WritableTxnMarkerPartitionResult(
                    partition_index=p, error_code=0) for p in t.partition_indexes]) for t in m.topics])
            for m in request.markers])
        response.with_header(correlation_id=request.header.correlation_id)
        writer.write(response.encode(header=True, framed=True))
        await writer.drain()
    writer.close()


def failures(caplog: pytest.LogCaptureFixture) -> list[tuple[int, bool]]:
    """(level, with traceback) of each logged failure of a WriteTxnMarkers send, in order."""
    return [(r.levelno, r.exc_info is not None) for r in caplog.records
            if r.getMessage().startswith("Sending WriteTxnMarkers to broker 1 failed")]


def test_a_request_that_cannot_be_built_is_retried_and_the_sender_lives_on(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="kafkalite.coordinator.transaction.transaction_marker_channel_manager")

    async def run() -> None:
        seen: list[list[tuple[int, str, list[int]]]] = []
        server = await asyncio.start_server(lambda r, w: leader_answering_none(r, w, seen), "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        cache = MetadataCache("cluster", broker_id=ME)
        cache.update_brokers([BrokerInfo(ME, (BrokerEndpoint("PLAINTEXT", "127.0.0.1", 1),)),
                              BrokerInfo(LEADER, (BrokerEndpoint("PLAINTEXT", "127.0.0.1", port),))], ME)
        # partition 2**31 cannot be encoded (INT32): the request fails before it is sent, not with
        # a connection error
        bad, good = TopicPartition("t", 2 ** 31), TopicPartition("t", 3)
        cache.update_topic(TopicInfo("t", uuid.uuid4(), False, {
            p.partition: PartitionInfo(p.partition, LEADER, 0, (LEADER,), (LEADER,)) for p in (bad, good)}))

        async def no_local(*_args: object) -> dict[TopicPartition, ErrorCode]:
            raise AssertionError("no partition is led here")

        channel = TransactionMarkerChannelManager(ME, cache, "PLAINTEXT", 5_000, no_local)
        channel.start()
        try:
            for _retry in range(3):     # the coordinator's retries of the same marker
                outcome = await asyncio.wait_for(channel.send_markers(7, 0, 0, True, [bad]), 10)
                assert (outcome.errors, outcome.deleted, outcome.unreachable) == ({}, [], [bad])
            assert seen == []
            assert failures(caplog) == [(logging.ERROR, True), (logging.DEBUG, False), (logging.DEBUG, False)]
            outcome = await asyncio.wait_for(channel.send_markers(8, 0, 0, True, [good]), 10)
            assert (outcome.errors, outcome.deleted, outcome.unreachable) == ({good: ErrorCode.NONE}, [], [])
            assert seen == [[(8, "t", [3])]]
            # after a send that went through, the error is news again
            outcome = await asyncio.wait_for(channel.send_markers(9, 0, 0, True, [bad]), 10)
            assert outcome.unreachable == [bad]
            assert failures(caplog)[3:] == [(logging.ERROR, True)]
        finally:
            await channel.shutdown()
            server.close()
            await server.wait_closed()

    asyncio.run(run())
