"""End-to-end: aiokafka against a real kafkalite broker (consumer with group_id=None + assign)."""
from __future__ import annotations

import asyncio
from collections import defaultdict
from typing import Any, Awaitable, TypeVar

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from tests.harness import BrokerProcess
from tests.integration.util import CODECS, RawClient, java_partition

TIMEOUT = 15.0
T = TypeVar("T")


def run(coro: Awaitable[T], timeout: float = 45.0) -> T:
    async def bounded() -> T:
        return await asyncio.wait_for(coro, timeout)
    return asyncio.run(bounded())


async def create(bootstrap: str, name: str, partitions: int) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10000)
    await admin.start()
    try:
        resp = await admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1)])
        # topic_errors rows are (topic, error_code, error_message)
        assert [(t[0], t[1]) for t in resp.topic_errors] == [(name, 0)], resp
    finally:
        await admin.close()


async def consume(bootstrap: str, topic: str, partitions: list[int], expected: int) -> dict[int, list[Any]]:
    c = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                         auto_offset_reset="earliest", request_timeout_ms=10000)
    await c.start()
    try:
        tps = [TopicPartition(topic, p) for p in partitions]
        c.assign(tps)
        await c.seek_to_beginning(*tps)
        out: dict[int, list[Any]] = defaultdict(list)
        n = 0
        loop = asyncio.get_running_loop()
        deadline = loop.time() + TIMEOUT
        while n < expected:
            assert loop.time() < deadline, f"consumed {n}/{expected}"
            for tp, recs in (await c.getmany(timeout_ms=200)).items():
                out[tp.partition].extend(recs)
                n += len(recs)
        extra = sum(len(r) for r in (await c.getmany(timeout_ms=300)).values())
        assert n == expected and extra == 0, (n, extra)
        return out
    finally:
        await c.stop()


def test_keyed_produce_partitioner_and_roundtrip(broker: BrokerProcess, topic_name: str) -> None:
    bs = broker.bootstrap_servers

    async def body() -> None:
        await create(bs, topic_name, 4)
        p = AIOKafkaProducer(bootstrap_servers=bs, linger_ms=5, enable_idempotence=True)
        await p.start()
        try:
            futs = []
            for i in range(200):
                k, v = f"key-{i % 31}".encode(), f"value-{i}".encode()
                futs.append((k, v, await p.send(topic_name, value=v, key=k)))
            expected: dict[int, list[tuple[bytes, bytes]]] = defaultdict(list)
            for k, v, f in futs:
                md = await f
                assert md.partition == java_partition(k, 4), (k, md.partition)
                assert md.offset == len(expected[md.partition])
                expected[md.partition].append((k, v))
        finally:
            await p.stop()
        assert len(expected) == 4
        got = await consume(bs, topic_name, [0, 1, 2, 3], 200)
        for part in range(4):
            assert [r.offset for r in got[part]] == list(range(len(got[part])))
            assert [(r.key, r.value) for r in got[part]] == expected[part]

    run(body())


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_compression_roundtrip(broker: BrokerProcess, topic_name: str, codec: str) -> None:
    bs = broker.bootstrap_servers
    values = [f"{codec}-{i:04d}-".encode() + b"qwertyuiop" * 25 for i in range(200)]

    async def body() -> None:
        await create(bs, topic_name, 1)
        p = AIOKafkaProducer(bootstrap_servers=bs, compression_type=codec, linger_ms=20, max_batch_size=4096)
        await p.start()
        try:
            futs = [await p.send(topic_name, value=v, partition=0) for v in values]
            offs = [(await f).offset for f in futs]
        finally:
            await p.stop()
        assert offs == list(range(200))
        got = await consume(bs, topic_name, [0], 200)
        assert [r.value for r in got[0]] == values
        assert [r.offset for r in got[0]] == list(range(200))

    run(body())
    with RawClient(bs) as c:
        parsed, hw = c.fetch_all(topic_name, 0)
    assert hw == 200 and len(parsed.batches) > 1
    assert {b.compression for b in parsed.batches} == {CODECS[codec]}


