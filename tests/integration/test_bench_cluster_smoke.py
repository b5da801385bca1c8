"""Smoke test of scripts/bench_cluster.py: its quick mode on kafkalite alone (a 3-broker cluster
per measurement on one ZooKeeper) must complete and report every figure.

No timing assertions: speed is the benchmark's business. What is checked is that every
measurement ran once, with exact counts where there are counts (partitions the dead or stopped
broker led: the controller's round-robin assignment gives each of 3 brokers a third of the
partitions), a clean exit after SIGTERM, and the table's rows. The Apache Kafka side is left to
the benchmark itself (three JVMs would take minutes here). Smaller topics (30 and 60 partitions
instead of the quick mode's 100 and 300) and a 3 s ZooKeeper session (the four SIGKILLs each wait
for one) run the same code paths in a third of the time; the sizes that matter are the
benchmark's own runs.
"""
from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

# serial (scripts/test.sh): three brokers per measurement, like the other benchmark smoke test
pytestmark = [pytest.mark.java, pytest.mark.cluster, pytest.mark.serial]

REPO_ROOT = Path(__file__).resolve().parents[2]

SMALL, LARGE = 30, 60           # --partitions
SESSION_TIMEOUT_MS = 3000       # --session-timeout-ms
TIMINGS = [
    "cluster_start_ms", f"create_{SMALL}_ms", f"create_{LARGE}_ms",
    "failover_ms", "failover_metadata_names_controller_ms", "failover_session_expired_ms",
    "failover_after_expiry_ms",
    f"failover_{LARGE}_ms", f"failover_{LARGE}_metadata_names_controller_ms",
    f"failover_{LARGE}_session_expired_ms", f"failover_{LARGE}_after_expiry_ms",
    f"failover_{LARGE}_leaders_moved_ms",
    f"move_{SMALL}_ms", f"move_{SMALL}_first_broker_ms", f"move_{SMALL}_session_expired_ms",
    f"move_{SMALL}_after_expiry_ms",
    f"move_{LARGE}_ms", f"move_{LARGE}_first_broker_ms", f"move_{LARGE}_session_expired_ms",
    f"move_{LARGE}_after_expiry_ms",
    f"shutdown_{LARGE}_leaders_moved_ms", f"shutdown_{LARGE}_exit_ms",
]
# fresh clusters in one round: failover, failover-300, move-100, move-300, shutdown-300
CLUSTERS = 5


@pytest.mark.timeout(240)
def test_quick_cluster_bench_on_kafkalite_reports_every_figure(tmp_path: Path) -> None:
    out_json = tmp_path / "bench.json"
    proc = subprocess.run(
        [sys.executable, "scripts/bench_cluster.py", "--quick", "--targets", "kafkalite",
         "--partitions", f"{SMALL},{LARGE}", "--session-timeout-ms", str(SESSION_TIMEOUT_MS),
         "--json", str(out_json)],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=220)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    assert "failures:" not in proc.stdout, proc.stdout

    report = json.loads(out_json.read_text())
    assert report["errors"] == []
    runs = report["runs"]
    assert set(runs) == set(TIMINGS) | {f"failover_{LARGE}_partitions_moved", f"move_{SMALL}_partitions_moved",
                                        f"move_{LARGE}_partitions_moved", f"shutdown_{LARGE}_partitions_led"}
    for metric in TIMINGS:
        values = runs[metric]["kafkalite"]
        assert len(values) == (CLUSTERS if metric == "cluster_start_ms" else
                               3 if metric == f"create_{LARGE}_ms" else 1), (metric, values)
        assert all(math.isfinite(v) and v > 0 for v in values), (metric, values)
    assert runs[f"failover_{LARGE}_partitions_moved"]["kafkalite"] == [LARGE // 3]
    assert runs[f"move_{LARGE}_partitions_moved"]["kafkalite"] == [LARGE // 3]
    assert runs[f"shutdown_{LARGE}_partitions_led"]["kafkalite"] == [LARGE // 3]
    assert runs[f"move_{SMALL}_partitions_moved"]["kafkalite"] == [SMALL // 3]
    assert report["exit_codes"] == {"kafkalite": [0]}
    # A leader move or a failover cannot be over before ZooKeeper expired the dead broker's
    # session: the parts add up.
    for prefix in ("failover", f"failover_{LARGE}", f"move_{SMALL}", f"move_{LARGE}"):
        med = report["medians"]
        assert med[f"{prefix}_ms"]["kafkalite"] == pytest.approx(
            med[f"{prefix}_session_expired_ms"]["kafkalite"]
            + med[f"{prefix}_after_expiry_ms"]["kafkalite"], abs=0.2)

    assert (f"command: python scripts/bench_cluster.py --quick --targets kafkalite --partitions {SMALL},{LARGE} "
            f"--session-timeout-ms {SESSION_TIMEOUT_MS} --json") in proc.stdout
    assert f"zookeeper.session.timeout.ms={SESSION_TIMEOUT_MS} on every broker" in proc.stdout
    rows = [line for line in proc.stdout.splitlines() if line.startswith("| ")]
    assert rows[0] == "| measurement (ms unless a count) | kafkalite |"
    assert len(rows) == 1 + 9 + 2 * 5 + 3 + 2 + 1   # header, failover, 2 x move, shutdown, creates, start
