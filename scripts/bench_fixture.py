#!/usr/bin/env python3
"""Start-to-ready of kafkalite's test brokers (issue 6), next to librdkafka's mock cluster.

Rows (median of --starts, default 20, each start fresh: new temp dir, new port):
  broker      -- kafkalite.testing.Broker().start(): spawn of the broker process to its ready
                 line read by the parent; also the broker's own "started in", the whole
                 Broker() + start() call, the first create_topic() and close().
  broker-pyc  -- the same with a bytecode cache for the child (a fresh PYTHONPYCACHEPREFIX, one
                 unmeasured warm-up start; PYTHONDONTWRITEBYTECODE removed): what an installed
                 wheel gives, where every module is compiled at install time.
  fixture     -- the pytest fixture: `python -m pytest` on a one-test file that asks for
                 kafkalite_broker, timed by a hookwrapper around that fixture's setup (the fixture
                 only, not pytest's own start); one pytest process per start.
  mock        -- librdkafka's mock cluster, in-process, creation until it answers a Metadata
                 request (scripts/bench.py's measure_mock_start). Not a broker process: for
                 orientation only.

Usage:
  python scripts/bench_fixture.py [--starts N] [--only broker,broker-pyc,fixture,mock] [--json OUT]
"""
from __future__ import annotations

import argparse
import datetime as _dt
import importlib.util
import json
import os
import platform
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any, Callable, Optional

REPO_ROOT = Path(__file__).resolve().parent.parent
ROWS = ("broker", "broker-pyc", "fixture", "mock")

FIXTURE_CONFTEST = textwrap.dedent("""
    import json, os, time
    import pytest

    @pytest.hookimpl(hookwrapper=True)
    def pytest_fixture_setup(fixturedef, request):
        t0 = time.perf_counter()
        yield
        if fixturedef.argname == "kafkalite_broker":
            with open(os.environ["KAFKALITE_BENCH_OUT"], "a") as f:
                f.write(json.dumps({"setup_s": time.perf_counter() - t0}) + "\\n")
""")
FIXTURE_TEST = textwrap.dedent("""
    def test_uses_the_broker(kafkalite_broker):
        assert kafkalite_broker.running
""")


def log(msg: str) -> None:
    print(f"[bench_fixture] {msg}", file=sys.stderr, flush=True)


def measure_broker() -> dict[str, float]:
    from kafkalite.testing import Broker

    t0 = time.perf_counter()
    b = Broker()
    try:
        b.start()
        t1 = time.perf_counter()
        b.create_topic("bench")
        t2 = time.perf_counter()
    finally:
        t3 = time.perf_counter()
        b.close()
        t4 = time.perf_counter()
    assert b.startup_seconds is not None
    return {"spawn_to_ready_s": b.startup_seconds,
            "started_in_s": b.reported_startup_seconds or float("nan"),
            "call_s": t1 - t0, "create_topic_s": t2 - t1, "close_s": t4 - t3}


def measure_fixture(workdir: Path) -> dict[str, float]:
    out = workdir / "out.jsonl"
    out.unlink(missing_ok=True)
    env = {**os.environ, "KAFKALITE_BENCH_OUT": str(out)}
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                        "test_fixture_bench.py"], cwd=workdir, env=env, capture_output=True,
                       text=True, timeout=120)
    wall = time.perf_counter() - t0
    if r.returncode != 0 or not out.exists():
        raise RuntimeError(f"pytest exited {r.returncode}:\n{r.stdout[-2000:]}{r.stderr[-2000:]}")
    (line,) = out.read_text().splitlines()
    return {"setup_s": json.loads(line)["setup_s"], "pytest_wall_s": wall}