def test_headers_timestamps_and_offset_lookups(broker: BrokerProcess, topic_name: str) -> None:
    bs = broker.bootstrap_servers
    base = 1_650_000_000_000
    ts = [base + 1000 * i for i in range(30)]
    ts[5] = base + 20_500  # out of order
    headers = [[("i", str(i).encode()), ("const", b"c")] for i in range(30)]

    async def body() -> None:
        await create(bs, topic_name, 2)
        p = AIOKafkaProducer(bootstrap_servers=bs)
        await p.start()
        try:
            for i in range(30):
                md = await p.send_and_wait(topic_name, value=f"m{i}".encode(), partition=0, timestamp_ms=ts[i],
                                           headers=headers[i])
                assert md.offset == i
        finally:
            await p.stop()
        got = await consume(bs, topic_name, [0], 30)
        assert [r.timestamp for r in got[0]] == ts
        assert [list(r.headers) for r in got[0]] == headers
        assert {r.timestamp_type for r in got[0]} == {0}

        c = AIOKafkaConsumer(bootstrap_servers=bs, group_id=None, enable_auto_commit=False)
        await c.start()
        try:
            tp0, tp1 = TopicPartition(topic_name, 0), TopicPartition(topic_name, 1)
            assert await c.beginning_offsets([tp0, tp1]) == {tp0: 0, tp1: 0}
            assert await c.end_offsets([tp0, tp1]) == {tp0: 30, tp1: 0}
            for target in [base - 1, base, base + 4001, base + 5000, base + 20_000, base + 20_001,
                           base + 20_500, base + 29_000, base + 29_001]:
                res = (await c.offsets_for_times({tp0: target}))[tp0]
                exp = next(((off, t) for off, t in enumerate(ts) if t >= target), None)
                if exp is None:
                    assert res is None, (target - base, res)
                else:
                    assert (res.offset, res.timestamp) == exp, (target - base, res, exp)
        finally:
            await c.stop()

    run(body())


@pytest.mark.parametrize("acks", [0, 1, "all"])
def test_acks(broker: BrokerProcess, topic_name: str, acks: Any) -> None:
    bs = broker.bootstrap_servers

    async def body() -> None:
        await create(bs, topic_name, 2)
        p = AIOKafkaProducer(bootstrap_servers=bs, acks=acks, linger_ms=5)
        await p.start()
        try:
            futs = [await p.send(topic_name, value=f"{acks}-{i}".encode(), partition=i % 2) for i in range(100)]
            mds = [await f for f in futs]
        finally:
            await p.stop()
        if acks != 0:
            assert [md.offset for md in mds] == [i // 2 for i in range(100)]
        c = AIOKafkaConsumer(bootstrap_servers=bs, group_id=None, enable_auto_commit=False)
        await c.start()
        try:
            tps = [TopicPartition(topic_name, 0), TopicPartition(topic_name, 1)]
            loop = asyncio.get_running_loop()
            deadline = loop.time() + TIMEOUT
            while await c.end_offsets(tps) != {tps[0]: 50, tps[1]: 50}:
                assert loop.time() < deadline, "acks records not all appended"
                await asyncio.sleep(0.05)
        finally:
            await c.stop()
        got = await consume(bs, topic_name, [0, 1], 100)
        for part in (0, 1):
            assert [r.value for r in got[part]] == [f"{acks}-{i}".encode() for i in range(part, 100, 2)]
            assert [r.offset for r in got[part]] == list(range(50))

    run(body())


def test_idempotent_producer_exactly_n(broker: BrokerProcess, topic_name: str) -> None:
    bs = broker.bootstrap_servers
    n = 1000

    async def body() -> dict[int, int]:
        await create(bs, topic_name, 3)
        p = AIOKafkaProducer(bootstrap_servers=bs, enable_idempotence=True, linger_ms=2, max_batch_size=1024)
        await p.start()
        try:
            futs = [await p.send(topic_name, value=f"idem-{i}".encode(), key=f"k{i}".encode()) for i in range(n)]
            mds = [await f for f in futs]
        finally:
            await p.stop()
        counts: dict[int, int] = defaultdict(int)
        for md in mds:
            assert md.offset == counts[md.partition]
            counts[md.partition] += 1
        got = await consume(bs, topic_name, [0, 1, 2], n)
        values = [r.value for recs in got.values() for r in recs]
        assert len(values) == n and set(values) == {f"idem-{i}".encode() for i in range(n)}
        return counts

    counts = run(body())
    with RawClient(bs) as c:
        producers = set()
        for part in range(3):
            parsed, hw = c.fetch_all(topic_name, part)
            assert hw == counts[part]
            for b in parsed.batches:
                producers.add(b.producer_id)
                assert b.base_sequence == b.base_offset
        assert len(producers) == 1 and next(iter(producers)) >= 0
