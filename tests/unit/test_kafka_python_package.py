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


# Counts the runs of kafka/__init__.py (through the loader the deferral captured) and makes each
# one slow, so that a second thread asks while the first is inside it; FAIL_FIRST makes the first run
# raise half-way (after the package set some names), as an `__init__` that hits an error would.
COUNTED_INIT = """
    import importlib.machinery, json, sys, threading, time
    runs = []
    real_exec = importlib.machinery.SourceFileLoader.exec_module

    def counted_exec(self, module):
        if module.__name__ != "kafka":
            return real_exec(self, module)
        runs.append(threading.current_thread().name)
        time.sleep(0.3)
        if FAIL_FIRST and len(runs) == 1:
            module.__dict__["__title__"] = "kafka"
            raise ImportError("the first init failed")
        return real_exec(self, module)

    importlib.machinery.SourceFileLoader.exec_module = counted_exec
    from kafkalite.protocol.kafka_python_package import defer_package_init, package_init_deferred
    defer_package_init()
"""


def test_concurrent_first_accesses_run_the_init_once_and_all_get_the_name() -> None:
    result = run_fresh("FAIL_FIRST = False\n" + textwrap.dedent(COUNTED_INIT) + textwrap.dedent("""
        barrier = threading.Barrier(2)
        got = {}

        def consumer_class():
            barrier.wait()
            try:
                from kafka import KafkaConsumer
                got[threading.current_thread().name] = KafkaConsumer.__module__
            except Exception as e:
                got[threading.current_thread().name] = f"{type(e).__name__}: {e}"

        threads = [threading.Thread(target=consumer_class, name=f"t{i}") for i in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        print(json.dumps({"got": got, "runs": len(runs), "deferred": package_init_deferred(sys.modules["kafka"]),
                          "handlers": [type(h).__name__ for h in __import__("logging").getLogger("kafka").handlers]}))
    """))
    assert result == {"got": {"t0": "kafka.consumer.group", "t1": "kafka.consumer.group"}, "runs": 1,
                      "deferred": False, "handlers": ["NullHandler"]}


def test_a_failed_init_keeps_the_hook_and_the_next_access_runs_it_again() -> None:
    result = run_fresh("FAIL_FIRST = True\n" + textwrap.dedent(COUNTED_INIT) + textwrap.dedent("""
        module = sys.modules["kafka"]
        try:
            from kafka import KafkaProducer
            first = "no error"
        except ImportError as e:
            first = str(e)
        after_failure = package_init_deferred(module)
        handlers_after_failure = len(__import__("logging").getLogger("kafka").handlers)
        from kafka import KafkaProducer
        print(json.dumps({"first": first, "after_failure": after_failure, "runs": len(runs),
                          "handlers_after_failure": handlers_after_failure,
                          "producer": KafkaProducer.__module__, "deferred": package_init_deferred(module),
                          "handlers": [type(h).__name__ for h in __import__("logging").getLogger("kafka").handlers]}))
    """))
    assert result == {"first": "the first init failed", "after_failure": True, "runs": 2,
                      "handlers_after_failure": 1,
                      "producer": "kafka.producer.kafka", "deferred": False, "handlers": ["NullHandler"]}
