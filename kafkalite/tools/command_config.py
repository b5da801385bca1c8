"""`--command-config FILE` for the admin tools (log-dirs, get-offsets, transactions): the Kafka
admin client properties in FILE (`request.timeout.ms`, `security.protocol`, ...) as kafka-python
configs over the tool's own connection settings."""
from __future__ import annotations

import argparse
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Iterator

from kafkalite.tools import common

if TYPE_CHECKING:  # pragma: no cover
    from kafka import KafkaAdminClient


def add_args(parser: argparse.ArgumentParser) -> None:
    common.add_connection_args(parser)
    parser.add_argument("--command-config", metavar="FILE",
                        help="properties file of admin client settings (Kafka's names, e.g. request.timeout.ms)")


def admin_configs(args: argparse.Namespace) -> dict[str, Any]:
    from kafka import KafkaAdminClient

    configs = common.client_configs(args)
    if args.command_config:
        props = common.load_client_properties(args.command_config)
        configs.update(common.convert_client_properties(props, KafkaAdminClient.DEFAULT_CONFIG, "admin client",
                                                        args.parser))
    return configs


@contextmanager
def admin_client(args: argparse.Namespace) -> Iterator["KafkaAdminClient"]:
    from kafka import KafkaAdminClient
    import kafka.errors as Errors

    try:
        admin = KafkaAdminClient(**admin_configs(args))
    except Errors.KafkaTimeoutError:
        raise common.connect_error(args) from None
    try:
        yield admin
    finally:
        admin.close()
