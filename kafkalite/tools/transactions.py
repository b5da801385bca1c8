"""`kafkalite transactions list|describe|describe-producers`: transactional state, through
ListTransactions, DescribeTransactions and DescribeProducers, in the tables of Kafka's
kafka-transactions.sh (TransactionsCommand): each cell padded to its column's width and
followed by a tab, `None` for a value that is not there.

    kafkalite transactions --bootstrap-server HOST:PORT list [--duration-filter MS]
    kafkalite transactions describe --transactional-id ID
    kafkalite transactions describe-producers --topic T --partition P [--broker-id B]

Connection options go before the verb (Kafka's form) or after it. Failures are Kafka's line:
`Failed to describe transaction state of transactional-id `x`: <reason>. Enable debug logging
for additional detail.`, exit 1. Kafka's `abort` and `find-hanging` verbs are not here."""
from __future__ import annotations

import argparse
import time
from typing import Any, Optional, Sequence

from kafkalite.tools import common
from kafkalite.tools.common import ToolError
from kafkalite.tools.log_dirs import java_hash_order, topic_partition_hash

TOOL = "transactions"
LIST_HEADERS = ("TransactionalId", "Coordinator", "ProducerId", "TransactionState")
DESCRIBE_HEADERS = ("CoordinatorId", "TransactionalId", "ProducerId", "ProducerEpoch", "TransactionState",
                    "TransactionTimeoutMs", "CurrentTransactionStartTimeMs", "TransactionDurationMs",
                    "TopicPartitions")
PRODUCERS_HEADERS = ("ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch", "LastSequence", "LastTimestamp",
                     "CurrentTransactionStartOffset")
# Kafka's exception messages (Errors.message()) where kafka-python's descriptions differ.
KAFKA_MESSAGES = {3: "This server does not host this topic-partition."}
# COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR: Kafka's admin client retries these.
RETRIED_COORDINATOR_ERRORS = {14, 15, 16}


def register(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    p = sub.add_parser(TOOL, help="list and describe transactions and producers",
                       description="Analyse the transactional state of producers (as kafka-transactions.sh).")
    common.add_connection_args(p)
    verbs = p.add_subparsers(dest="verb", required=True, metavar="COMMAND")
    listing = verbs.add_parser("list", help="list transactions")
    listing.add_argument("--duration-filter", type=common.int64, metavar="MS",
                         help="only transactions running longer than this (ms); < 0: all")
    describe = verbs.add_parser("describe", help="describe the state of an active transactional-id")
    describe.add_argument("--transactional-id", required=True, help="transactional id")
    producers = verbs.add_parser("describe-producers",
                                 help="describe the states of active producers for a topic partition")
    producers.add_argument("--broker-id", type=common.non_negative_int, help="describe the producer state on this replica")
    producers.add_argument("--topic", required=True, help="topic name")
    producers.add_argument("--partition", type=common.non_negative_int, required=True, help="partition number")
    for verb in (listing, describe, producers):
        # Also after the verb; SUPPRESS keeps a verb from overwriting what came before it.
        verb.add_argument("--bootstrap-server", default=argparse.SUPPRESS, metavar="HOST:PORT[,HOST:PORT]")
        verb.add_argument("--command-config", default=argparse.SUPPRESS, metavar="FILE")
        verb.add_argument("--request-timeout-ms", type=common.positive_int, default=argparse.SUPPRESS, metavar="MS")
        verb.set_defaults(parser=verb)
    p.set_defaults(func=lambda args: common.run_tool(TOOL, _run, args), parser=p)


def table_lines(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """Kafka's ToolsUtils.prettyPrintTable: every cell padded to its column and followed by a tab."""
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(headers)]
    return ["".join(c.ljust(w) + "\t" for c, w in zip(row, widths)) for row in [list(headers), *rows]]


def optional(value: int) -> str:
    return "None" if value is None or value < 0 else str(value)


def failure(what: str, exc: BaseException, reason: Optional[str] = None) -> ToolError:
    code = getattr(exc, "errno", None)
    reason = reason or KAFKA_MESSAGES.get(code) or getattr(exc, "description", None) or str(exc)
    return ToolError(f"{what}: {reason}. Enable debug logging for additional detail.")


def describe_transactions_reason(transactional_id: str, exc: BaseException) -> Optional[str]:
    """The message of the exception Kafka's admin client (DescribeTransactionsHandler) fails a
    transactional id with, for an error code it does not retry; None for the others."""
    code = getattr(exc, "errno", None)
    if code is None or code in RETRIED_COORDINATOR_ERRORS:
        return None
    prefix = f"DescribeTransactions request for transactionalId `{transactional_id}` failed"
    return {53: f"{prefix} due to authorization failure",
            105: f"{prefix} because the ID could not be found"}.get(code, f"{prefix} due to unexpected error")


def state_name(state: Any) -> str:
    return getattr(state, "value", state)


def list_rows(by_broker: dict[int, list[Any]]) -> list[list[str]]:
    return [[t.transactional_id, str(broker), str(t.producer_id), state_name(t.state)]
            for broker in sorted(by_broker) for t in by_broker[broker]]


def describe_row(transactional_id: str, d: Any, now_ms: int) -> list[str]:
    start = d.transaction_start_time_ms
    partitions = java_hash_order(sorted(d.topic_partitions, key=lambda tp: (tp.topic, tp.partition)),
                                 lambda tp: topic_partition_hash(tp.topic, tp.partition))
    return [str(d.coordinator_id), transactional_id, str(d.producer_id), str(d.producer_epoch), state_name(d.state),
            str(d.transaction_timeout_ms), optional(start), "None" if start < 0 else str(now_ms - start),
            ",".join(common.tp_name(tp.topic, tp.partition) for tp in partitions)]


def producer_rows(state: Any) -> list[list[str]]:
    return [[str(p.producer_id), str(p.producer_epoch),
             str(p.coordinator_epoch if p.coordinator_epoch >= 0 else -1), str(p.last_sequence),
             str(p.last_timestamp), optional(p.current_transaction_start_offset)]
            for p in state.active_producers]


def _run(args: argparse.Namespace) -> int:
    from kafka import TopicPartition
    import kafka.errors as Errors

    with common.admin_client(args) as admin:
        if args.verb == "list":
            try:
                result = admin.list_transactions(duration_filter_ms=args.duration_filter)
            except Errors.KafkaError as e:
                raise failure("Failed to list transactions", e) from None
            lines = table_lines(LIST_HEADERS, list_rows(result))
        elif args.verb == "describe":
            try:
                described = admin.describe_transactions([args.transactional_id])[args.transactional_id]
            except Errors.KafkaError as e:
                raise failure(f"Failed to describe transaction state of transactional-id `{args.transactional_id}`",
                              e, describe_transactions_reason(args.transactional_id, e)) from None
            lines = table_lines(DESCRIBE_HEADERS, [describe_row(args.transactional_id, described,
                                                                int(time.time() * 1000))])
        else:
            tp = TopicPartition(args.topic, args.partition)
            where = "leader" if args.broker_id is None else f"broker {args.broker_id}"
            try:
                state = admin.describe_producers([tp], broker_id=args.broker_id)[tp]
            except Errors.KafkaError as e:
                raise failure(f"Failed to describe producers for partition {common.tp_name(*tp)} on {where}",
                              e) from None
            lines = table_lines(PRODUCERS_HEADERS, producer_rows(state))
    common.print_lines(lines)
    return 0
