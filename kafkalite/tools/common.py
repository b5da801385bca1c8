"""Plumbing shared by the command-line tools: connection options, kafka-python clients, one-line
errors, tables.

The tools are Kafka clients (kafka-python 3) and never read the broker's files, so they work
against any Kafka-compatible broker. Only the standard library is imported at module level:
`kafkalite serve` builds the same argument parser and must not pay for the client library.
"""
from __future__ import annotations

import argparse
import logging
import os
import re
import sys
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, Mapping, Optional, Sequence

from kafkalite.config.properties import parse_java_integer
from kafkalite.cluster.topic_validation import topic_name_error

if TYPE_CHECKING:  # pragma: no cover
    from kafka import KafkaAdminClient

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"
DEFAULT_REQUEST_TIMEOUT_MS = 30000
CLIENT_ID = "kafkalite-tools"
MISSING = "-"  # Kafka's tools print this for a value that does not exist


class ToolError(Exception):
    """A failure reported as one line on stderr, exit code 1."""


# --------------------------------------------------------------------------------------------
# Arguments
# --------------------------------------------------------------------------------------------

def add_connection_args(parser: argparse.ArgumentParser, config_option: str = "--command-config",
                        client_kind: str = "admin") -> None:
    """--bootstrap-server, --request-timeout-ms, --version and the properties file of client
    settings (`config_option`, Kafka's name for it in this tool). The two flags default to None:
    the file's bootstrap.servers / request.timeout.ms apply when a flag is not given
    (resolve_client_properties)."""
    parser.add_argument("--bootstrap-server", default=None, metavar="HOST:PORT[,HOST:PORT]",
                        help=f"broker(s) to connect to (default: the properties file's bootstrap.servers, "
                             f"else {DEFAULT_BOOTSTRAP})")
    parser.add_argument("--request-timeout-ms", type=positive_int, default=None,
                        metavar="MS", help="how long to wait for the cluster to connect and to answer "
                                           f"(default {DEFAULT_REQUEST_TIMEOUT_MS})")
    parser.add_argument(config_option, dest="client_config_file", metavar="FILE",
                        help=f"Java properties file of {client_kind} client settings (Kafka's names: "
                             "bootstrap.servers, client.id, request.timeout.ms, ...)")
    parser.set_defaults(client_kind=client_kind)
    add_version_arg(parser)


def package_version() -> str:
    """The installed kafkalite distribution's version."""
    from importlib import metadata

    try:
        return metadata.version("kafkalite")
    except metadata.PackageNotFoundError:  # run from a checkout that was never installed
        return "unknown"


class _VersionAction(argparse.Action):
    """Prints the version and exits 0, as Kafka's tools do for --version; the version is looked
    up only when asked for."""

    def __init__(self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS,
                 default: Any = argparse.SUPPRESS, help: Optional[str] = None, prefix: str = "") -> None:
        super().__init__(option_strings, dest=dest, default=default, nargs=0, help=help)
        self.prefix = prefix

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: Optional[str] = None) -> None:
        print(f"{self.prefix}{package_version()}", flush=True)
        parser.exit(0)


def add_version_arg(parser: argparse.ArgumentParser, prefix: str = "") -> None:
    parser.add_argument("--version", action=_VersionAction, prefix=prefix, help="print the version and exit")


INT16_MAX, INT32_MAX, INT64_MAX = 2**15 - 1, 2**31 - 1, 2**63 - 1


def bounded_int(text: str, low: int, high: int) -> int:
    """An integer option within [low, high] (Kafka's tools take Java ints and longs: a value
    outside their range is refused there, never sent to the broker)."""
    v = parse_java_integer(text, bits=None)
    if v is None:
        raise argparse.ArgumentTypeError(f"invalid integer {text!r}")
    if v < low:
        raise argparse.ArgumentTypeError(f"must be > 0, got {v}" if low == 1 else f"must be >= {low}, got {v}")
    if v > high:
        raise argparse.ArgumentTypeError(f"must be at most {high}, got {v}")
    return v


def positive_int(text: str) -> int:
    """1 .. 2^31-1 (a Java int)."""
    return bounded_int(text, 1, INT32_MAX)


