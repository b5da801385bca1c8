"""Fetch responses whose records stay in the segment files: the same bytes as kafka-python's codec
for every version, whether copied once (materialize) or sent with sendfile over a real socket;
a truncation racing the send is refused rather than served."""
from __future__ import annotations

import os
import socket
import threading
import uuid
from pathlib import Path

import pytest
from kafka.protocol.consumer import FetchResponse
from kafka.record.memory_records import MemoryRecordsBuilder

from kafkalite.config.log_config import LogConfig
from kafkalite.log.log import FetchDataInfo, Log
from kafkalite.network.send import FileRegion, RegionChangedError, ResponseSend, send_blocking
from kafkalite.server.fetch_response import encode_fetch_response

T0 = 1_700_000_000_000
VERSIONS = range(0, 19)


def batch(n: int, value: bytes) -> bytes:
    b = MemoryRecordsBuilder(2, 0, 1 << 22)
    for i in range(n):
        b.append(T0 + i, b"k", value + str(i).encode())
    b.close()
    return bytes(b.buffer())


@pytest.fixture
def log(tmp_path: Path) -> Log:
    one = batch(3, b"x" * 300)
    lg = Log.open(tmp_path / "t-0", LogConfig(segment_bytes=len(one) * 2), now_ms=T0)
    for i in range(9):
        lg.append_as_leader(batch(3, bytes([65 + i]) * 300), 0, T0)
    yield lg
    lg.close()


def _response(v: int, parts: list[tuple[str, list[tuple[int, int, object, list | None, bool]]]],
              session_id: int = 0) -> object:
    """parts: topic -> [(partition, error, records, aborted, diverging)]"""
    R = FetchResponse[v]
    T = R.FetchableTopicResponse
    P = T.PartitionData
    topics = []
    for name, partitions in parts:
        tid = uuid.uuid5(uuid.NAMESPACE_DNS, name)
        ps = []
        for index, error, records, aborted, diverging in partitions:
            ps.append(P(partition_index=index, error_code=error, high_watermark=27, last_stable_offset=25,
                        log_start_offset=3,
                        aborted_transactions=None if aborted is None else [
                            P.AbortedTransaction(producer_id=pid, first_offset=o) for pid, o in aborted],
                        diverging_epoch=P.EpochEndOffset(epoch=4, end_offset=11) if diverging and v >= 12 else None,
                        preferred_read_replica=2 if index == 1 else -1, records=records))
        topics.append(T(topic_id=tid, partitions=ps) if v >= 13 else T(topic=name, partitions=ps))
    return R(throttle_time_ms=5, error_code=0, session_id=session_id, responses=topics)


def _reference(resp: object, v: int, correlation_id: int) -> bytes:
    """kafka-python's encoding with every FetchDataInfo read into bytes: today's wire bytes."""
    for t in resp.responses:
        for p in t.partitions:
            if isinstance(p.records, FetchDataInfo):
                p.records = p.records.read_bytes()
    resp.API_VERSION = v
    resp.with_header(correlation_id=correlation_id)
    return bytes(resp.encode(header=True, framed=True))


def _cases(log: Log) -> list:
    whole = log.read(0, 1 << 20)                      # every segment: several slices
    partial = log.read(7, 1500)                        # cut at max bytes, whole batches only
    empty = log.read(log.log_end_offset, 1000)         # at the end: no bytes
    big_bytes = whole.read_bytes()                     # already read (read_committed, down-conversion)
    return [
        ("all-in-files", [("orders", [(0, 0, whole, None, False)])]),
        ("several", [("orders", [(0, 0, partial, [(7, 1), (9, 20)], False), (1, 0, empty, [], True),
                                 (2, 6, None, [], False)]),
                     ("audit", [(0, 0, whole, None, False), (3, 0, b"", None, False)])]),
        ("in-memory", [("t", [(0, 0, big_bytes, [(1, 2)], True), (1, 0, batch(1, b"s"), None, False)])]),
        ("errors-only", [("gone", [(0, 3, None, [], False), (1, 100, b"", [], False)])]),
        ("no-topics", []),
    ]


