"""`kafkalite console-producer`: one record per stdin line (Kafka's kafka-console-producer.sh).

    kafkalite console-producer --topic T [--property parse.key=true --property key.separator=:]
                               [--request-required-acks all|1|0] [--compression-codec gzip|snappy|lz4|zstd]
                               [--sync] [--max-block-ms MS] [--producer-property K=V ...]

Line reader properties (Kafka's LineMessageReader): parse.key, key.separator (TAB), parse.headers,
headers.delimiter (TAB), headers.separator (','), headers.key.separator (':'), null.marker,
ignore.error. A line is `[headers<delimiter>][key<separator>]value`; a key, value or header value
equal to null.marker is sent as null. Nothing is printed on success; the first record the cluster
refuses (or a line that cannot be parsed) stops the tool with one line on stderr, exit code 1.
"""
from __future__ import annotations

import argparse
import collections
import sys
from dataclasses import dataclass
from typing import Any, Iterator, Optional

from kafkalite.cluster.topic_validation import is_internal
from kafkalite.tools import common
from kafkalite.tools.common import ToolError

TOOL = "console-producer"
_ACKS = {"all": -1, "-1": -1, "1": 1, "0": 0}
_DEFAULT_MAX_BLOCK_MS = 60000
_MAX_PENDING = 10000  # futures kept before the oldest are checked (bounds memory on big inputs)


