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

def add_connection_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--bootstrap-server", default=DEFAULT_BOOTSTRAP, metavar="HOST:PORT[,HOST:PORT]",
                        help=f"broker(s) to connect to (default {DEFAULT_BOOTSTRAP})")
    parser.add_argument("--request-timeout-ms", type=positive_int, default=DEFAULT_REQUEST_TIMEOUT_MS,
                        metavar="MS", help="how long to wait for the cluster to connect and to answer "
                                           f"(default {DEFAULT_REQUEST_TIMEOUT_MS})")


def positive_int(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid integer {text!r}") from None
    if v <= 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {v}")
    return v


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
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid integer {text!r}") from None
    if v < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {v}")
    return v


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


def bootstrap_list(args: argparse.Namespace) -> list[str]:
    return [s.strip() for s in args.bootstrap_server.split(",") if s.strip()]


# --------------------------------------------------------------------------------------------
# Errors
# --------------------------------------------------------------------------------------------

def _sentence(text: str) -> str:
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
        return _sentence(broker_message)
    return f"{_sentence(getattr(cls, 'description', '') or cls.__name__)} ({getattr(cls, 'message', cls.__name__)})"


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
        return _sentence(detail)
    if isinstance(exc, Errors.KafkaError):
        detail = text.split(": ", 1)[1] if text.startswith(type(exc).__name__ + ": ") else text
        return _sentence(detail or type(exc).__name__)
    return _sentence(text or type(exc).__name__)


def error_string_text(result: str) -> str:
    """kafka-python reports some per-resource errors as `str(error)`: `[Error 40] Name: message`."""
    import kafka.errors as Errors

    m = re.match(r"^\[Error (-?\d+)\] \w+: ?(.*)$", result, re.S)
    if not m:
        return _sentence(result)
    detail = m.group(2).strip()
    return error_text(Errors.for_code(int(m.group(1))), None if detail in ("", "None") else detail)


def run_tool(tool: str, func: Callable[[argparse.Namespace], int], args: argparse.Namespace) -> int:
    """Run a tool body: ToolError and client errors become one line `kafkalite <tool>: ...` on
    stderr and exit code 1."""
    quiet_client_logging()
    try:
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
    return {
        "bootstrap_servers": bootstrap_list(args),
        "client_id": CLIENT_ID,
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


def convert_client_properties(props: Mapping[str, str], defaults: Mapping[str, Any], kind: str,
                              parser: argparse.ArgumentParser) -> dict[str, Any]:
    """Kafka client property names (`linger.ms`) to kafka-python configs (`linger_ms`), typed by
    the library's default value; an unknown name is a usage error."""
    out: dict[str, Any] = {}
    for name, raw in props.items():
        key = name.replace(".", "_")
        if key not in defaults:
            parser.error(f"unknown {kind} property {name!r}")
        default = defaults[key]
        value: Any = raw
        try:
            if isinstance(default, bool):
                if raw.lower() not in ("true", "false"):
                    raise ValueError(raw)
                value = raw.lower() == "true"
            elif isinstance(default, int) and not (key == "acks" and raw == "all"):
                value = int(raw)
            elif isinstance(default, float):
                value = float(raw)
        except ValueError:
            parser.error(f"invalid value {raw!r} for {kind} property {name!r}")
        out[key] = value
    return out


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


_PROPERTY_LINE = re.compile(r"^((?:\\.|[^=:\s])+)\s*[=:]?\s*(.*)$")


def load_client_properties(path: str) -> dict[str, str]:
    """A Java properties file of client settings (`--command-config`, `--producer.config`):
    `key=value`, `key: value` or `key value` lines, `#`/`!` comments; ToolError when it cannot
    be read."""
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError as e:
        raise ToolError(f"cannot read {path}: {e.strerror}") from None
    props: dict[str, str] = {}
    for line in (raw.strip() for raw in lines):
        m = _PROPERTY_LINE.match(line)
        if m and line[0] not in "#!":
            props[m.group(1).replace("\\", "")] = m.group(2)
    return props
