"""Metadata (3): every version both brokers advertise (0-12), known/unknown/invalid topics,
auto-creation, all topics, by topic id."""
from __future__ import annotations

import uuid

from tests.differential.corpus.steps import create_topic
from tests.differential.framework import Case, Var

METADATA = 3


def _topics(*names: str) -> list[dict]:
    return [{"name": n} for n in names]


def _body(version: int, topics: list | None, auto_create: bool = False) -> dict:
    body = {"topics": topics, "include_cluster_authorized_operations": False,
            "include_topic_authorized_operations": False}
    if version >= 4:
        body["allow_auto_topic_creation"] = auto_create
    return body


CASES = [
    Case(f"metadata_v{v}_two_partitions", METADATA, v, _body(v, _topics("{topic}")),
         setup=create_topic(partitions=2))
    for v in range(0, 13)
] + [
    Case(f"metadata_v{v}_unknown_topic", METADATA, v, _body(v, _topics("{topic}")))
    for v in (4, 9, 12)
] + [
    Case(f"metadata_v{v}_invalid_topic_name", METADATA, v, _body(v, _topics("bad/name", "{topic}"), auto_create=True),
         setup=create_topic())
    for v in (1, 9, 12)
] + [
    Case("metadata_v12_by_topic_id", METADATA, 12, _body(12, [{"topic_id": Var("topic_id"), "name": None}]),
         setup=create_topic(partitions=3)),
    Case("metadata_v12_unknown_topic_id", METADATA, 12,
         _body(12, [{"topic_id": uuid.UUID("0f0e0d0c-0b0a-0908-0706-050403020100"), "name": None}])),
    Case("metadata_v12_authorized_operations", METADATA, 12,
         {**_body(12, _topics("{topic}")), "include_topic_authorized_operations": True,
          "include_cluster_authorized_operations": True},
         setup=create_topic()),
    Case("metadata_v8_authorized_operations", METADATA, 8,
         {**_body(8, _topics("{topic}")), "include_topic_authorized_operations": True,
          "include_cluster_authorized_operations": True},
         setup=create_topic()),
    Case("metadata_v12_no_topics", METADATA, 12, _body(12, [])),
    Case("metadata_v12_duplicate_topic", METADATA, 12, _body(12, _topics("{topic}", "{topic}")),
         setup=create_topic()),
    Case("metadata_v12_config_and_compacted_topic", METADATA, 12, _body(12, _topics("{topic}")),
         setup=create_topic(configs={"cleanup.policy": "compact", "retention.ms": "1000"})),
]
