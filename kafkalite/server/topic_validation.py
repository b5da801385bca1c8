"""Kafka's topic name rules (org.apache.kafka.common.internals.Topic)."""
from __future__ import annotations

import re

MAX_NAME_LENGTH = 249
_LEGAL = re.compile(r"^[a-zA-Z0-9._-]+$")

GROUP_METADATA_TOPIC_NAME = "__consumer_offsets"
TRANSACTION_STATE_TOPIC_NAME = "__transaction_state"
INTERNAL_TOPICS = frozenset({GROUP_METADATA_TOPIC_NAME, TRANSACTION_STATE_TOPIC_NAME})


def topic_name_error(name: str | None) -> str | None:
    """None if the name is legal, else Kafka's reason."""
    if name is None or name == "":
        return "Topic name is illegal, it can't be empty"
    if name in (".", ".."):
        return "Topic name cannot be \".\" or \"..\""
    if len(name) > MAX_NAME_LENGTH:
        return f"Topic name is illegal, it can't be longer than {MAX_NAME_LENGTH} characters, topic name: {name}"
    if not _LEGAL.match(name):
        return (f"Topic name \"{name}\" is illegal, it contains a character other than "
                "ASCII alphanumerics, '.', '_' and '-'")
    return None


def is_internal(name: str) -> bool:
    return name in INTERNAL_TOPICS


def unify_collision_chars(name: str) -> str:
    """'.' and '_' collide in metric names, so Kafka refuses topics differing only by them."""
    return name.replace(".", "_")
