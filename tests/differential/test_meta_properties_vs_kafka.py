"""meta.properties against Apache Kafka 3.9: the file the session's Kafka broker (`kafka_oracle`,
ZooKeeper mode) wrote into its log dir and the one kafkalite writes for the same cluster id and
broker id are the same text, but the date comment (which Properties.store always writes)."""
from __future__ import annotations

import time
from typing import Any

from kafkalite.config.properties import parse_properties
from kafkalite.server.meta_properties import MetaProperties, meta_properties_text, parse_meta_properties


def _without_date(text: str) -> list[str]:
    lines = text.split("\n")
    assert lines[1].startswith("#"), lines
    return [lines[0], *lines[2:]]


def test_kafkalite_writes_kafkas_meta_properties(kafka_oracle: Any) -> None:
    kafka_text = (kafka_oracle.work_dir / "logs" / "meta.properties").read_text()
    meta = parse_meta_properties(parse_properties(kafka_text))
    assert meta.version == 0 and meta.node_id == kafka_oracle.broker_id and meta.cluster_id
    ours = meta_properties_text(MetaProperties(0, meta.cluster_id, meta.node_id), time.localtime())
    assert _without_date(ours) == _without_date(kafka_text)
