"""Recursive, field-by-field comparison of two decoded responses.

Paths name fields the way a reader would: `topics[0].partitions[2].error_code`. An allowed
difference is a pattern over paths with indices written `[*]` (fnmatch syntax), e.g.
`brokers[*].port`. Even an allowed field is not ignored: both sides must still have the same
*shape* there (null or not, zero UUID or not, negative or not, empty or not), so "Kafka assigns a
different producer id" is allowed while "kafkalite answers -1 where Kafka assigns one" is not.
"""
from __future__ import annotations

import re
import uuid
from typing import Any, Iterator, Mapping

_INDEX = re.compile(r"\[\d+\]")

# A reason starting with this skips the field entirely (not even its shape is compared): for
# fields a dedicated test compares in its own way.
NOT_COMPARED = "not compared: "

# Differences every case allows. Keep this list short: each entry hides real behaviour.
GLOBAL_ALLOWED: dict[str, str] = {
    "throttle_time_ms": "quota throttling is a property of the moment, not of the request",
    "cluster_id": "each cluster draws its own random id",
    "brokers[*].port": "each broker listens on its own free port",
    "endpoints[*].port": "each broker listens on its own free port",
    "coordinators[*].port": "each broker listens on its own free port",
    "port": "each broker listens on its own free port (FindCoordinator v0-3)",
    "*topic_id": "topic ids are random UUIDs drawn by each cluster",
    "*producer_id": "each broker allocates producer ids from its own block",
}


# Lists whose order Kafka does not define (it iterates a java.util.HashMap or HashSet), compared
# as maps keyed by the named field. path pattern -> key field.
UNORDERED: dict[str, str] = {
    "topics[*].configs": "name",      # CreateTopics: LogConfig's HashMap order
    "results[*].configs": "name",     # DescribeConfigs: the same
    # AddPartitionsToTxn: results collected in a HashMap[TopicPartition, Errors]
    "results_by_topic_v3_and_below[*].results_by_partition": "partition_index",
    "results_by_transaction[*].topic_results[*].results_by_partition": "partition_index",
    # DescribeLogDirs: partitions grouped from a HashMap
    "results[*].topics": "name",
    "results[*].topics[*].partitions": "partition_index",
}


def normalise(path: str) -> str:
    return _INDEX.sub("[*]", path)


def _regex(pattern: str) -> str:
    # `*` is a wildcard; `[*]` is literal text (any index), not an fnmatch character class
    tokens = re.split(r"(\[\*\]|\*)", pattern)
    return "".join(r"\[\*\]" if t == "[*]" else ".*" if t == "*" else re.escape(t) for t in tokens)


def _matches(path: str, pattern: str) -> bool:
    return re.fullmatch(_regex(pattern), path) is not None


def allowed_reason(path: str, allowed: Mapping[str, str]) -> str | None:
    p = normalise(path)
    for pattern, reason in allowed.items():
        if _matches(p, pattern):
            return reason
    return None


def shape(value: Any) -> Any:
    """What an allowed difference must still agree on."""
    if value is None:
        return None
    if isinstance(value, bool):
        return value
    if isinstance(value, uuid.UUID):
        return "zero uuid" if value.int == 0 else "uuid"
    if isinstance(value, int):
        return "negative" if value < 0 else "non-negative"
    if isinstance(value, (str, bytes)):
        return "empty" if len(value) == 0 else "non-empty"
    if isinstance(value, list):
        return ("list", len(value))
    if isinstance(value, dict):
        return ("struct", tuple(sorted(value)))
    return type(value).__name__


def differences(kafka: Any, lite: Any, allowed: Mapping[str, str], path: str = "") -> Iterator[str]:
    """Every path where kafkalite's value differs from Kafka's, outside the allowed list."""
    reason = allowed_reason(path, allowed) if path else None
    if reason is not None:
        if reason.startswith(NOT_COMPARED):
            return
        if shape(kafka) != shape(lite):
            yield f"{path}: kafka {kafka!r} vs kafkalite {lite!r} (allowed to differ only in value: {reason})"
        return
    if isinstance(kafka, dict) and isinstance(lite, dict):
        for key in list(kafka) + [k for k in lite if k not in kafka]:
            sub = f"{path}.{key}" if path else key
            if key not in kafka or key not in lite:
                yield f"{sub}: only in {'kafka' if key in kafka else 'kafkalite'}"
                continue
            yield from differences(kafka[key], lite[key], allowed, sub)
        return
    if isinstance(kafka, list) and isinstance(lite, list):
        key = next((k for pattern, k in UNORDERED.items() if _matches(normalise(path), pattern)), None)
        if key is not None:
            yield from _keyed_differences(kafka, lite, key, allowed, path)
            return
        if len(kafka) != len(lite):
            yield (f"{path}: {len(kafka)} elements in kafka, {len(lite)} in kafkalite: "
                   f"kafka {kafka!r} vs kafkalite {lite!r}")
            return
        for i, (a, b) in enumerate(zip(kafka, lite)):
            yield from differences(a, b, allowed, f"{path}[{i}]")
        return
    if kafka != lite or type(kafka) is not type(lite):
        yield f"{path or '<root>'}: kafka {kafka!r} vs kafkalite {lite!r}"


def _keyed_differences(kafka: list, lite: list, key: str, allowed: Mapping[str, str], path: str) -> Iterator[str]:
    by_key_kafka = {e[key]: e for e in kafka}
    by_key_lite = {e[key]: e for e in lite}
    if len(by_key_kafka) != len(kafka) or len(by_key_lite) != len(lite):
        yield f"{path}: repeated {key}s: kafka {[e[key] for e in kafka]} vs kafkalite {[e[key] for e in lite]}"
    for k in sorted(by_key_kafka.keys() - by_key_lite.keys(), key=str):
        yield f"{path}[{key}={k!r}]: only in kafka: {by_key_kafka[k]!r}"
    for k in sorted(by_key_lite.keys() - by_key_kafka.keys(), key=str):
        yield f"{path}[{key}={k!r}]: only in kafkalite: {by_key_lite[k]!r}"
    for k in sorted(by_key_kafka.keys() & by_key_lite.keys(), key=str):
        # compared under an index path, so that `configs[*].x` patterns still apply
        for d in differences(by_key_kafka[k], by_key_lite[k], allowed, f"{path}[0]"):
            yield d.replace(f"{path}[0]", f"{path}[{key}={k!r}]", 1)
