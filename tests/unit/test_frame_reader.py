"""The request frame assembler (kafkalite.network.frame_reader): any split of a byte stream of
size-prefixed frames into receives gives back exactly those frames, in order, whatever their
sizes relative to the staging buffer; a bad size prefix ends the stream after the frames before
it; large frames are received in place (never through the staging buffer)."""
from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalite.network.frame_reader import FrameAssembler, FrameSizeError


def stream(frames: list[bytes]) -> bytes:
    return b"".join(struct.pack(">i", len(f)) + f for f in frames)


def feed(a: FrameAssembler, data: bytes, cuts: list[int]) -> list[object]:
    """Deliver ``data`` in receives no larger than each cut (and never more than the buffer
    offered), as a socket would; returns what came out."""
    out: list[object] = []
    pos, k = 0, 0
    while pos < len(data) and not a.failed:
        buf = a.get_buffer()
        assert len(buf) > 0, "the assembler offered no room"
        want = cuts[k % len(cuts)] if cuts else len(data)
        k += 1
        n = min(len(buf), want, len(data) - pos)
        buf[:n] = data[pos:pos + n]
        buf.release()
        a.buffer_updated(n)
        pos += n
        while a.frames:
            item = a.frames.popleft()
            if isinstance(item, bytearray):
                a.queued_bytes -= len(item)
            out.append(item)
    return out


frames_strategy = st.lists(st.one_of(st.binary(max_size=40), st.binary(min_size=60, max_size=300)), max_size=25)


@settings(max_examples=300, deadline=None)
@given(frames=frames_strategy, cuts=st.lists(st.integers(1, 97), min_size=1, max_size=8),
       staging=st.integers(4, 128))
def test_any_split_gives_back_the_frames_in_order(frames: list[bytes], cuts: list[int], staging: int) -> None:
    a = FrameAssembler(max_request_bytes=1 << 20, staging_bytes=staging)
    got = feed(a, stream(frames), cuts)
    assert [bytes(f) for f in got] == frames
    assert all(type(f) is bytearray for f in got)
    assert a.queued_bytes == 0


@settings(max_examples=100, deadline=None)
@given(frames=frames_strategy, bad=st.sampled_from([-1, -2**31, 1001, 2**31 - 1]),
       cuts=st.lists(st.integers(1, 97), min_size=1, max_size=8))
def test_a_bad_size_ends_the_stream_after_the_frames_before_it(frames: list[bytes], bad: int,
                                                             cuts: list[int]) -> None:
    a = FrameAssembler(max_request_bytes=1000, staging_bytes=64)
    got = feed(a, stream(frames) + struct.pack(">i", bad) + b"x" * 50 + stream([b"after"]), cuts)
    assert [bytes(f) for f in got[:-1]] == frames
    assert isinstance(got[-1], FrameSizeError) and got[-1].size == bad
    assert a.failed


def test_a_large_frame_is_received_into_its_own_buffer() -> None:
    a = FrameAssembler(max_request_bytes=1 << 20, staging_bytes=1024)
    body = bytes(range(256)) * 40            # 10,240 bytes: larger than the staging buffer
    data = stream([b"small", body])
    first = a.get_buffer()
    first[:20] = data[:20]                   # the small frame and the start of the large one
    first.release()
    a.buffer_updated(20)
    assert bytes(a.frames.popleft()) == b"small"
    rest = a.get_buffer()
    assert len(rest) == len(body) - (20 - 9 - 4)     # exactly what the large frame still lacks
    rest[:] = data[20:]
    rest.release()
    a.buffer_updated(len(data) - 20)
    assert bytes(a.frames.popleft()) == body
    assert len(a.get_buffer()) == 1024       # back to the staging buffer


def test_zero_length_frames_and_exact_staging_fit() -> None:
    a = FrameAssembler(max_request_bytes=100, staging_bytes=12)
    got = feed(a, stream([b"", b"12345678", b""]), [12])
    assert [bytes(f) for f in got] == [b"", b"12345678", b""]


def test_staging_must_hold_a_size_prefix() -> None:
    with pytest.raises(ValueError):
        FrameAssembler(max_request_bytes=100, staging_bytes=3)
