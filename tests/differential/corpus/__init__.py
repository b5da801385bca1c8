"""The differential corpus: every module here (except `steps`) defines `CASES`, a list of
`framework.Case` records. Add a case by appending a record; add an API by adding a module."""
from __future__ import annotations

import importlib
import pkgutil

from tests.differential.framework import Case


def all_cases() -> list[Case]:
    cases: list[Case] = []
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if info.name == "steps":
            continue
        cases.extend(importlib.import_module(f"{__name__}.{info.name}").CASES)
    names = [c.name for c in cases]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    assert not duplicates, f"case names must be unique: {duplicates}"
    return cases