def int64(text: str) -> int:
    return bounded_int(text, -INT64_MAX - 1, INT64_MAX)


def replication_factor(text: str) -> int:
    """kafka-topics.sh: "The replication factor must be between 1 and 32767 inclusive"."""
    try:
        return bounded_int(text, 1, INT16_MAX)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(f"The replication factor must be between 1 and {INT16_MAX} inclusive, "
                                         f"got {text}") from None


def port_number(text: str) -> int:
    """A TCP port, 0 (a free one) to 65535."""
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid port {text!r}") from None
    if not 0 <= v <= 65535:
        raise argparse.ArgumentTypeError(f"port must be 0..65535, got {v}")
    return v


def non_negative_int(text: str) -> int:
    """0 .. 2^31-1 (a Java int)."""
    return bounded_int(text, 0, INT32_MAX)


def parse_key_values(items: Iterable[str], what: str, parser: argparse.ArgumentParser,
                     strip_values: bool = True) -> dict[str, str]:
    """`key=value` strings (the value may contain '='); a malformed one is a usage error.
    Separator properties keep their value as given (`key.separator= ` is a blank)."""
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            parser.error(f"invalid {what} {item!r}: expected KEY=VALUE")
        out[key.strip()] = value.strip() if strip_values else value
    return out


def include_list(text: str) -> "re.Pattern[str]":
    """A topic pattern as Kafka's TopicFilter.IncludeList reads it (kafka-topics.sh --topic for
    --list/--describe, kafka-get-offsets.sh --topic): blanks and surrounding quotes dropped,
    commas as alternatives, matched against the whole name. re.error for a bad pattern."""
    regex = re.sub(r"""^["']+|["']+$""", "", text.strip().replace(",", "|").replace(" ", ""))
    re.compile(regex)  # a syntax error's position is then one in the user's text
    return re.compile(f"(?:{regex})\\Z")


def check_topic_name(name: str) -> None:
    """A topic name Kafka would refuse is a one-line error (in Kafka's words), before any request."""
    message = topic_name_error(name)
    if message is not None:
        raise ToolError(sentence(message))


def bootstrap_list(args: argparse.Namespace) -> list[str]:
    return [s.strip() for s in args.bootstrap_server.split(",") if s.strip()]


# --------------------------------------------------------------------------------------------
# Errors
# --------------------------------------------------------------------------------------------

def sentence(text: str) -> str:
    """A broker or library message as the tail of our one line: no trailing period, lower-case
    first letter unless it starts an acronym or a name (`Topic 'x' already exists.` ->
    `topic 'x' already exists`)."""
    text = " ".join(text.split())
    if text.endswith("."):
        text = text[:-1]
    if len(text) > 1 and text[0].isupper() and not text[1].isupper():
        text = text[0].lower() + text[1:]
    return text


def error_text(code_or_class: Any, broker_message: Optional[str] = None) -> str:
    """One readable line for a Kafka error code (or kafka-python error class): the broker's own
    message when it sent one, else the error's description followed by its name."""
    import kafka.errors as Errors

    cls = Errors.for_code(code_or_class) if isinstance(code_or_class, int) else code_or_class
    if broker_message:
        return sentence(broker_message)
    return f"{sentence(getattr(cls, 'description', '') or cls.__name__)} ({getattr(cls, 'message', cls.__name__)})"


_KP_PREFIX = re.compile(r"^\[Error -?\d+\] \w+: ")
_UNSUPPORTED = re.compile(r"does not support the '(\w+?)(?:Request)?' Kafka protocol")


def exception_text(exc: BaseException) -> str:
    """One line for an exception raised by kafka-python."""
    import kafka.errors as Errors

    text = str(exc)
    m = _UNSUPPORTED.search(text)
    if m:
        return f"the broker does not support {m.group(1)}"
    if isinstance(exc, Errors.BrokerResponseError):
        detail = _KP_PREFIX.sub("", text)
        # kafka-python puts whole request/response dumps in some messages: name the error instead.
        if not detail or detail == type(exc).message or "Request '" in detail or "Response" in detail:
            return error_text(type(exc))
        return sentence(detail)
    if isinstance(exc, Errors.KafkaError):
        detail = text.split(": ", 1)[1] if text.startswith(type(exc).__name__ + ": ") else text
        return sentence(detail or type(exc).__name__)
    return sentence(text or type(exc).__name__)


