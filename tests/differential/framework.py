"""Differential testing against Apache Kafka: case records, per-broker sessions, the runner.

A `Case` is plain data: an (api key, version), a request body as a dict (or raw wire bytes for
hostile frames), setup `Step`s run identically against both brokers, and the extra differences
the case allows (each with its reason). Values inside a body may be `Var("name")` markers or
strings with `{name}` placeholders: each broker's `Session` resolves them from its own variables
(unique topic/group/transactional names shared by both brokers, and values saved from a setup
response, such as a topic id or a producer id that each broker assigns for itself).

`run_case` sends everything over one persistent raw socket per broker and returns an `Outcome`:
the decoded response as nested dicts, "no response" (acks=0), or "connection closed".
"""
from __future__ import annotations

import itertools
import re
import socket
import struct
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Optional, Sequence, Union

from kafkalite.protocol.messages import messages_for
from tests.harness import BrokerProcess
from tests.integration.util import parse_records, split_host_port

Vars = dict[str, Any]
# A value computed per broker from its variables (e.g. a record batch carrying its producer id).
Lazy = Callable[[Vars], Any]

API_VERSIONS = 18
CLOSED = "connection closed"
NO_RESPONSE = "no response"


@dataclass(frozen=True)
class Var:
    """A placeholder replaced by the session's variable of that name, with its type kept."""
    name: str


@dataclass(frozen=True)
class Step:
    """A setup request. `save` stores response values (dotted paths, e.g. `topics.0.topic_id`) as
    variables; `until` retries the request (bounded) until it holds — how a case waits for
    leadership or a coordinator on each broker before the compared request."""
    api_key: int
    version: int
    body: Mapping[str, Any]
    save: Mapping[str, str] = field(default_factory=dict)
    until: Optional[Callable[[dict], bool]] = None
    timeout: float = 20.0


@dataclass(frozen=True)
class Case:
    name: str
    api_key: int
    version: int
    # The request body, or (for hostile frames) a function building the whole wire frame,
    # size prefix included, from the session's variables.
    body: Union[Mapping[str, Any], None] = None
    raw: Optional[Lazy] = None
    setup: Sequence[Step] = ()
    # path pattern -> why the two brokers may legitimately differ there (see compare.py)
    allow: Mapping[str, str] = field(default_factory=dict)
    # decode the answer at this version instead (ApiVersions answers unsupported versions as v0)
    response_version: Optional[int] = None
    # requests sent after the compared one on the same connection, compared too (e.g. a Fetch
    # showing what a Produce case stored)
    then: Sequence[Step] = ()
    # narrows each broker's answer to what the case is about, for APIs that list broker-wide
    # state shared with other tests (ListGroups, ListTransactions): (response, variables) -> response
    project: Optional[Callable[[dict, Vars], dict]] = None

    @property
    def id(self) -> str:
        return self.name


@dataclass
class Outcome:
    kind: str                       # "response", NO_RESPONSE or CLOSED
    response: Optional[dict] = None
    followups: list[dict] = field(default_factory=list)

    def summary(self) -> Any:
        return self.response if self.kind == "response" else self.kind


class SetupFailed(AssertionError):
    pass


def unique_names(case_name: str) -> Vars:
    """Names the case's requests use, equal on both brokers, unique per run."""
    slug = re.sub(r"[^a-zA-Z0-9._-]", "-", case_name)[:150]
    suffix = uuid.uuid4().hex[:6]
    return {
        "topic": f"d-{slug}-{suffix}",
        "topic2": f"d2-{slug}-{suffix}",
        "group": f"g-{slug}-{suffix}",
        "txn": f"x-{slug}-{suffix}",
    }


