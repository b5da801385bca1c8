#!/usr/bin/env python3
"""Exactly-once consume-transform-produce with confluent-kafka: input topic -> output topic.

Each output record is `--prefix` + the input value, with the input key, on the input record's
partition number. The input offsets are sent in the same transaction
(send_offsets_to_transaction), so after any crash the output holds every input exactly once:
a transaction either commits both its output records and the consumer offsets, or neither.

    python scripts/eos_transform.py --bootstrap HOST:PORT --input IN --output OUT \\
        --group G --transactional-id TID [--commit-every 50] [--idle-exit-s 3]

The consumer reads with isolation.level=read_committed. By default (`--mode assign`) it assigns
every input partition and starts from the group's committed offsets, without joining the group
(no rebalance wait after a restart; the transactional.id alone fences a previous instance);
`--mode subscribe` joins the group instead and commits with its generation.

Progress goes to stdout as JSON lines: {"event": "ready"}, {"event": "open", ...} once the first
half of a transaction is written and flushed (the transaction is then open in the log),
{"event": "committed", ...} after each commit, {"event": "done", ...} at the end.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any, Optional

import confluent_kafka as ck


def emit(**kv: Any) -> None:
    print(json.dumps(kv), flush=True)


def parse_args(argv: Optional[list[str]] = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--input", required=True)
    ap.add_argument("--output", required=True)
    ap.add_argument("--group", required=True)
    ap.add_argument("--transactional-id", required=True)
    ap.add_argument("--commit-every", type=int, default=50, help="input records per transaction")
    ap.add_argument("--idle-exit-s", type=float, default=0.0,
                    help="exit after this long without input (0: run until killed)")
    ap.add_argument("--delay-ms", type=float, default=0.0,
                    help="sleep per record (to make a transaction last long enough to be killed in)")
    ap.add_argument("--pause-open-ms", type=float, default=0.0,
                    help="sleep this long after each 'open' event (a slow step mid-transaction)")
    ap.add_argument("--prefix", default="T:")
    ap.add_argument("--mode", choices=("assign", "subscribe"), default="assign")
    ap.add_argument("--transaction-timeout-ms", type=int, default=60000)
    return ap.parse_args(argv)


class Transformer:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.producer = ck.Producer({
            "bootstrap.servers": args.bootstrap,
            "transactional.id": args.transactional_id,
            "transaction.timeout.ms": args.transaction_timeout_ms,
            "linger.ms": 5,
        })
        self.consumer = ck.Consumer({
            "bootstrap.servers": args.bootstrap,
            "group.id": args.group,
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "enable.partition.eof": False,
            "session.timeout.ms": 6000,
        })
        self.positions: dict[int, int] = {}  # input partition -> next offset (this transaction)
        self.in_txn = 0
        self.total = 0
        self.transactions = 0
        self.aborts = 0

    def start(self) -> None:
        # init_transactions first: it fences a previous instance and aborts its open transaction,
        # so the committed offsets read next are stable.
        self.producer.init_transactions(60)
        if self.args.mode == "assign":
            md = self.consumer.list_topics(self.args.input, timeout=30)
            parts = sorted(md.topics[self.args.input].partitions)
            self.consumer.assign([ck.TopicPartition(self.args.input, p) for p in parts])
        else:
            self.consumer.subscribe([self.args.input], on_revoke=self._on_revoke)
        self.producer.begin_transaction()
        emit(event="ready", mode=self.args.mode)

    def _on_revoke(self, _c: ck.Consumer, _parts: list[ck.TopicPartition]) -> None:
        # Partitions move away: what was read of them must not be committed by this instance.
        if self.in_txn:
            self._abort_and_rewind()

    def _commit(self) -> None:
        offsets = [ck.TopicPartition(self.args.input, p, o) for p, o in sorted(self.positions.items())]
        while True:
            try:
                self.producer.send_offsets_to_transaction(
                    offsets, self.consumer.consumer_group_metadata(), 30)
                self.producer.commit_transaction(30)
                break
            except ck.KafkaException as e:
                err = e.args[0]
                if err.retriable():
                    continue
                if err.txn_requires_abort():
                    self._abort_and_rewind()
                    return
                raise
        self.transactions += 1
        self.total += self.in_txn
        emit(event="committed", count=self.in_txn, total=self.total, transactions=self.transactions,
             offsets={str(p): o for p, o in sorted(self.positions.items())})
        self.in_txn = 0
        self.positions.clear()
        self.producer.begin_transaction()

    def _abort_and_rewind(self) -> None:
        """Abort the transaction and go back to the committed offsets of what it had read."""
        self.producer.abort_transaction(30)
        self.aborts += 1
        if self.positions:
            committed = self.consumer.committed(
                [ck.TopicPartition(self.args.input, p) for p in self.positions], timeout=30)
            for tp in committed:
                self.consumer.seek(ck.TopicPartition(
                    tp.topic, tp.partition, tp.offset if tp.offset >= 0 else ck.OFFSET_BEGINNING))
        emit(event="aborted", discarded=self.in_txn)
        self.in_txn = 0
        self.positions.clear()
        self.producer.begin_transaction()

    def run(self) -> int:
        half = max(1, self.args.commit_every // 2)
        last_input = time.monotonic()
        while True:
            want = self.args.commit_every - self.in_txn
            msgs = self.consumer.consume(min(want, 500), 0.2)
            for m in msgs:
                if m.error() is not None:
                    if m.error().fatal():
                        raise ck.KafkaException(m.error())
                    continue
                value = m.value()
                self.producer.produce(self.args.output, key=m.key(),
                                      value=self.args.prefix.encode() + (value or b""),
                                      partition=m.partition())
                self.positions[m.partition()] = m.offset() + 1
                self.in_txn += 1
                last_input = time.monotonic()
                if self.args.delay_ms:
                    time.sleep(self.args.delay_ms / 1000)
                if self.in_txn == half:
                    self.producer.flush(30)
                    emit(event="open", pending=self.in_txn, total=self.total)
                    if self.args.pause_open_ms:
                        time.sleep(self.args.pause_open_ms / 1000)
            self.producer.poll(0)
            idle = time.monotonic() - last_input
            if self.in_txn >= self.args.commit_every or (self.in_txn and (not msgs or idle > 0.5)):
                self._commit()
            elif self.args.idle_exit_s and not self.in_txn and idle > self.args.idle_exit_s:
                break
        self.producer.abort_transaction(30)  # the empty one begun after the last commit
        emit(event="done", total=self.total, transactions=self.transactions, aborts=self.aborts)
        self.consumer.close()
        self.producer.flush(10)
        return 0


def main(argv: Optional[list[str]] = None) -> int:
    t = Transformer(parse_args(argv))
    t.start()
    return t.run()


if __name__ == "__main__":
    sys.exit(main())