def error_string_text(result: str) -> str:
    """kafka-python reports some per-resource errors as `str(error)`: `[Error 40] Name: message`."""
    import kafka.errors as Errors

    m = re.match(r"^\[Error (-?\d+)\] \w+: ?(.*)$", result, re.S)
    if not m:
        return sentence(result)
    detail = m.group(2).strip()
    return error_text(Errors.for_code(int(m.group(1))), None if detail in ("", "None") else detail)


def run_tool(tool: str, func: Callable[[argparse.Namespace], int], args: argparse.Namespace) -> int:
    """Run a tool body: ToolError and client errors become one line `kafkalite <tool>: ...` on
    stderr and exit code 1."""
    quiet_client_logging()
    try:
        if hasattr(args, "bootstrap_server"):   # a client of a broker (dump-log reads files)
            resolve_client_properties(args)
        return int(func(args) or 0)
    except ToolError as e:
        _fail(tool, str(e))
    except BrokenPipeError:
        # The reader went away (`| head`): stop quietly, and keep Python from complaining at exit.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    except KeyboardInterrupt:
        return 130
    except Exception as e:  # noqa: BLE001 - any client failure is reported in one line
        import kafka.errors as Errors

        if isinstance(e, Errors.KafkaError):
            _fail(tool, exception_text(e))
        else:
            _fail(tool, f"unexpected error: {type(e).__name__}: {e}")
    return 1


def _fail(tool: str, message: str) -> None:
    sys.stdout.flush()
    print(f"kafkalite {tool}: {message}", file=sys.stderr, flush=True)


def quiet_client_logging() -> None:
    """kafka-python logs retries and warnings; the tools report failures themselves, in one line."""
    logger = logging.getLogger("kafka")
    logger.addHandler(logging.NullHandler())
    logger.propagate = False
    logger.setLevel(logging.CRITICAL + 1)


# --------------------------------------------------------------------------------------------
# Clients
# --------------------------------------------------------------------------------------------

def client_configs(args: argparse.Namespace) -> dict[str, Any]:
    """The connection settled by resolve_client_properties, then the properties file's settings."""
    return {
        "client_id": CLIENT_ID,
        **getattr(args, "client_properties", {}),
        "bootstrap_servers": bootstrap_list(args),
        "request_timeout_ms": args.request_timeout_ms,
        "bootstrap_timeout_ms": args.request_timeout_ms,
    }


def connect_error(args: argparse.Namespace) -> ToolError:
    return ToolError(f"cannot connect to {args.bootstrap_server}: "
                     f"no broker answered within {args.request_timeout_ms} ms")


@contextmanager
def admin_client(args: argparse.Namespace) -> Iterator["KafkaAdminClient"]:
    from kafka import KafkaAdminClient
    import kafka.errors as Errors

    try:
        admin = KafkaAdminClient(**client_configs(args))
    except Errors.KafkaTimeoutError:
        raise connect_error(args) from None
    try:
        yield admin
    finally:
        admin.close()


# --------------------------------------------------------------------------------------------
# Client settings: Java properties files (--command-config, --producer.config, --consumer.config)
# and key=value options (--producer-property, --consumer-property), by Kafka's names
# --------------------------------------------------------------------------------------------

_PROPERTY_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def load_client_properties(path: str) -> dict[str, str]:
    r"""A Java properties file as java.util.Properties.load reads it (ISO-8859-1; `key=value`,
    `key: value` or `key value`; `#`/`!` comments; a trailing backslash continues the line;
    `\uXXXX` and backslash escapes). OSError when unreadable, ValueError for a bad escape."""
    with open(path, encoding="latin-1", newline="") as f:
        text = f.read()
    binary = re.search(r"[\x00-\x08\x0b\x0e-\x1f\x7f]", text)
    if binary:  # Java would read it as keys of garbage; name the real problem instead
        raise ValueError(f"not a properties file: binary byte {binary.group()!r} "
                         f"on line {text.count(chr(10), 0, binary.start()) + 1}")
    props: dict[str, str] = {}
    pending = ""
    continued = False
    for raw in re.split(r"\r\n|\r|\n", text):
        line = raw.lstrip(" \t\f")
        if not continued and (not line or line[0] in "#!"):
            continue
        continued = (len(line) - len(line.rstrip("\\"))) % 2 == 1
        pending += line[:-1] if continued else line
        if not continued:
            key, value = _split_property(pending)
            props[key] = value
            pending = ""
    if continued:
        key, value = _split_property(pending)
        props[key] = value
    return props