def register(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    p = sub.add_parser(TOOL, help="produce stdin lines to a topic",
                       description="Read records from stdin, one per line, and produce them "
                                   "(as kafka-console-producer.sh).")
    common.add_connection_args(p, "--producer.config", "producer")
    p.add_argument("--topic", required=True)
    p.add_argument("--property", action="append", default=[], metavar="K=V",
                   help="line reader property: parse.key, key.separator, parse.headers, headers.delimiter, "
                        "headers.separator, headers.key.separator, null.marker, ignore.error (repeatable)")
    p.add_argument("--producer-property", action="append", default=[], metavar="K=V",
                   help="producer config by its Kafka name, e.g. linger.ms=5 (repeatable)")
    p.add_argument("--request-required-acks", choices=sorted(_ACKS),
                   help="acks (default all)")
    p.add_argument("--compression-codec", nargs="?", const="gzip",
                   choices=("none", "gzip", "snappy", "lz4", "zstd"),
                   help="compression (gzip when given without a value; default none)")
    p.add_argument("--sync", action="store_true", help="wait for each record's acknowledgement")
    p.add_argument("--max-block-ms", type=common.positive_int, metavar="MS",
                   help="how long a send may wait for metadata, e.g. for the topic to exist (default 60000)")
    p.set_defaults(func=lambda args: common.run_tool(TOOL, _run, args), parser=p)


@dataclass(frozen=True)
class LineFormat:
    parse_key: bool = False
    key_separator: str = "\t"
    parse_headers: bool = False
    headers_delimiter: str = "\t"
    headers_separator: str = ","
    headers_key_separator: str = ":"
    null_marker: Optional[str] = None
    ignore_error: bool = False


_FORMAT_PROPS = {"parse.key": "parse_key", "key.separator": "key_separator", "parse.headers": "parse_headers",
                 "headers.delimiter": "headers_delimiter", "headers.separator": "headers_separator",
                 "headers.key.separator": "headers_key_separator", "null.marker": "null_marker",
                 "ignore.error": "ignore_error"}


def line_format(props: dict[str, str]) -> LineFormat:
    """The reader's settings from --property values; ValueError for an unknown property or
    separators that would make lines ambiguous (the checks of Kafka's LineMessageReader)."""
    kw: dict[str, Any] = {}
    for name, value in props.items():
        if name not in _FORMAT_PROPS:
            raise ValueError(f"unknown property {name!r}")
        field = _FORMAT_PROPS[name]
        kw[field] = value.strip().lower() == "true" if field in ("parse_key", "parse_headers", "ignore_error") else value
    fmt = LineFormat(**kw)
    pairs = [("headers.delimiter", fmt.headers_delimiter, "headers.separator", fmt.headers_separator),
             ("headers.delimiter", fmt.headers_delimiter, "headers.key.separator", fmt.headers_key_separator),
             ("headers.separator", fmt.headers_separator, "headers.key.separator", fmt.headers_key_separator),
             ("null.marker", fmt.null_marker, "key.separator", fmt.key_separator),
             ("null.marker", fmt.null_marker, "headers.separator", fmt.headers_separator),
             ("null.marker", fmt.null_marker, "headers.delimiter", fmt.headers_delimiter),
             ("null.marker", fmt.null_marker, "headers.key.separator", fmt.headers_key_separator)]
    for a, av, b, bv in pairs:
        if av is not None and av == bv:
            raise ValueError(f"{a} and {b} may not be equal")
    for name in ("key_separator", "headers_delimiter", "headers_separator", "headers_key_separator"):
        if getattr(fmt, name) == "":
            raise ValueError(f"{name.replace('_', '.')} may not be empty")
    return fmt


Record = tuple[Optional[bytes], Optional[bytes], list[tuple[str, Optional[bytes]]]]


def _encode(text: str) -> bytes:
    return text.encode("utf-8", "surrogateescape")


def parse_line(fmt: LineFormat, line: str, line_number: int) -> Record:
    """(key, value, headers) of one input line; ValueError names the line when a separator is
    missing (unless ignore.error, which then keeps the whole remainder as the value)."""
    def cut(enabled: bool, start: int, sep: str, what: str) -> Optional[str]:
        if not enabled:
            return None
        i = line.find(sep, start)
        if i < 0:
            if fmt.ignore_error:
                return None
            raise ValueError(f"no {what} found on line {line_number}: {line!r}")
        return line[start:i]

    headers_text = cut(fmt.parse_headers, 0, fmt.headers_delimiter, "headers delimiter")
    start = 0 if headers_text is None else len(headers_text) + len(fmt.headers_delimiter)
    key_text = cut(fmt.parse_key, start, fmt.key_separator, "key separator")
    if key_text is not None:
        start += len(key_text) + len(fmt.key_separator)
    value_text = line[start:]

    def nullable(text: Optional[str]) -> Optional[bytes]:
        return None if text is None or text == fmt.null_marker else _encode(text)

    headers: list[tuple[str, Optional[bytes]]] = []
    if headers_text is not None and headers_text != fmt.null_marker:
        for pair in headers_text.split(fmt.headers_separator):
            hkey, sep, hvalue = pair.partition(fmt.headers_key_separator)
            if not sep:
                if not fmt.ignore_error:
                    raise ValueError(f"no header key separator found in pair {pair!r} on line {line_number}")
                headers.append((pair, None))
                continue
            if hkey == fmt.null_marker:
                raise ValueError(f"header keys may not be the null marker {fmt.null_marker!r}")
            headers.append((hkey, nullable(hvalue)))
    return nullable(key_text), nullable(value_text), headers


def read_lines(stream: Any) -> Iterator[str]:
    """stdin lines without their terminator, bytes kept as they are (surrogateescape)."""
    for raw in stream:
        line = raw.decode("utf-8", "surrogateescape")
        if line.endswith("\n"):
            line = line[:-1]
        if line.endswith("\r"):
            line = line[:-1]
        yield line


def _run(args: argparse.Namespace) -> int:
    from kafka import KafkaProducer
    import kafka.errors as Errors

    p: argparse.ArgumentParser = args.parser
    try:
        fmt = line_format(common.parse_key_values(args.property, "--property", p, strip_values=False))
    except ValueError as e:
        p.error(str(e))
    common.check_topic_name(args.topic)
    # Kafka's precedence: the tool's defaults, the --producer.config file, --producer-property,
    # then the options given explicitly.
    configs = dict(acks=-1, max_block_ms=_DEFAULT_MAX_BLOCK_MS)
    configs.update(common.client_configs(args))
    configs.update(common.option_client_properties(args, args.producer_property, "--producer-property"))
    if args.request_required_acks is not None:
        configs["acks"] = _ACKS[args.request_required_acks]
    if args.max_block_ms is not None:
        configs["max_block_ms"] = args.max_block_ms
    if args.compression_codec is not None:
        configs["compression_type"] = None if args.compression_codec == "none" else args.compression_codec
    args.max_block_ms = configs["max_block_ms"]
    try:
        producer = KafkaProducer(**configs)
    except Errors.KafkaTimeoutError:
        raise common.connect_error(args) from None
    pending: collections.deque[Any] = collections.deque()
    ok = False
    try:
        for n, line in enumerate(read_lines(sys.stdin.buffer), start=1):
            try:
                key, value, headers = parse_line(fmt, line, n)
            except ValueError as e:
                raise ToolError(str(e)) from None
            if any(v is None for _, v in headers):
                # kafka-python's producer accepts only bytes header values.
                raise ToolError(f"line {n}: null header values cannot be sent")
            future = _send(producer, args, key, value, headers)
            if args.sync:
                _check(future, args)
            else:
                pending.append(future)
                while pending and (pending[0].is_done or len(pending) > _MAX_PENDING):
                    _check(pending.popleft(), args)
        producer.flush()
        while pending:
            _check(pending.popleft(), args)
        ok = True
    finally:
        if ok:
            producer.close()
        else:
            try:  # after a failure, do not wait for the rest of the queue to drain
                producer.close(timeout=0)
            except Errors.KafkaError:
                pass
    return 0


def _send(producer: Any, args: argparse.Namespace, key: Optional[bytes], value: Optional[bytes],
          headers: list[tuple[str, Optional[bytes]]]) -> Any:
    import kafka.errors as Errors

    try:
        return producer.send(args.topic, key=key, value=value, headers=headers or None)
    except ValueError:
        if not is_internal(args.topic):
            raise
        # kafka-python leaves internal topics out of the topics it partitions for, so the record
        # never reaches the broker, which would refuse it (Kafka's ReplicaManager: "Cannot append
        # to internal topic", INVALID_TOPIC_EXCEPTION): say that rather than the library's ValueError
        raise ToolError(f"cannot produce to topic '{args.topic}': cannot append to internal topic "
                        f"{args.topic} ({Errors.InvalidTopicError.message})") from None
    except Errors.KafkaTimeoutError:
        raise ToolError(f"topic '{args.topic}' not present in metadata after {args.max_block_ms} ms") from None
    except Errors.KafkaError as e:
        raise ToolError(f"cannot produce to topic '{args.topic}': {common.exception_text(e)}") from None


def _check(future: Any, args: argparse.Namespace) -> None:
    import kafka.errors as Errors

    try:
        future.get(timeout=args.request_timeout_ms / 1000 + args.max_block_ms / 1000)
    except Errors.KafkaError as e:
        raise ToolError(f"cannot produce to topic '{args.topic}': {common.exception_text(e)}") from None
