"""Kafka's topic name rules (org.apache.kafka.common.internals.Topic)."""
from __future__ import annotations

import re

MAX_NAME_LENGTH = 249
# ASCII only: \w or str.isalnum() would let non-ASCII letters and digits through
_LEGAL = re.compile(r"[a-zA-Z0-9._-]+")

GROUP_METADATA_TOPIC_NAME = "__consumer_offsets"
TRANSACTION_STATE_TOPIC_NAME = "__transaction_state"
INTERNAL_TOPICS = frozenset({GROUP_METADATA_TOPIC_NAME, TRANSACTION_STATE_TOPIC_NAME})
# The client id whose Produce requests may append to internal topics (Kafka's AdminUtils.ADMIN_CLIENT_ID,
# which KafkaApis.handleProduceRequest passes on as internalTopicsAllowed); everyone else is refused.
ADMIN_CLIENT_ID = "__admin_client"


def _java_length(s: str) -> int:
    """String.length() in Java counts UTF-16 code units (a non-BMP character counts twice)."""
    return len(s.encode("utf-16-le", errors="surrogatepass")) // 2


def topic_name_error(name: str | None) -> str | None:
    """None if the name is legal, else Kafka's InvalidTopicException message (Topic.validate)."""
    if name is None or name == "":
        reason = "the empty string is not allowed"
    elif name in (".", ".."):
        reason = f"'{name}' is not allowed"
    elif _java_length(name) > MAX_NAME_LENGTH:
        reason = f"the length of '{name}' is longer than the max allowed length {MAX_NAME_LENGTH}"
    elif not _LEGAL.fullmatch(name):  # fullmatch: '$' would accept a trailing newline
        reason = f"'{name}' contains one or more characters other than ASCII alphanumerics, '.', '_' and '-'"
    else:
        return None
    return f"Topic name is invalid: {reason}"


def is_internal(name: str) -> bool:
    return name in INTERNAL_TOPICS


def append_refused(name: str, client_id: str | None) -> bool:
    """Whether a client's Produce to this topic is refused as an append to an internal topic."""
    return is_internal(name) and client_id != ADMIN_CLIENT_ID


def has_collision_chars(name: str) -> bool:
    return "_" in name or "." in name


def unify_collision_chars(name: str) -> str:
    """'.' and '_' collide in metric names, so Kafka refuses topics differing only by them."""
    return name.replace(".", "_")


def has_collision(a: str, b: str) -> bool:
    return unify_collision_chars(a) == unify_collision_chars(b)
