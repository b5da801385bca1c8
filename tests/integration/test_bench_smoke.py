"""Smoke test of scripts/bench.py: its quickest mode against all three targets (kafkalite, Apache
Kafka 3.9 with its ZooKeeper, librdkafka's mock) must complete and report every figure.

No timing assertions: speed is the benchmark's business, not the tests'. What is checked is that
every measurement ran on every target it applies to, with exact counts where there are counts
(messages read back, rounds, starts, SIGTERM stops), and that the table carries the figures and
the ratios. Two runs: the classic phases with the stall probes on the same brokers, and the scale
phases (many partitions, restart) at a tiny N; each starts every JVM as few times as it can.
"""
from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

# serial (scripts/test.sh): beside another test worker, librdkafka's OffsetFetch in the rebalance
# phase timed out on kafkalite once (not on Kafka, same run)
pytestmark = [pytest.mark.java, pytest.mark.serial]

REPO_ROOT = Path(__file__).resolve().parents[2]
QUICK_MESSAGES = 3000  # bench.py's --quick size, restated so that a change of it is noticed

EVERY = ("kafkalite", "kafka", "mock")
BROKERS = ("kafkalite", "kafka")
# metric -> targets that must have a figure for it
EXPECTED = {
    "produce_mb_s": EVERY,
    "produce_msgs_s": EVERY,
    "consume_mb_s": EVERY,
    "consume_msgs_s": EVERY,
    "consume_messages_read": EVERY,
    "latency_p50_ms": EVERY,
    "latency_p99_ms": EVERY,
    "latency_warm_p50_ms": EVERY,
    "latency_warm_p99_ms": EVERY,
    "start_to_api_versions_ms": EVERY,
    "kafka_with_zookeeper_start_ms": ("kafka",),
    "zookeeper_start_ms": ("kafka",),
    "ready_line_ms": ("kafkalite",),
    "reported_start_ms": ("kafkalite",),
    "rebalance_range_ms": EVERY,
    "rebalance_range_assigned_ms": EVERY,
    "rebalance_cooperative-sticky_ms": EVERY,
    "rebalance_cooperative-sticky_assigned_ms": EVERY,
    "commit_sync_per_s": EVERY,
    "commit_async_per_s": EVERY,
    "commit_broker_cpu_us": BROKERS,
    # The stall probe (scripts/bench_scale.py) on the same brokers, no load and three loads.
    **{f"stall_{load}_{stat}_ms": BROKERS for load in ("idle", "fetch", "flush", "create")
       for stat in ("p99", "max")},
    "stall_create_ms": BROKERS,
}
# table row label -> (cells for kafkalite, Kafka, mock, kafkalite/Kafka, kafkalite/mock):
# "n" a figure, "r" a ratio, "-" none
TABLE = {
    "produce throughput (MB/s)": "nnnrr",
    "produce throughput (msgs/s)": "nnnrr",
    "consume throughput (MB/s)": "nnnr-",
    "consume throughput (msgs/s)": "nnnr-",
    "consume: messages read": "nnn--",
    "produce latency p50, first sends (ms)": "nnnrr",
    "produce latency p99, first sends (ms)": "nnnrr",
    "produce latency p50, after the latency warm-up (ms)": "nnnrr",
    "produce latency p99, after the latency warm-up (ms)": "nnnrr",
    "start-to-ready: spawn to first ApiVersions answered (ms)": "nnnr-",
    "start-to-ready incl. ZooKeeper: its spawn to `ruok` + Kafka's spawn to ApiVersions (ms)":
        "-n-r-",
    "ZooKeeper alone: spawn to `ruok` answered (ms)": "-n---",
    "kafkalite: spawn to its ready line (ms)": "n----",
    "kafkalite: broker's own \"started in\" (ms)": "n----",
    "rebalance 3 -> 4, range (eager): until all four consume (ms)": "nnnr-",
    "rebalance 3 -> 4, range (eager): until last assignment (ms)": "nnnr-",
    "rebalance 3 -> 4, cooperative-sticky: until all four consume (ms)": "nnnr-",
    "rebalance 3 -> 4, cooperative-sticky: until last assignment (ms)": "nnnr-",
    "OffsetCommit, sync (commits/s)": "nnnrr",
    "OffsetCommit, async pipelined (commits/s)": "nnnrr",
    "OffsetCommit: broker CPU per commit (µs)": "nn-r-",
    **{f"other client's ApiVersions {stat}, {what} (ms)": "nn-r-"
       for what in ("no load", "during 1 MiB fetches", "during produce with flush.messages=100",
                    "during CreateTopics of 20 partitions") for stat in ("p99", "max")},
    "CreateTopics of 20 partitions under the probe, until all led (ms)": "nn-r-",
}
STALL_PHASES = "stall-fetch,stall-flush,stall-create"
SCALE_N = 20  # partitions of the scale run
SCALE_EXPECTED = {
    f"produce_p{SCALE_N}_mb_s": EVERY,
    # the same broker and volume again, and over 3 partitions, and the ratio of the two
    f"produce_p{SCALE_N}_again_mb_s": EVERY,
    f"produce_p{SCALE_N}_3same_mb_s": EVERY,
    f"produce_p{SCALE_N}_again_of_3same": EVERY,
    **{f"{m}_p{SCALE_N}{unit}": BROKERS for m, unit in (
        ("create", "_ms"), ("rss", "_mib"), ("rss_per_partition", "_kib"), ("fds", ""),
        ("fds_per_partition", ""), ("shutdown", "_ms"))},
    **{f"restart_{sig}_p{SCALE_N}{what}_ms": BROKERS for sig in ("sigterm", "sigkill")
       for what in ("_leaders", "")},
}


