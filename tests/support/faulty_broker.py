"""Run a kafkalite broker whose handlers fail on demand — test-only fault injection.

    python tests/support/faulty_broker.py serve --override ...

Every API handler is wrapped so that a request whose client id is FAULT_CLIENT_ID raises
``RuntimeError`` inside the handler, before the real handler runs (so nothing it would do happens);
every other request reaches the real handler untouched. The wrapping happens here, in a launcher
that only the tests run: nothing in the kafkalite package can trigger it.
"""
from __future__ import annotations

import sys
from dataclasses import replace
from typing import Any

FAULT_CLIENT_ID = "kafkalite-inject-fault"
FAULT_MESSAGE = "injected fault"


def _faulty(spec: Any) -> Any:
    handler = spec.handler

    async def handle(ctx: Any, request: Any) -> Any:
        if ctx.client_id == FAULT_CLIENT_ID:
            raise RuntimeError(f"{FAULT_MESSAGE} in api {spec.api_key} v{ctx.api_version}")
        return await handler(ctx, request)

    return replace(spec, handler=handle)


def install() -> None:
    from kafkalite.server.kafka_apis import KafkaApis

    original_init = KafkaApis.__init__

    def init(self: Any, specs: list[Any]) -> None:
        original_init(self, [_faulty(s) for s in specs])

    KafkaApis.__init__ = init  # type: ignore[method-assign]


if __name__ == "__main__":
    install()
    from kafkalite.cli import main

    sys.exit(main(sys.argv[1:]))
