"""Command-line tools over the Kafka protocol (clients of any Kafka-compatible broker, never
readers of its files): `kafkalite topics`, `configs`, `console-producer`, `console-consumer`,
`groups`, `records`, `log-dirs`, `get-offsets`, `transactions`; `kafkalite dump-log`, which
reads segment and index files instead; `kafkalite zookeeper`, a local ZooKeeper for a cluster;
and `kafkalite cluster`, a local N-broker cluster with its ZooKeeper. Each module
registers its sub-command; the client library is imported only when a tool runs."""
from __future__ import annotations

import argparse

TOOL_MODULES = ("topics", "configs", "console_producer", "console_consumer", "groups", "records",
                "local_zookeeper", "local_cluster", "dump_log", "log_dirs", "get_offsets", "transactions")


def register_all(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    import importlib

    for name in TOOL_MODULES:
        importlib.import_module(f"kafkalite.tools.{name}").register(sub)