@pytest.mark.parametrize("v", VERSIONS)
def test_same_bytes_as_the_codec_for_every_version(log: Log, v: int) -> None:
    for name, shape in _cases(log):
        expected = _reference(_response(v, shape, session_id=77), v, 12345)
        send = encode_fetch_response(_response(v, shape, session_id=77), v, 12345)
        assert send.size == len(expected), name
        assert bytes(send.materialize()) == expected, name
        if name in ("all-in-files", "several"):
            assert send.file_bytes > 0 and send.regions(), name
        if name == "all-in-files":
            assert len(send.regions()) == len(log.read(0, 1 << 20).file_slices) > 1


def _send_over_socket(send: ResponseSend) -> bytes:
    a, b = socket.socketpair()
    a.setblocking(False)
    a.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)    # many EAGAIN / poll rounds
    got = bytearray()

    def drain() -> None:
        while True:
            chunk = b.recv(65536)
            if not chunk:
                return
            got.extend(chunk)

    reader = threading.Thread(target=drain)
    reader.start()
    try:
        send_blocking(a, send.for_sendfile(), [False])
    finally:
        a.close()
        reader.join(10)
        b.close()
    return bytes(got)


@pytest.mark.parametrize("v", [4, 7, 11, 12, 13, 16, 17])
def test_sendfile_puts_the_same_bytes_on_a_socket(log: Log, v: int) -> None:
    for name, shape in _cases(log):
        expected = _reference(_response(v, shape), v, 9)
        assert _send_over_socket(encode_fetch_response(_response(v, shape), v, 9)) == expected, name


def test_deleted_segment_is_still_served_from_its_open_descriptor(log: Log) -> None:
    data = log.read(0, 1 << 20)
    expected = data.read_bytes()
    send = encode_fetch_response(_response(11, [("t", [(0, 0, data, None, False)])]), 11, 1)
    for seg in list(log.dir.glob("*.log")):
        os.unlink(seg)
    got = _send_over_socket(send)
    assert got.endswith(expected) and len(got) == send.size


def test_truncation_below_the_region_refuses_to_send_other_bytes(log: Log) -> None:
    """Truncated and appended again to the same length: the positions hold other bytes now.
    Neither the copy nor the sendfile path completes the response."""
    leo = log.log_end_offset
    data = log.read(leo - 3, 1 << 20)                 # the last batch, in the active segment
    assert data.size > 0
    before = data.read_bytes()
    log.truncate_to(leo - 3)
    log.append_as_leader(batch(3, b"Z" * 300), 0, T0)    # same size, other bytes, same positions
    assert data.read_bytes() != before and len(data.read_bytes()) == len(before)
    for v in (11, 12):                                # records last in the response / tagged fields last
        send = encode_fetch_response(_response(v, [("t", [(0, 0, data, None, False)])]), v, 1)
        with pytest.raises(RegionChangedError):
            send.materialize()
        a, b = socket.socketpair()
        try:
            with pytest.raises(RegionChangedError):
                send_blocking(a, send.for_sendfile(), [False])
            a.shutdown(socket.SHUT_WR)
            received = b.recv(1 << 20)
            assert len(received) < send.size         # the client never gets a complete response
        finally:
            a.close()
            b.close()


def test_truncation_shorter_than_the_region_fails_the_send(log: Log) -> None:
    leo = log.log_end_offset
    data = log.read(leo - 6, 1 << 20)
    log.truncate_to(leo - 6)
    send = encode_fetch_response(_response(12, [("t", [(0, 0, data, None, False)])]), 12, 1)
    with pytest.raises(RegionChangedError):
        send.materialize()
    a, b = socket.socketpair()
    try:
        with pytest.raises(RegionChangedError):
            send_blocking(a, send.for_sendfile(), [False])
    finally:
        a.close()
        b.close()


def test_region_left_intact_by_a_truncation_elsewhere_is_counted_per_file(log: Log) -> None:
    first_segment = log.read(0, 1, min_one_message=True)                     # one batch of the first (rolled) segment
    send = encode_fetch_response(_response(12, [("t", [(0, 0, first_segment, None, False)])]), 12, 1)
    log.truncate_to(log.log_end_offset - 3)            # the active segment only
    region = send.regions()[0]
    assert isinstance(region, FileRegion) and region.intact()
    assert bytes(send.materialize()) == _reference(
        _response(12, [("t", [(0, 0, log.read(0, 1, min_one_message=True), None, False)])]), 12, 1)
