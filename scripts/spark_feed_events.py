#!/usr/bin/env python3
"""Feed JSON events into a Kafka topic for scripts/spark_pipeline.py.

Each event is keyed by its user and looks like
    {"user": "user-3", "amount": 12.5, "event_time_ms": 1767225600000}

    python scripts/spark_feed_events.py --bootstrap-servers 127.0.0.1:9092 --count 2000 --rate 200

`--rate 0` sends as fast as possible. Event times are the wall clock unless `--start-ms` is
given, then they start there and advance `--step-ms` per event (reproducible input, as the
tests use). The topic is created (3 partitions) if missing.
"""
from __future__ import annotations

import argparse
import json
import random
import sys
import time
from typing import Iterator, Optional

from kafka import KafkaProducer
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.errors import TopicAlreadyExistsError


def make_events(count: int, users: int = 5, seed: int = 1, start_ms: Optional[int] = None,
                step_ms: int = 100) -> Iterator[dict]:
    """`count` events over `users` users; amounts are whole cents so sums are exact."""
    rng = random.Random(seed)
    for i in range(count):
        event_time = (start_ms + i * step_ms) if start_ms is not None else int(time.time() * 1000)
        yield {"user": f"user-{rng.randrange(users)}",
               "amount": rng.randrange(1, 10_000) / 100,
               "event_time_ms": event_time}


def ensure_topic(bootstrap_servers: str, topic: str, partitions: int = 3) -> None:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap_servers, client_id="spark-feed-admin")
    try:
        admin.create_topics([NewTopic(topic, partitions, 1)])
    except TopicAlreadyExistsError:
        pass
    finally:
        admin.close()


def feed(bootstrap_servers: str, topic: str, events: Iterator[dict], rate: float = 0) -> int:
    """Send every event (key = user) and wait for the acknowledgements; returns the count."""
    producer = KafkaProducer(bootstrap_servers=bootstrap_servers, linger_ms=5,
                             client_id="spark-feed-events")
    sent = 0
    started = time.monotonic()
    try:
        for event in events:
            producer.send(topic, key=event["user"].encode(), value=json.dumps(event).encode())
            sent += 1
            if rate > 0:  # pace against the start so rounding does not accumulate
                delay = started + sent / rate - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
        producer.flush(timeout=60)
    finally:
        producer.close()
    return sent


def main(argv: Optional[list[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bootstrap-servers", default="127.0.0.1:9092")
    ap.add_argument("--topic", default="events")
    ap.add_argument("--count", type=int, default=2000)
    ap.add_argument("--rate", type=float, default=200.0, help="events per second (0: unpaced)")
    ap.add_argument("--users", type=int, default=5)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--start-ms", type=int, default=None)
    ap.add_argument("--step-ms", type=int, default=100)
    args = ap.parse_args(argv)
    ensure_topic(args.bootstrap_servers, args.topic)
    n = feed(args.bootstrap_servers, args.topic,
             make_events(args.count, args.users, args.seed, args.start_ms, args.step_ms), args.rate)
    print(f"sent {n} events to {args.topic}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
