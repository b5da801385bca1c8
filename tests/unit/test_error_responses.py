"""Kafka's getErrorResponse per API: for every API the broker serves and every version it
advertises, a request with one element in every list gets an error response that encodes in that
version's layout, decodes with kafka-python, carries the error in every error field the request
gave rise to, and echoes the request's keys. KafkaApis answers a failing handler with it and keeps
the connection open. (The same against a broker process: tests/integration/test_error_responses.py.)
"""
from __future__ import annotations

import asyncio
import importlib
import logging
import pkgutil
import re
import uuid
from typing import Any, Iterator

import pytest
from kafka.protocol.api_message import ApiMessage

import kafkalite.server.handlers as handlers_pkg
from kafkalite.network.socket_server import CloseConnection, ConnectionInfo
from kafkalite.protocol.errors import ErrorCode, KafkaApiError
from kafkalite.protocol.messages import messages_for
from kafkalite.server.error_responses import ERROR_RESPONSES, UNKNOWN_SERVER_ERROR_MESSAGE, error_response
from kafkalite.server.handler import ApiSpec
from kafkalite.server.kafka_apis import KafkaApis

CONN = ConnectionInfo("127.0.0.1:9092-127.0.0.1:50000-0", "PLAINTEXT", "127.0.0.1", 50000)
TOPIC_ID = uuid.UUID(int=0x1234)
SCALARS: dict[str, Any] = {"string": "k1", "int8": 1, "int16": 1, "int32": 7, "int64": 7, "bool": False,
                           "uuid": TOPIC_ID, "bytes": b"", "records": None, "float64": 0.0}


def served_apis() -> list[tuple[int, int, int]]:
    """(api key, min, max version) of every handler module in kafkalite.server.handlers."""
    out = []
    for info in pkgutil.iter_modules(handlers_pkg.__path__):
        mod = importlib.import_module(f"kafkalite.server.handlers.{info.name}")
        if hasattr(mod, "API_KEY"):
            out.append((mod.API_KEY, mod.MIN_VERSION, mod.MAX_VERSION))
    return sorted(out)


SERVED = served_apis()
CASES = [(k, v) for k, lo, hi in SERVED for v in range(lo, hi + 1)]