def _number(text: str) -> float:
    """The leading figure of a cell ("1,234", "0.150", "3,000 — what the mock still held")."""
    return float(text.split(" ")[0].replace(",", ""))


def _table_rows(stdout: str) -> dict[str, list[str]]:
    rows = {}
    for line in stdout.splitlines():
        if line.startswith("| ") and not line.startswith("| measurement"):
            cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
            rows[cells[0]] = cells[1:]
    return rows


def _run_bench(tmp_path: Path, *options: str) -> tuple[subprocess.CompletedProcess[str], dict]:
    out_json = tmp_path / "bench.json"
    temp = tmp_path / "tmp"
    temp.mkdir()
    proc = subprocess.run(
        [sys.executable, "scripts/bench.py", "--quick", "--targets", "kafkalite,kafka,mock",
         "--json", str(out_json), *options],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=840,
        env={**os.environ, "TMPDIR": str(temp)})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    assert "FAILED" not in proc.stdout and "failures:" not in proc.stdout, proc.stdout
    # the brokers' directories outlive their brokers (removed at the end, not between
    # measurements) and are gone when the run ends
    assert sorted(p.name for p in temp.iterdir()
                  if p.name.startswith(("kafkalite-bench-", "kafkalite-oracle-"))) == []
    return proc, json.loads(out_json.read_text())


def _check_one_value_each(report: dict, expected: dict[str, tuple[str, ...]],
                          signed: frozenset[str] = frozenset()) -> None:
    """One finite value per metric and target, positive unless the metric is in `signed` (a
    difference, such as VmRSS grown per partition, which the kernel may also see shrink)."""
    runs, medians = report["runs"], report["medians"]
    assert set(runs) == set(expected)
    for metric, targets in expected.items():
        assert set(runs[metric]) == set(targets), metric
        for target in targets:
            # One round (or one start) each, so the median is that one value.
            assert len(runs[metric][target]) == 1, (metric, target)
            value = medians[metric][target]
            assert value == runs[metric][target][0]
            assert math.isfinite(value) and (value > 0 or metric in signed), \
                (metric, target, value)


@pytest.mark.timeout(900)
def test_quick_bench_reports_every_figure_for_every_target(tmp_path: Path) -> None:
    proc, report = _run_bench(
        tmp_path, "--only", "produce,consume,latency,startup,rebalance,commit," + STALL_PHASES)
    assert report["errors"] == {}
    env = report["environment"]
    assert env["targets"] == ["kafkalite", "kafka", "mock"]
    assert env["messages"] == QUICK_MESSAGES and env["repeat"] == 1 and env["starts"] == 1
    assert "-XX:+UseG1GC" in env["kafka_jvm_flags"] and "-Xmx1G" in env["kafka_jvm_flags"]
    assert len(env["loadavg_at_start"]) == 3 and len(env["loadavg_at_end"]) == 3

    _check_one_value_each(report, EXPECTED)
    medians = report["medians"]

    # Both brokers keep everything: all 3,000 values read back (compared byte for byte by the
    # bench); the mock keeps the most recent few MB per partition, so at this size all too.
    for target in EVERY:
        assert medians["consume_messages_read"][target] == QUICK_MESSAGES, target
    assert medians["kafka_with_zookeeper_start_ms"]["kafka"] == pytest.approx(
        medians["zookeeper_start_ms"]["kafka"] + medians["start_to_api_versions_ms"]["kafka"])
    # kafkalite is started twice (the round, which also runs the group and stall phases, and
    # the start-up), Kafka likewise; every SIGTERM must end in a clean exit (kafkalite 0, the
    # JVM 143 after its shutdown hook).
    assert report["kafkalite_exit_codes"] == [0, 0]
    assert report["kafka_exit_codes"] == [143, 143]

    rows = _table_rows(proc.stdout)
    assert "| measurement | kafkalite | Apache Kafka 3.9.1 | librdkafka mock | kafkalite/Kafka " \
           "| kafkalite/mock |" in proc.stdout
    assert set(rows) == set(TABLE)
    for label, kinds in TABLE.items():
        cells = rows[label]
        assert len(cells) == 5, (label, cells)
        for kind, text in zip(kinds, cells):
            if kind == "-":
                assert text == "—", (label, cells)
            else:
                assert _number(text) > 0, (label, cells)
    # The ratios are those of the medians.
    produce = medians["produce_msgs_s"]
    assert _number(rows["produce throughput (msgs/s)"][3]) == pytest.approx(
        produce["kafkalite"] / produce["kafka"], abs=0.006)
    assert _number(rows["produce throughput (msgs/s)"][4]) == pytest.approx(
        produce["kafkalite"] / produce["mock"], abs=0.006)


