"""Accepted-but-ignored broker settings (issue 14): one start-up warning names those set
explicitly, docs/operations.md lists exactly them, DescribeConfigs' documentation says so."""
from __future__ import annotations

import re
from pathlib import Path

from kafkalite.config.broker_configs import broker_documentation
from kafkalite.config.kafka_config_def import KAFKA_BROKER_CONFIG_TYPES
from kafkalite.config.server_config import IGNORED_SETTINGS, build_config, is_known_key, load_config

REPO_ROOT = Path(__file__).resolve().parents[2]
PREFIX = ("these settings are accepted for compatibility with Kafka and ignored by kafkalite "
          "(see docs/operations.md): ")


def test_one_warning_names_the_ignored_settings_set(tmp_path: Path) -> None:
    path = tmp_path / "server.properties"
    path.write_text("num.network.threads=3\nnum.partitions=2\nbackground.threads=4\nbogus=1\n")
    loaded = load_config(path, ["num.io.threads=16", "metrics.num.samples=3", "num.network.threads=5"])
    assert loaded.warnings == [
        "unknown config key 'bogus' ignored",
        PREFIX + "background.threads, metrics.num.samples, num.io.threads, num.network.threads",
    ]
    assert loaded.config.num_io_threads == 16 and loaded.config.num_partitions == 2


def test_no_warning_for_honoured_settings_or_defaults() -> None:
    loaded = build_config({"num.partitions": "3", "log.segment.delete.delay.ms": "1000",
                           "log.flush.interval.ms": "500", "socket.listen.backlog.size": "64",
                           "fetch.max.bytes": "1048576"})
    assert loaded.warnings == []
    assert build_config({}).warnings == []
    assert load_config(REPO_ROOT / "config" / "server.properties").warnings == []
    # Kafka's server.properties sets the thread counts at their defaults: nothing to warn about
    assert build_config({"num.network.threads": "3", "num.io.threads": " 8"}).warnings == []


def test_every_ignored_setting_is_a_kafka_setting_kafkalite_accepts() -> None:
    for key in IGNORED_SETTINGS:
        assert key in KAFKA_BROKER_CONFIG_TYPES, key
        assert is_known_key(key), key


def test_operations_doc_lists_exactly_the_ignored_settings() -> None:
    text = (REPO_ROOT / "docs" / "operations.md").read_text()
    section = text.split("## Settings accepted and ignored", 1)[1].split("\n## ", 1)[0]
    rows = dict(re.findall(r"^\| `([^`]+)` \| (.+) \|$", section, flags=re.M))
    assert rows == IGNORED_SETTINGS


def test_describe_configs_documentation_says_ignored() -> None:
    assert broker_documentation("num.network.threads") == \
        "Accepted and ignored by kafkalite: one asyncio event loop serves every connection."
    assert broker_documentation("log.preallocate") == \
        "Accepted and ignored by kafkalite: segment files grow as they are written."
    assert broker_documentation("log.segment.delete.delay.ms") == (
        "Broker default of the topic config file.delete.delay.ms: Delay before the files of a segment "
        "deleted by retention, truncation or compaction (renamed .deleted meanwhile) are removed from disk.")