def _py_name(json_name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", json_name).lower()


def _fill(cls: Any, fields: list[dict[str, Any]]) -> Any:
    """An instance with every field set: scalars from SCALARS, one element in every list."""
    kw: dict[str, Any] = {}
    for f in fields:
        t = f["type"]
        if t.startswith("[]"):
            inner = t[2:]
            kw[_py_name(f["name"])] = [_fill(getattr(cls, inner), f["fields"]) if "fields" in f
                                       else SCALARS[inner]]
        elif "fields" in f:
            kw[_py_name(f["name"])] = _fill(getattr(cls, t), f["fields"])
        else:
            kw[_py_name(f["name"])] = SCALARS[t]
    return cls(**kw)


def sample_request(api_key: int, v: int) -> Any:
    """One request of that version as the broker decodes it (encoded, then decoded)."""
    req_cls = messages_for(api_key).request
    built = _fill(req_cls[v], req_cls._json["fields"])
    if api_key == 0:
        built.acks = -1
    return req_cls[v].decode(built.encode(), version=v)


def error_codes(d: Any) -> Iterator[int]:
    """Every error code field of a decoded response (as ``to_dict()``), at any depth."""
    if isinstance(d, dict):
        for k, val in d.items():
            # CreateTopics v5+'s topic_config_error_code is about describing configs: left 0
            if k.endswith("error_code") and k != "topic_config_error_code":
                yield val
            yield from error_codes(val)
    elif isinstance(d, list):
        for item in d:
            yield from error_codes(item)


def roundtrip(api_key: int, v: int, code: int, message: str | None = None) -> Any:
    resp = error_response(api_key, v, sample_request(api_key, v), code, message)
    resp_cls = messages_for(api_key).response[v]
    if api_key == 18:
        # kafka-python reads any ApiVersions error as v0; Kafka sends the request's version and
        # Java clients parse that (falling back to v0 only when it fails)
        return ApiMessage.decode.__func__(resp_cls, resp.encode(), version=v)
    return resp_cls.decode(resp.encode(), version=v)


def test_every_served_api_has_an_error_response() -> None:
    assert sorted(ERROR_RESPONSES) == [k for k, _lo, _hi in SERVED]


@pytest.mark.parametrize("api_key,version", CASES)
def test_error_response_layout(api_key: int, version: int) -> None:
    decoded = roundtrip(api_key, version, ErrorCode.UNKNOWN_SERVER_ERROR)
    fields = decoded.to_dict()
    if api_key == 3:
        # Metadata v13's top-level error (KIP-1102) is not among what getErrorResponse fills
        assert fields.pop("error_code", 0) == 0
    codes = list(error_codes(fields))
    if api_key == 35 and version < 3:
        # DescribeLogDirs has no error field before v3: Kafka's answer is an empty result list
        assert (codes, fields["results"]) == ([], [])
        return
    assert codes, f"no error field filled: {decoded}"
    # every error field the response carries is the error (none is left at 0 = NONE)
    assert set(codes) == {-1}, decoded


def test_produce_partitions_echoed_with_unknown_offsets() -> None:
    for v in (3, 8, 12, 13):
        d = roundtrip(0, v, -1)
        (t,) = d.responses
        assert (t.topic_id if v >= 13 else t.name) == (TOPIC_ID if v >= 13 else "k1")
        (p,) = t.partition_responses
        assert (p.index, p.error_code, p.base_offset, p.log_append_time_ms) == (7, -1, -1, -1)
        if v >= 5:
            assert p.log_start_offset == -1
        if v >= 8:
            assert p.record_errors == [] and p.error_message is None


def test_produce_acks_0_has_no_error_response() -> None:
    req = sample_request(0, 9)
    req.acks = 0
    assert error_response(0, 9, req, -1) is None


def test_fetch_partitions_until_v12_top_level_only_from_v13() -> None:
    d = roundtrip(1, 12, -1)
    assert d.error_code == -1 and d.session_id == 7
    (p,) = d.responses[0].partitions
    assert (p.partition_index, p.error_code, p.high_watermark, p.last_stable_offset, p.log_start_offset) == \
        (7, -1, -1, -1, -1)
    assert d.responses[0].topic == "k1"
    d = roundtrip(1, 13, -1)
    assert (d.error_code, d.session_id, d.responses) == (-1, 7, [])


def test_metadata_echoes_topics_and_lists_no_brokers() -> None:
    d = roundtrip(3, 12, -1)
    assert d.brokers == [] and d.controller_id == -1 and d.cluster_id is None
    (t,) = d.topics
    assert (t.name, t.topic_id, t.error_code, t.is_internal, t.partitions) == ("k1", TOPIC_ID, -1, False, [])


def test_group_apis() -> None:
    j = roundtrip(11, 9, -1)
    assert (j.error_code, j.generation_id, j.protocol_name, j.leader, j.member_id, j.members) == \
        (-1, -1, None, "", "", [])
    assert roundtrip(11, 6, -1).protocol_name == ""
    s = roundtrip(14, 5, -1)
    assert (s.error_code, s.assignment) == (-1, b"")
    g = roundtrip(15, 5, -1).groups[0]
    assert (g.group_id, g.error_code, g.group_state, g.protocol_type, g.protocol_data, g.members) == \
        ("k1", -1, "", "", "", [])
    o = roundtrip(9, 1, -1)
    (p,) = o.topics[0].partitions
    assert (o.topics[0].name, p.partition_index, p.committed_offset, p.metadata, p.error_code) == \
        ("k1", 7, -1, "", -1)
    o = roundtrip(9, 7, -1)
    assert (o.error_code, o.topics) == (-1, [])
    o = roundtrip(9, 8, -1)
    assert [(g.group_id, g.error_code, g.topics) for g in o.groups] == [("k1", -1, [])]
    f = roundtrip(10, 3, -1)
    assert (f.error_code, f.error_message, f.node_id, f.host, f.port) == \
        (-1, UNKNOWN_SERVER_ERROR_MESSAGE, -1, "", -1)
    (c,) = roundtrip(10, 4, -1).coordinators
    assert (c.key, c.error_code, c.node_id, c.host, c.port) == ("k1", -1, -1, "", -1)


def test_messages_follow_api_error() -> None:
    # UNKNOWN_SERVER_ERROR: no message where ApiError is used, Errors.message() where that is used
    (t,) = roundtrip(19, 7, -1).topics
    assert (t.name, t.error_code, t.error_message) == ("k1", -1, None)
    (r,) = roundtrip(32, 4, -1).results
    assert (r.resource_name, r.error_code, r.error_message) == ("k1", -1, UNKNOWN_SERVER_ERROR_MESSAGE)
    # a Kafka error keeps its code and message
    (t,) = roundtrip(19, 7, ErrorCode.INVALID_REQUEST, "bad").topics
    assert (t.error_code, t.error_message) == (ErrorCode.INVALID_REQUEST, "bad")


def test_transaction_apis() -> None:
    i = roundtrip(22, 4, -1)
    assert (i.error_code, i.producer_id, i.producer_epoch) == (-1, -1, -1)
    a = roundtrip(24, 3, -1)
    (t,) = a.results_by_topic_v3_and_below
    assert (t.name, [(p.partition_index, p.partition_error_code) for p in t.results_by_partition]) == \
        ("k1", [(7, -1)])
    a = roundtrip(24, 4, -1)
    assert (a.error_code, a.results_by_transaction) == (-1, [])
    w = roundtrip(27, 1, -1)
    (m,) = w.markers
    assert (m.producer_id, m.topics[0].name, [(p.partition_index, p.error_code) for p in m.topics[0].partitions]) \
        == (7, "k1", [(7, -1)])


# -- KafkaApis: a failing handler is answered, not a dropped connection --------------------------

async def _raise(ctx: Any, req: Any) -> Any:
    raise RuntimeError("injected")


async def _raise_kafka(ctx: Any, req: Any) -> Any:
    raise KafkaApiError(ErrorCode.NOT_COORDINATOR, "moved")


def _frame(api_key: int, v: int, correlation_id: int) -> bytes:
    req = sample_request(api_key, v)
    req.with_header(correlation_id=correlation_id, client_id="unit")
    return bytes(req.encode(header=True))


def test_kafka_apis_answers_a_failing_handler(caplog: pytest.LogCaptureFixture) -> None:
    apis = KafkaApis([ApiSpec(12, 0, 4, _raise), ApiSpec(13, 0, 5, _raise_kafka)])
    with caplog.at_level(logging.ERROR, logger="kafkalite.server.kafka_apis"):
        out = asyncio.run(apis.handle_frame(CONN, memoryview(_frame(12, 4, 41))))
    assert out is not None
    resp = messages_for(12).response[4].decode(out[4:], header=True)
    assert resp.header.correlation_id == 41 and resp.error_code == -1
    (rec,) = [r for r in caplog.records if "Unexpected error handling request Heartbeat v4" in r.getMessage()]
    assert rec.levelno == logging.ERROR and rec.exc_info is not None and "injected" in str(rec.exc_info[1])
    out = asyncio.run(apis.handle_frame(CONN, memoryview(_frame(13, 5, 42))))
    resp = messages_for(13).response[5].decode(out[4:], header=True)
    assert (resp.header.correlation_id, resp.error_code) == (42, ErrorCode.NOT_COORDINATOR)


def test_kafka_apis_closes_a_failing_acks_0_produce() -> None:
    apis = KafkaApis([ApiSpec(0, 3, 13, _raise)])
    req = sample_request(0, 9)
    req.acks = 0
    req.with_header(correlation_id=5, client_id="unit")
    with pytest.raises(CloseConnection):
        asyncio.run(apis.handle_frame(CONN, memoryview(bytes(req.encode(header=True)))))