@pytest.mark.timeout(900)
def test_quick_scale_bench_reports_every_figure(tmp_path: Path) -> None:
    """produce-N and restart-N at N = 20: a fresh broker each, produce spread over N, VmRSS and
    descriptors, restart after SIGTERM and after SIGKILL; the mock produces only."""
    logs = tmp_path / "logs"
    proc, report = _run_bench(tmp_path, "--only", f"produce-{SCALE_N},restart-{SCALE_N}",
                              "--keep-logs", str(logs))
    assert report["errors"] == {}
    # --keep-logs: kafkalite's log of each start (the first, after SIGTERM, after SIGKILL); the
    # two SIGTERM'd ones say how long their log manager's shutdown took
    kept = sorted(logs.iterdir())
    assert [p.name for p in kept] == ["kafkalite-001.log", "kafkalite-002.log", "kafkalite-003.log"]
    assert [bool(re.search(r"Closed \d+ logs in \d+ ms", p.read_text())) for p in kept] == [True, False, True]
    assert report["environment"]["scale_messages"] == 600
    rss_per_partition = f"rss_per_partition_p{SCALE_N}_kib"
    _check_one_value_each(report, SCALE_EXPECTED, frozenset({rss_per_partition}))
    medians = report["medians"]
    for target in BROKERS:
        # Every partition holds at least its log's descriptor on both brokers.
        assert medians[f"fds_p{SCALE_N}"][target] >= SCALE_N, target
        # Ready means all led first, then a record acknowledged by every partition.
        for sig in ("sigterm", "sigkill"):
            assert medians[f"restart_{sig}_p{SCALE_N}_leaders_ms"][target] <= \
                medians[f"restart_{sig}_p{SCALE_N}_ms"][target], (target, sig)
    # One fresh broker each, stopped by SIGTERM twice (the measured restart, the end); the
    # SIGKILL in between has no exit code to check.
    assert report["kafkalite_exit_codes"] == [0, 0]
    assert report["kafka_exit_codes"] == [143, 143]
    rows = _table_rows(proc.stdout)
    n = f"{SCALE_N:,}"
    assert set(rows) == {
        f"produce over {n} partitions (MB/s)",
        f"produce over {n} partitions again, same broker (MB/s)",
        f"produce over 3 partitions, same broker and volume as over {n} (MB/s)",
        f"produce over {n} partitions again / over 3, same broker and volume",
        f"CreateTopics of {n} partitions until all led (ms)",
        f"VmRSS with {n} partitions (MiB)", f"VmRSS per partition, {n} partitions (KiB)",
        f"open descriptors with {n} partitions", f"descriptors per partition, {n} partitions",
        f"SIGTERM to exit, {n} partitions (ms)",
        *(f"restart after {sig}, {n} partitions: spawn to {what} (ms)"
          for sig in ("SIGTERM", "SIGKILL") for what in ("all led", "a record in each"))}
    assert rows[f"produce over {n} partitions (MB/s)"][3] != "—"  # kafkalite/Kafka
    for target in EVERY:   # one round: the ratio is that round's two figures
        assert medians[f"produce_p{SCALE_N}_again_of_3same"][target] == pytest.approx(
            medians[f"produce_p{SCALE_N}_again_mb_s"][target] / medians[f"produce_p{SCALE_N}_3same_mb_s"][target])
    ratio_cells = rows[f"produce over {n} partitions again / over 3, same broker and volume"]
    assert all(_number(c) > 0 for c in ratio_cells[:3]) and ratio_cells[3:] == ["—", "—"], ratio_cells
    assert _number(rows[f"produce over {n} partitions (MB/s)"][2]) > 0  # the mock
    for label, cells in rows.items():
        if label.startswith("produce"):
            continue
        assert cells[2] == "—" and cells[4] == "—", label  # no mock figure, no ratio to it
        if not label.startswith("VmRSS per partition"):
            assert _number(cells[0]) > 0 and _number(cells[1]) > 0 and _number(cells[3]) > 0, \
                (label, cells)
