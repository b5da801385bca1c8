"""kafka-python's package __init__ deferred (kafkalite.protocol.kafka_python_package): the
protocol engine imports without the clients, and the clients are still there when asked for.
Each case runs in a fresh interpreter: the test process has imported kafka already."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import kafka


def run_fresh(code: str) -> dict:
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                         timeout=120, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def test_protocol_modules_import_without_the_clients() -> None:
    result = run_fresh("""
        import json, sys
        from kafkalite.protocol.kafka_python_package import defer_package_init, package_init_deferred
        first = defer_package_init()
        again = defer_package_init()
        import kafka.protocol.metadata, kafka.errors
        from kafka import codec          # a submodule asked for as an attribute
        from kafka.record import MemoryRecords
        import kafkalite.server.broker
        print(json.dumps({"first": first, "again": again, "deferred": package_init_deferred(sys.modules["kafka"]),
                          "codec": codec.__name__,
                          "loaded": sorted(m for m in ("kafka.admin", "kafka.consumer", "kafka.producer", "kafka.net")
                                           if m in sys.modules)}))
    """)
    assert result == {"first": True, "again": False, "deferred": True, "codec": "kafka.codec", "loaded": []}


def test_the_clients_come_with_the_first_other_attribute() -> None:
    result = run_fresh("""
        import json, sys
        from kafkalite.protocol.kafka_python_package import defer_package_init, package_init_deferred
        defer_package_init()
        import kafka.protocol.metadata
        module = sys.modules["kafka"]
        from kafka import KafkaConsumer, KafkaProducer, TopicPartition, __version__
        try:
            kafka_missing = module.NoSuchThing
            missing = "no error"
        except AttributeError as e:
            missing = str(e)
        namespace = {}
        exec("from kafka import *", namespace)
        print(json.dumps({"same_module": module is sys.modules["kafka"], "deferred": package_init_deferred(module),
                          "consumer": KafkaConsumer.__module__, "producer": KafkaProducer.__module__,
                          "tp": TopicPartition("t", 1).partition, "version": __version__, "missing": missing,
                          "star": sorted(k for k in namespace if not k.startswith("__")),
                          "null_handlers": [type(h).__name__ for h in __import__("logging").getLogger("kafka").handlers]}))
    """)
    assert result == {"same_module": True, "deferred": False,
                      "consumer": "kafka.consumer.group", "producer": "kafka.producer.kafka", "tp": 1,
                      "version": kafka.__version__, "missing": "module 'kafka' has no attribute 'NoSuchThing'",
                      "star": sorted(kafka.__all__), "null_handlers": ["NullHandler"]}


def test_nothing_is_done_when_kafka_is_imported_already() -> None:
    result = run_fresh("""
        import json, sys
        import kafka
        from kafkalite.protocol.kafka_python_package import defer_package_init, package_init_deferred
        print(json.dumps({"done": defer_package_init(), "deferred": package_init_deferred(sys.modules["kafka"]),
                          "same": sys.modules["kafka"] is kafka}))
    """)
    assert result == {"done": False, "deferred": False, "same": True}
