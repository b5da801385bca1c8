"""ApiVersions (18): the advertised ranges are compared separately (test_api_versions.py); here
the request's own error handling, which every client meets first."""
from __future__ import annotations

import struct

from tests.differential.compare import NOT_COMPARED
from tests.differential.framework import Case

API_VERSIONS = 18
# The ranges differ by design (see docs/compatibility.md, "Differential results").
RANGES = {"api_keys": NOT_COMPARED + "the ranges are compared API by API in test_api_versions_differential"}


def _frame(version: int, body: bytes, corr: int = 7) -> bytes:
    payload = struct.pack(">hhih", API_VERSIONS, version, corr, 4) + b"diff" + body
    return struct.pack(">i", len(payload)) + payload


CASES = [
    Case(f"api_versions_v{v}", API_VERSIONS, v,
         {"client_software_name": "kafkalite-differential", "client_software_version": "1.0"},
         allow=RANGES)
    for v in range(0, 5)
] + [
    Case("api_versions_v3_invalid_software_name", API_VERSIONS, 3,
         {"client_software_name": "-bad name-", "client_software_version": "1.0"}),
    Case("api_versions_v4_empty_software_version", API_VERSIONS, 4,
         {"client_software_name": "ok", "client_software_version": ""}),
    # a version newer than any broker knows: UNSUPPORTED_VERSION in the v0 layout (KIP-511)
    Case("api_versions_v99_unsupported", API_VERSIONS, 99,
         raw=lambda v: _frame(99, b"\x00\x00"), response_version=0),
    Case("api_versions_v3_truncated_body", API_VERSIONS, 3,
         raw=lambda v: _frame(3, b"\x00\x05ab")),
]