def resolve(value: Any, variables: Vars) -> Any:
    """Replace Var markers, `{name}` placeholders and Lazy callables, recursively."""
    if isinstance(value, Var):
        return variables[value.name]
    if isinstance(value, str):
        return value.format(**variables) if "{" in value else value
    if callable(value):
        return value(variables)
    if isinstance(value, Mapping):
        return {k: resolve(v, variables) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [resolve(v, variables) for v in value]
    return value


def build(data_class: Any, body: Mapping[str, Any]) -> Any:
    """A kafka-python message (or nested struct) from a plain dict of its fields."""
    kwargs = {}
    for name, value in body.items():
        f = data_class.fields[name]
        if value is not None and f.is_struct():
            value = build(f.data_class, value)
        elif value is not None and f.is_struct_array():
            value = [build(f.data_class, v) for v in value]
        kwargs[name] = value
    return data_class(**kwargs)


def lookup(data: Any, path: str) -> Any:
    """`topics.0.topic_id` in nested dicts/lists."""
    for part in path.split("."):
        data = data[int(part)] if isinstance(data, list) else data[part]
    return data


def _plain(value: Any) -> Any:
    """A decoded response as nested dicts/lists; fetched `records` bytes become parsed batches,
    so that batch fields (offsets, producer ids, CRC validity) are compared one by one."""
    if isinstance(value, dict):
        return {k: (_records(v) if k == "records" and isinstance(v, (bytes, bytearray, memoryview))
                    else _plain(v)) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, memoryview):
        return bytes(value)
    return value


def _records(data: Any) -> Any:
    parsed = parse_records(bytes(data))
    return {
        "batches": [{
            "base_offset": b.base_offset, "last_offset": b.last_offset, "magic": b.magic,
            "crc_ok": b.crc_ok, "compression": b.compression, "producer_id": b.producer_id,
            "producer_epoch": b.producer_epoch, "base_sequence": b.base_sequence,
            "records": [{"offset": r.offset, "timestamp": r.timestamp, "key": r.key, "value": r.value,
                         "headers": [list(h) for h in r.headers]} for r in b.records],
        } for b in parsed.batches],
        "trailing_partial_bytes": parsed.trailing_partial_bytes,
    }


class Connection:
    """One raw TCP connection to a broker; frames in, frames out, EOF reported as None."""

    def __init__(self, bootstrap: str, timeout: float) -> None:
        self.sock = socket.create_connection(split_host_port(bootstrap), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.timeout = timeout
        self.buf = bytearray()
        self.closed = False

    def send(self, data: bytes) -> bool:
        try:
            self.sock.sendall(data)
            return True
        except OSError:  # reset or broken pipe: the broker has closed it
            self.closed = True
            return False

    def _fill(self, n: int, deadline: float) -> bool:
        while len(self.buf) < n:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"no answer within {self.timeout} s")
            self.sock.settimeout(remaining)
            try:
                chunk = self.sock.recv(1 << 16)
            except socket.timeout:
                continue
            except OSError:
                chunk = b""
            if not chunk:
                self.closed = True
                return False
            self.buf += chunk
        return True

    def recv_frame(self) -> Optional[bytes]:
        deadline = time.monotonic() + self.timeout
        if not self._fill(4, deadline):
            return None
        (size,) = struct.unpack_from(">i", self.buf, 0)
        if not self._fill(4 + size, deadline):
            return None
        frame = bytes(self.buf[4:4 + size])
        del self.buf[:4 + size]
        return frame

    def close(self) -> None:
        self.closed = True
        try:
            self.sock.close()
        except OSError:
            pass


class Session:
    """A broker as the runner sees it: its bootstrap address, a persistent connection (reopened
    after a case that closed it) and the variables of the case in progress."""

    def __init__(self, name: str, bootstrap: str, timeout: float = 15.0) -> None:
        self.name = name
        self.bootstrap = bootstrap
        self.timeout = timeout
        self.correlation = itertools.count(1)
        self.conn: Optional[Connection] = None

    def connection(self) -> Connection:
        if self.conn is None or self.conn.closed:
            self.conn = Connection(self.bootstrap, self.timeout)
        return self.conn

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()

    def encode(self, api_key: int, version: int, body: Mapping[str, Any], variables: Vars) -> tuple[bytes, int, bool]:
        msgs = messages_for(api_key)
        assert msgs is not None, f"no codec for api key {api_key}"
        request = build(msgs.request[version], resolve(body, variables))
        corr = next(self.correlation)
        request.with_header(correlation_id=corr, client_id="differential")
        return bytes(request.encode(header=True, framed=True)), corr, request.expect_response()

    def decode(self, api_key: int, version: int, frame: bytes, corr: int) -> dict:
        (got,) = struct.unpack_from(">i", frame, 0)
        assert got == corr, f"{self.name}: correlation id {got}, expected {corr}"
        msgs = messages_for(api_key)
        assert msgs is not None
        try:
            return _plain(msgs.response[version].decode(frame, header=True).to_dict(json=False))
        except Exception:  # noqa: BLE001 - the codec raises assorted errors on short frames
            # compared byte for byte instead (e.g. an error answer in a shorter layout)
            return {"undecodable_frame": frame[4:].hex()}

    def exchange(self, api_key: int, version: int, body: Mapping[str, Any], variables: Vars,
                 response_version: Optional[int] = None) -> Outcome:
        data, corr, expects = self.encode(api_key, version, body, variables)
        return self._send_and_read(data, corr, expects, api_key,
                                   version if response_version is None else response_version)

    def exchange_raw(self, data: bytes, api_key: int, version: int) -> Outcome:
        # a hostile frame carries its own correlation id: read it back from the header
        corr = struct.unpack_from(">i", data, 8)[0] if len(data) >= 12 else -1
        return self._send_and_read(data, corr, True, api_key, version)

    def _send_and_read(self, data: bytes, corr: int, expects: bool, api_key: int, version: int) -> Outcome:
        conn = self.connection()
        if not conn.send(data):
            return Outcome(CLOSED)
        if not expects:
            # acks=0: nothing comes back; an ApiVersions ping proves the connection is still open
            # and that nothing was queued before the ping's own answer
            ping, ping_corr, _ = self.encode(API_VERSIONS, 0, {}, {})
            if not conn.send(ping):
                return Outcome(CLOSED)
            frame = conn.recv_frame()
            if frame is None:
                return Outcome(CLOSED)
            assert struct.unpack_from(">i", frame, 0)[0] == ping_corr, f"{self.name}: answered an acks=0 request"
            return Outcome(NO_RESPONSE)
        frame = conn.recv_frame()
        if frame is None:
            return Outcome(CLOSED)
        return Outcome("response", self.decode(api_key, version, frame, corr))

    def run_step(self, step: Step, variables: Vars, case_name: str) -> Optional[dict]:
        deadline = time.monotonic() + step.timeout
        while True:
            outcome = self.exchange(step.api_key, step.version, step.body, variables)
            if outcome.kind == NO_RESPONSE:
                return None
            if outcome.kind == CLOSED:
                raise SetupFailed(f"{case_name}: {self.name} closed the connection in setup step {step}")
            response = outcome.response
            assert response is not None
            if step.until is None or step.until(response):
                break
            if time.monotonic() > deadline:
                raise SetupFailed(f"{case_name}: {self.name} never satisfied a setup step: {response}")
            time.sleep(0.05)
        for var, path in step.save.items():
            variables[var] = lookup(response, path)
        return response


def run_case(session: Session, case: Case, names: Vars) -> Outcome:
    """Setup, the compared request, then the follow-up requests, on one broker."""
    variables: Vars = dict(names)
    for step in case.setup:
        session.run_step(step, variables, case.name)
    if case.raw is not None:
        outcome = session.exchange_raw(case.raw(variables), case.api_key,
                                       case.version if case.response_version is None else case.response_version)
    else:
        assert case.body is not None, f"{case.name}: neither a body nor a raw frame"
        outcome = session.exchange(case.api_key, case.version, case.body, variables, case.response_version)
    if case.project is not None and outcome.response is not None:
        outcome.response = case.project(outcome.response, variables)
    if outcome.kind != CLOSED:
        for step in case.then:
            response = session.run_step(step, variables, case.name)
            outcome.followups.append(response if response is not None else {})
    return outcome


# Oracle properties that name Kafka's own environment rather than broker behaviour.
_NOT_SHARED = ("listeners", "advertised.listeners", "log.dirs", "zookeeper.")


class ConfiguredBroker(BrokerProcess):
    """A kafkalite broker reading a given server.properties instead of the packaged one, so a
    config's value and source (STATIC_BROKER_CONFIG vs DEFAULT_CONFIG) match the oracle's."""

    def __init__(self, config_file: Path, log_dir: Path) -> None:
        super().__init__(log_dir=log_dir)
        self.config_file = config_file

    def command(self) -> list[str]:
        args = super().command()
        return args[:4] + ["--config", str(self.config_file)] + args[4:]


def broker_like(oracle_properties: Mapping[str, str], work: Path) -> ConfiguredBroker:
    """A kafkalite broker (not started) configured as the oracle is: its server.properties, without
    the lines naming the oracle's own environment, written to `work`, and its logs under `work`."""
    config = work / "server.properties"
    config.write_text("".join(f"{k}={v}\n" for k, v in oracle_properties.items() if not k.startswith(_NOT_SHARED)))
    return ConfiguredBroker(config, work / "logs")
