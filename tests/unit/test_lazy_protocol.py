"""Each API's protocol classes and handler load on first use (kafkalite.protocol.messages,
kafkalite.server.handler.lazy_spec): the tables that say where they are, checked against what an
import of everything defines, and lazily loaded classes encoding the same bytes as eagerly loaded
ones for every version. Fresh interpreters where the loading order matters (this process has
imported everything)."""
from __future__ import annotations

import importlib
import json
import pkgutil
import subprocess
import sys
import textwrap

from kafka.protocol.api_message import ApiMessage

import kafkalite.server.handlers
from kafkalite.protocol.messages import API_MODULES, messages_for
from kafkalite.server.handler import HANDLER_VERSIONS

# every module defining kafka-python's API classes, and kafkalite's own
CODEC_MODULES = ("kafka.protocol.metadata", "kafka.protocol.producer", "kafka.protocol.consumer",
                 "kafka.protocol.admin", "kafka.protocol.sasl", "kafkalite.protocol.inter_broker")


def _subclasses(cls: type) -> list[type]:
    out = []
    for sub in cls.__subclasses__():
        out += [sub, *_subclasses(sub)]
    return out


def test_api_modules_name_where_every_api_key_is_defined() -> None:
    for name in CODEC_MODULES:
        importlib.import_module(name)
    pairs: dict[int, dict[str, type]] = {}
    for cls in _subclasses(ApiMessage):
        if getattr(cls, "_class_version", None) is None and getattr(cls, "_json", None) is not None:
            pairs.setdefault(cls.API_KEY, {})[cls.type] = cls
    eager = {key: kinds for key, kinds in pairs.items() if set(kinds) == {"request", "response"}}
    assert len(eager) == 57
    assert {key: kinds["request"].__module__ for key, kinds in eager.items()} == API_MODULES
    for key, kinds in eager.items():
        msgs = messages_for(key)
        assert msgs is not None and (msgs.request, msgs.response) == (kinds["request"], kinds["response"])
    assert messages_for(38) is None and messages_for(1000) is None   # no classes: the connection closes


def test_handler_versions_are_each_modules_own() -> None:
    modules = {m.name: importlib.import_module(f"kafkalite.server.handlers.{m.name}")
               for m in pkgutil.iter_modules(kafkalite.server.handlers.__path__)}
    own = {name: (m.API_KEY, m.MIN_VERSION, m.MAX_VERSION) for name, m in modules.items() if hasattr(m, "API_KEY")}
    assert own == HANDLER_VERSIONS
    assert len(own) == 43 and len({key for key, _, _ in own.values()}) == 43
    assert {key for key, _, _ in own.values()} <= set(API_MODULES)    # every served API has its classes


_ENCODINGS = """
    import hashlib, json, sys
    from kafkalite.protocol.kafka_python_package import defer_package_init, defer_protocol_package_inits
    defer_package_init()
    lazy = sys.argv[1] == "lazy"
    if lazy:
        deferred = defer_protocol_package_inits()
        assert len(deferred) == 4, deferred
    else:
        import kafka.protocol.metadata, kafka.protocol.producer, kafka.protocol.consumer, kafka.protocol.admin
        import kafka.protocol.sasl, kafkalite.protocol.inter_broker
    from kafkalite.protocol.messages import API_MODULES, messages_for
    out = {}
    for key in sorted(API_MODULES):
        msgs = messages_for(key)
        loaded = sorted(m for m in set(API_MODULES.values()) if m in sys.modules)
        for cls in (msgs.request, msgs.response):
            low, high = cls._valid_versions
            for v in range(low, high + 1):
                out[f"{key} {cls.__module__}.{cls.__name__} v{v}"] = hashlib.sha256(cls[v]().encode(version=v)).hexdigest()
        if lazy and key == 14:   # the modules of keys 0-14 loaded, and only those
            out["modules after key 14"] = loaded
    print(json.dumps(out))
"""


def test_lazily_loaded_classes_encode_the_same_bytes_as_eagerly_loaded_ones() -> None:
    def run(mode: str) -> dict[str, str]:
        r = subprocess.run([sys.executable, "-c", textwrap.dedent(_ENCODINGS), mode], capture_output=True,
                           text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        return json.loads(r.stdout.strip().splitlines()[-1])

    lazy, eager = run("lazy"), run("eager")
    assert lazy.pop("modules after key 14") == sorted({API_MODULES[key] for key in range(15)})
    assert len(lazy) == 538     # every (api, request/response, version)
    assert lazy == eager
