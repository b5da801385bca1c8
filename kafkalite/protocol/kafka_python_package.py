"""kafka-python's package `__init__` deferred in the broker process.

The broker uses kafka-python as its protocol engine only (`kafka.protocol`, `kafka.record`,
`kafka.codec`, `kafka.errors`), but importing any of those runs `kafka/__init__.py` first, which
imports the admin client, consumer, producer and network stack (~0.2-0.3 s of a broker's start-up
here, and most of its import time). `defer_package_init` registers the `kafka` package without
running its `__init__`: submodules import as usual, and the first attribute that is not a
submodule (`from kafka import KafkaConsumer`, `kafka.__version__`) runs the real `__init__` into
the same module, so code that wants the clients still gets them. That init runs once, under a
lock (threads asking at the same time wait for it), and the hook goes only when it has succeeded.

`defer_protocol_package_inits` does the same for kafka-python's protocol packages
(`kafka.protocol.admin`, `.consumer`, `.producer`, `.metadata`), whose `__init__` imports every
API module of the package (each builds its message classes from their JSON schemas at import,
~0.1 s for all): the broker imports the module of an API (`kafka.protocol.admin.topics`) when it
first needs it; `from kafka.protocol.admin import CreateTopicsRequest` still works (it runs the
package's `__init__`)."""
from __future__ import annotations

import importlib
import importlib.util
import logging
import sys
import threading
from types import ModuleType
from typing import Any

PACKAGE = "kafka"
PROTOCOL_PACKAGES = ("kafka.protocol.admin", "kafka.protocol.consumer", "kafka.protocol.producer",
                     "kafka.protocol.metadata")


def defer_protocol_package_inits() -> list[str]:
    """`defer_package_init` for each of kafka-python's protocol packages; the names deferred."""
    return [name for name in PROTOCOL_PACKAGES if defer_package_init(name)]


def defer_package_init(package: str = PACKAGE) -> bool:
    """Register `package` with its `__init__` deferred; False (and nothing done) when it is already
    imported or is not a plain package on disk."""
    if package in sys.modules:
        return False
    spec = importlib.util.find_spec(package)   # imports the parent package, if any
    if spec is None or spec.loader is None or spec.submodule_search_locations is None:
        return False
    module = importlib.util.module_from_spec(spec)
    loader = spec.loader
    # What kafka's real `__init__` does for logging, until it has run (then it has done it itself)
    null_handler = logging.NullHandler()
    if package == PACKAGE:
        logging.getLogger(PACKAGE).addHandler(null_handler)
    # One init, whichever threads ask at once: the others wait for it rather than find neither the
    # hook nor the names. Re-entrant because the `__init__`'s own imports come back through the hook
    # (on the same thread) while it runs.
    lock = threading.RLock()
    initializing = False

    def run_package_init() -> None:
        nonlocal initializing
        with lock:
            if initializing or "__getattr__" not in module.__dict__:
                return  # the `__init__` is running on this thread (re-entry), or has run
            initializing = True
            try:
                loader.exec_module(module)
            finally:
                initializing = False
            # Only after success: when the `__init__` raises, the hook stays and the next access
            # runs it again (as Python re-runs a module whose import failed), and the error goes to
            # the caller that triggered it.
            del module.__dict__["__getattr__"]
            logging.getLogger(PACKAGE).removeHandler(null_handler)   # a no-op if never added

    def __getattr__(name: str) -> Any:
        if not name.startswith("__"):
            # `from kafka import codec` asks the package for the attribute before importing the
            # submodule: import it rather than the whole package.
            try:
                return importlib.import_module(f"{package}.{name}")
            except ModuleNotFoundError as e:
                if e.name != f"{package}.{name}":
                    raise
        run_package_init()
        try:
            return module.__dict__[name]
        except KeyError:
            raise AttributeError(f"module {package!r} has no attribute {name!r}") from None

    module.__getattr__ = __getattr__  # type: ignore[method-assign]
    sys.modules[package] = module
    parent, _, child = package.rpartition(".")
    if parent:
        # what an import binds once the package is loaded: `kafka.protocol.admin` as an attribute
        setattr(sys.modules[parent], child, module)
    return True


def package_init_deferred(module: ModuleType) -> bool:
    """Whether `module` (the `kafka` package, or one of PROTOCOL_PACKAGES) still has its
    `__init__` deferred."""
    return "__getattr__" in module.__dict__