def _split_property(line: str) -> tuple[str, str]:
    i = 0
    while i < len(line) and line[i] not in "=: \t\f":
        i += 2 if line[i] == "\\" else 1
    rest = line[i:].lstrip(" \t\f")
    if rest[:1] in ("=", ":"):
        rest = rest[1:].lstrip(" \t\f")
    return _unescape(line[:i]), _unescape(rest)


def _unescape(text: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(text):
        c = text[i]
        if c != "\\":
            out.append(c)
            i += 1
            continue
        nxt = text[i + 1:i + 2]
        if nxt == "u":
            digits = text[i + 2:i + 6]
            if not re.fullmatch(r"[0-9a-fA-F]{4}", digits):
                raise ValueError(f"malformed \\uxxxx encoding: {text[i:i + 6]!r}")
            out.append(chr(int(digits, 16)))
            i += 6
            continue
        out.append(_PROPERTY_ESCAPES.get(nxt, nxt))
        i += 2
    return "".join(out)


def _parse_bool(raw: str) -> bool:
    if raw.lower() not in ("true", "false"):
        raise ValueError(raw)
    return raw.lower() == "true"


def _parse_choice(*choices: str) -> Callable[[str], str]:
    def parse(raw: str) -> str:
        if raw.lower() not in choices:
            raise ValueError(raw)
        return raw.lower()
    return parse


def _parse_list(raw: str) -> list[str]:
    servers = [s.strip() for s in raw.split(",") if s.strip()]
    if not servers:
        raise ValueError(raw)
    return servers


class UnsupportedValue(ValueError):
    """A valid Kafka setting the tools cannot honour; the message says why."""


def _parse_plaintext(raw: str) -> str:
    if raw.upper() in ("SSL", "SASL_PLAINTEXT", "SASL_SSL"):
        raise UnsupportedValue("kafkalite brokers have PLAINTEXT listeners only")
    if raw.upper() != "PLAINTEXT":
        raise ValueError(raw)
    return "PLAINTEXT"


def _parse_acks(raw: str) -> int:
    acks = {"all": -1, "-1": -1, "0": 0, "1": 1}.get(raw.lower())
    if acks is None:
        raise ValueError(raw)
    return acks


def _parse_compression(raw: str) -> Optional[str]:
    codec = _parse_choice("none", "gzip", "snappy", "lz4", "zstd")(raw)
    return None if codec == "none" else codec


# Kafka client settings the tools honour, per kind of client, with the parser of their value;
# kafka-python names each the same with '_' for '.' (linger.ms -> linger_ms).
_COMMON_SETTINGS: dict[str, Callable[[str], Any]] = {
    "bootstrap.servers": _parse_list, "client.id": str, "security.protocol": _parse_plaintext,
    **dict.fromkeys(("request.timeout.ms", "metadata.max.age.ms", "retry.backoff.ms", "reconnect.backoff.ms",
                     "reconnect.backoff.max.ms", "connections.max.idle.ms", "receive.buffer.bytes",
                     "send.buffer.bytes"), int),
}
CLIENT_SETTINGS: dict[str, dict[str, Callable[[str], Any]]] = {
    "admin": _COMMON_SETTINGS,
    "producer": {
        **_COMMON_SETTINGS, "acks": _parse_acks, "compression.type": _parse_compression,
        "enable.idempotence": _parse_bool,
        **dict.fromkeys(("linger.ms", "batch.size", "max.request.size", "max.block.ms", "delivery.timeout.ms",
                         "retries", "max.in.flight.requests.per.connection"), int),
    },
    "consumer": {
        **_COMMON_SETTINGS, "group.id": str, "group.instance.id": str, "client.rack": str,
        "auto.offset.reset": _parse_choice("earliest", "latest", "none"),
        "isolation.level": _parse_choice("read_uncommitted", "read_committed"),
        **dict.fromkeys(("enable.auto.commit", "check.crcs", "exclude.internal.topics",
                         "allow.auto.create.topics"), _parse_bool),
        **dict.fromkeys(("auto.commit.interval.ms", "fetch.min.bytes", "fetch.max.bytes", "fetch.max.wait.ms",
                         "max.partition.fetch.bytes", "max.poll.records", "max.poll.interval.ms",
                         "session.timeout.ms", "heartbeat.interval.ms"), int),
    },
}
# The console tools always read and write raw bytes, as Kafka's do (they replace these too).
_IGNORED_SETTINGS = {"producer": ("key.serializer", "value.serializer"),
                     "consumer": ("key.deserializer", "value.deserializer")}


def convert_client_properties(props: Mapping[str, str], kind: str) -> dict[str, Any]:
    """Kafka client settings (`linger.ms`) as kafka-python configs (`linger_ms`), typed;
    ValueError names the first setting this kind of client does not support or cannot parse."""
    table = CLIENT_SETTINGS[kind]
    out: dict[str, Any] = {}
    for name, raw in props.items():
        if name in _IGNORED_SETTINGS.get(kind, ()):
            continue
        if name not in table:
            raise ValueError(f"unsupported {kind} property {name!r}")
        key, parse = name.replace(".", "_"), table[name]
        try:
            out[key] = parse(raw.strip())
        except UnsupportedValue as e:
            raise ValueError(f"unsupported value {raw.strip()!r} for {kind} property {name!r}: {e}") from None
        except ValueError:
            raise ValueError(f"invalid value {raw!r} for {kind} property {name!r}") from None
    return out


def resolve_client_properties(args: argparse.Namespace) -> None:
    """Reads the tool's properties file (if given) into `args.client_properties` (kafka-python
    configs) and settles the connection: --bootstrap-server and --request-timeout-ms win over
    the file's bootstrap.servers and request.timeout.ms, which win over the defaults."""
    path = getattr(args, "client_config_file", None)
    props: dict[str, Any] = {}
    if path is not None:
        try:
            props = convert_client_properties(load_client_properties(path), args.client_kind)
        except OSError as e:
            raise ToolError(f"cannot read {path}: {e.strerror or e}") from None
        except ValueError as e:
            raise ToolError(f"{path}: {e}") from None
    servers = props.pop("bootstrap_servers", None)
    timeout = props.pop("request_timeout_ms", None)
    if args.bootstrap_server is None:
        args.bootstrap_server = ",".join(servers) if servers else DEFAULT_BOOTSTRAP
    if args.request_timeout_ms is None:
        args.request_timeout_ms = timeout if timeout is not None and timeout > 0 else DEFAULT_REQUEST_TIMEOUT_MS
    args.client_properties = props


def option_client_properties(args: argparse.Namespace, items: Iterable[str], option: str) -> dict[str, Any]:
    """--producer-property / --consumer-property values as kafka-python configs; a bad one is a
    usage error. The connection stays what resolve_client_properties settled."""
    p: argparse.ArgumentParser = args.parser
    try:
        props = convert_client_properties(parse_key_values(items, option, p), args.client_kind)
    except ValueError as e:
        p.error(str(e))
    for key in ("bootstrap_servers", "request_timeout_ms"):
        props.pop(key, None)
    return props


# --------------------------------------------------------------------------------------------
# Output
# --------------------------------------------------------------------------------------------

def format_table(header: Sequence[str], rows: Iterable[Sequence[Any]]) -> list[str]:
    """Columns padded to their widest cell and separated by one space, as Kafka's tools print
    them; no trailing blanks. Cells never contain blanks (a missing value is `-`), so a line
    splits on whitespace into exactly one field per column."""
    cells = [[str(c) for c in header]] + [[str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    return [" ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in cells]


def print_lines(lines: Iterable[str]) -> None:
    for line in lines:
        print(line)
    sys.stdout.flush()


def tp_name(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"

