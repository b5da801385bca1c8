"""Smoke test of scripts/bench_cluster.py: its quick mode on kafkalite alone (a 3-broker cluster
per measurement on one ZooKeeper) must complete and report every figure.

No timing assertions: speed is the benchmark's business. What is checked is that every
measurement ran once, with exact counts where there are counts (partitions the dead or stopped
broker led: the controller's round-robin assignment gives each of 3 brokers a third of 300
partitions and 33 or 34 of 100), a clean exit after SIGTERM, and the table's rows. The Apache
Kafka side is left to the benchmark itself (three JVMs would take minutes here).
"""
from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.java, pytest.mark.cluster]

REPO_ROOT = Path(__file__).resolve().parents[2]

TIMINGS = [
    "cluster_start_ms", "create_100_ms", "create_300_ms",
    "failover_ms", "failover_metadata_names_controller_ms", "failover_session_expired_ms",
    "failover_after_expiry_ms",
    "failover_300_ms", "failover_300_metadata_names_controller_ms",
    "failover_300_session_expired_ms", "failover_300_after_expiry_ms",
    "failover_300_leaders_moved_ms",
    "move_100_ms", "move_100_first_broker_ms", "move_100_session_expired_ms",
    "move_100_after_expiry_ms",
    "move_300_ms", "move_300_first_broker_ms", "move_300_session_expired_ms",
    "move_300_after_expiry_ms",
    "shutdown_300_leaders_moved_ms", "shutdown_300_exit_ms",
]
# fresh clusters in one round: failover, failover-300, move-100, move-300, shutdown-300
CLUSTERS = 5


@pytest.mark.timeout(240)
def test_quick_cluster_bench_on_kafkalite_reports_every_figure(tmp_path: Path) -> None:
    out_json = tmp_path / "bench.json"
    proc = subprocess.run(
        [sys.executable, "scripts/bench_cluster.py", "--quick", "--targets", "kafkalite",
         "--json", str(out_json)],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=220)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    assert "failures:" not in proc.stdout, proc.stdout

    report = json.loads(out_json.read_text())
    assert report["errors"] == []
    runs = report["runs"]
    assert set(runs) == set(TIMINGS) | {"failover_300_partitions_moved", "move_100_partitions_moved",
                                        "move_300_partitions_moved", "shutdown_300_partitions_led"}
    for metric in TIMINGS:
        values = runs[metric]["kafkalite"]
        assert len(values) == (CLUSTERS if metric == "cluster_start_ms" else
                               3 if metric == "create_300_ms" else 1), (metric, values)
        assert all(math.isfinite(v) and v > 0 for v in values), (metric, values)
    assert runs["failover_300_partitions_moved"]["kafkalite"] == [100]
    assert runs["move_300_partitions_moved"]["kafkalite"] == [100]
    assert runs["shutdown_300_partitions_led"]["kafkalite"] == [100]
    assert runs["move_100_partitions_moved"]["kafkalite"][0] in (33, 34)
    assert report["exit_codes"] == {"kafkalite": [0]}
    # A leader move or a failover cannot be over before ZooKeeper expired the dead broker's
    # session: the parts add up.
    for prefix in ("failover", "failover_300", "move_100", "move_300"):
        med = report["medians"]
        assert med[f"{prefix}_ms"]["kafkalite"] == pytest.approx(
            med[f"{prefix}_session_expired_ms"]["kafkalite"]
            + med[f"{prefix}_after_expiry_ms"]["kafkalite"], abs=0.2)

    assert "command: python scripts/bench_cluster.py --quick --targets kafkalite --json" in proc.stdout
    assert "zookeeper.session.timeout.ms=6000" in proc.stdout
    rows = [line for line in proc.stdout.splitlines() if line.startswith("| ")]
    assert rows[0] == "| measurement (ms unless a count) | kafkalite |"
    assert len(rows) == 1 + 9 + 2 * 5 + 3 + 2 + 1   # header, failover, 2 x move, shutdown, creates, start