def load_mock_start() -> Callable[[], float]:
    spec = importlib.util.spec_from_file_location("kafkalite_bench", REPO_ROOT / "scripts" / "bench.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod   # its dataclasses look their module up there
    spec.loader.exec_module(mod)
    return mod.measure_mock_start


def median_ms(runs: list[dict[str, float]], key: str) -> Optional[float]:
    vals = [r[key] * 1000 for r in runs if key in r and r[key] == r[key]]  # skip NaN
    return statistics.median(vals) if vals else None


def fmt(v: Optional[float]) -> str:
    return "n/a" if v is None else f"{v:.0f}"


def main(argv: Optional[list[str]] = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--starts", type=int, default=20, help="starts per row (median reported)")
    ap.add_argument("--only", default=",".join(ROWS), help="rows: " + ",".join(ROWS))
    ap.add_argument("--json", metavar="OUT", help="also write every run as JSON")
    args = ap.parse_args(argv)
    rows = [r.strip() for r in args.only.split(",") if r.strip()]
    bad = [r for r in rows if r not in ROWS]
    if bad:
        ap.error(f"unknown rows {bad}; choose from {','.join(ROWS)}")

    env_info = {
        "date": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "command": "python scripts/bench_fixture.py " + " ".join(shlex.quote(a) for a in argv),
        "git_commit": subprocess.run(["git", "-C", str(REPO_ROOT), "rev-parse", "--short", "HEAD"],
                                     capture_output=True, text=True).stdout.strip(),
        "python": platform.python_version(), "cpus": os.cpu_count(),
        "loadavg_at_start": os.getloadavg(),
        "PYTHONDONTWRITEBYTECODE": os.environ.get("PYTHONDONTWRITEBYTECODE", ""),
    }
    log(f"{env_info['date']} commit {env_info['git_commit']} load {env_info['loadavg_at_start']}")
    runs: dict[str, list[dict[str, float]]] = {r: [] for r in rows}
    failures: list[str] = []
    work = Path(tempfile.mkdtemp(prefix="kafkalite-bench-fixture-"))
    saved_env = dict(os.environ)
    try:
        (work / "conftest.py").write_text(FIXTURE_CONFTEST)
        (work / "test_fixture_bench.py").write_text(FIXTURE_TEST)
        mock_start = load_mock_start() if "mock" in rows else None
        for i in range(args.starts):
            # Rotate the order every start, so no row always runs right after another.
            order = rows[i % len(rows):] + rows[:i % len(rows)]
            for row in order:
                try:
                    if row == "broker":
                        runs[row].append(measure_broker())
                    elif row == "broker-pyc":
                        os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
                        os.environ["PYTHONPYCACHEPREFIX"] = str(work / "pycache")
                        try:
                            if i == 0:
                                measure_broker()   # warm-up: writes the cache
                            runs[row].append(measure_broker())
                        finally:
                            os.environ.clear()
                            os.environ.update(saved_env)
                    elif row == "fixture":
                        runs[row].append(measure_fixture(work))
                    elif row == "mock":
                        assert mock_start is not None
                        runs[row].append({"ready_s": mock_start()})
                except Exception as e:  # noqa: BLE001 -- reported below, never hidden
                    failures.append(f"{row} start {i}: {e!r}")
                    log(f"FAILED {row} start {i}: {e!r}")
            log(f"start {i + 1}/{args.starts} done")
    finally:
        os.environ.clear()
        os.environ.update(saved_env)
        shutil.rmtree(work, ignore_errors=True)
    env_info["loadavg_at_end"] = os.getloadavg()

    n = {r: len(v) for r, v in runs.items()}
    lines = ["| measurement | median (ms) | runs |", "|---|---:|---:|"]
    if "broker" in runs:
        b = runs["broker"]
        lines += [f"| `Broker().start()`: spawn to ready line | {fmt(median_ms(b, 'spawn_to_ready_s'))} | {n['broker']} |",
                  f"| — the broker's own \"started in\" | {fmt(median_ms(b, 'started_in_s'))} | {n['broker']} |",
                  f"| — the whole `Broker()` + `start()` call | {fmt(median_ms(b, 'call_s'))} | {n['broker']} |",
                  f"| `create_topic()`, first call in the process (imports kafka-python's codec) | {fmt(median_ms(b[:1], 'create_topic_s'))} | {min(1, n['broker'])} |",
                  f"| `create_topic()`, later calls (one per fresh broker) | {fmt(median_ms(b[1:], 'create_topic_s'))} | {max(0, n['broker'] - 1)} |",
                  f"| `close()` (SIGTERM, clean shutdown, temp dir removed) | {fmt(median_ms(b, 'close_s'))} | {n['broker']} |"]
    if "broker-pyc" in runs:
        b = runs["broker-pyc"]
        lines += [f"| `Broker().start()` with a bytecode cache: spawn to ready line | {fmt(median_ms(b, 'spawn_to_ready_s'))} | {n['broker-pyc']} |",
                  f"| — the broker's own \"started in\" | {fmt(median_ms(b, 'started_in_s'))} | {n['broker-pyc']} |"]
    if "fixture" in runs:
        f = runs["fixture"]
        lines += [f"| pytest fixture `kafkalite_broker` setup | {fmt(median_ms(f, 'setup_s'))} | {n['fixture']} |",
                  f"| — whole `python -m pytest` run of that one test | {fmt(median_ms(f, 'pytest_wall_s'))} | {n['fixture']} |"]
    if "mock" in runs:
        m = runs["mock"]
        lines += [f"| librdkafka mock cluster: creation to first Metadata answer (in-process) | "
                  f"{fmt(median_ms(m, 'ready_s'))} | {n['mock']} |",
                  f"| — its first creation in the process (loads librdkafka's mock) | "
                  f"{fmt(median_ms(m[:1], 'ready_s'))} | {min(1, n['mock'])} |"]
    print("\n".join(lines))
    if failures:
        print("\nFAILED:\n" + "\n".join(f"- {f}" for f in failures))
    log(f"load at end {env_info['loadavg_at_end']}")
    if args.json:
        Path(args.json).write_text(json.dumps({"environment": env_info, "runs": runs,
                                               "failures": failures}, indent=1))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
