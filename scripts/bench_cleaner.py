#!/usr/bin/env python3
"""Log cleaner benchmarks (issue 4): cleaner throughput, peak memory with 1M distinct keys, and
the cost of the periodic retention / dirty-ratio checks over 1,000 partitions.

Every measurement runs in a fresh child process (so its peak RSS is its own) on a log written
directly through kafkalite's Log layer in a temp dir — no broker, no network: what is measured
is the cleaner, the retention check and the cleaner's choice of log.

    python scripts/bench_cleaner.py                         # everything (~2 min)
    python scripts/bench_cleaner.py --only throughput --records 500000
    python scripts/bench_cleaner.py --only memory --keys 1000000
    python scripts/bench_cleaner.py --only retention --partitions 1000

The Markdown tables go to stdout, progress to stderr.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
MiB = 1024 * 1024


def _rss_kb() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def _peak_rss_kb() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def _write_log(d: Path, records: int, keys: int, value_size: int, codec: int,
               per_batch: int, segment_bytes: int):
    """A compacted log of ``records`` updates cycling over ``keys`` keys, then a roll so all
    of it is below the active segment."""
    from kafkalite.config.log_config import LogConfig
    from kafkalite.log.log_manager import LogManager
    from kafkalite.log.record_batch import build_batch

    cfg = LogConfig(segment_bytes=segment_bytes, cleanup_policy="compact",
                    min_cleanable_dirty_ratio=0.0, file_delete_delay_ms=0)
    lm = LogManager([d], cfg, lock_dirs=False)
    lm.startup()
    lg = lm.get_or_create_log("bench", 0, cfg)
    now = int(time.time() * 1000)
    i = 0
    while i < records:
        n = min(per_batch, records - i)
        # random values: compression gets only the keys and the record framing to work on
        recs = [(b"key-%09d" % ((i + j) % keys), os.urandom(value_size), now) for j in range(n)]
        lg.append_as_leader(build_batch(recs, compression=codec), 0, now)
        i += n
    lg.roll()
    return lm, lg


def child_write(args: argparse.Namespace) -> dict:
    t0 = time.perf_counter()
    lm, lg = _write_log(Path(args.dir), args.records, args.keys, args.value_size,
                        CODECS[args.codec], args.per_batch, args.segment_bytes)
    lm.shutdown()
    return {"write_s": time.perf_counter() - t0}


def child_clean(args: argparse.Namespace) -> dict:
    """Cleaning rounds until nothing is left to clean, over a log written by another process
    (so this process's peak RSS is loading plus cleaning); returns the figures."""
    from kafkalite.config.log_config import LogConfig
    from kafkalite.log.cleaner_manager import CleanerConfig, LogCleaner
    from kafkalite.log.log_manager import LogManager

    with tempfile.TemporaryDirectory(prefix="bench-cleaner-") as tmp:
        write = run_child("write", ["--dir", tmp] + args.passthrough, quiet=True)
        write_s = write["write_s"]
        cfg = LogConfig(segment_bytes=args.segment_bytes, cleanup_policy="compact",
                        min_cleanable_dirty_ratio=0.0, file_delete_delay_ms=0)
        lm = LogManager([Path(tmp)], cfg, lock_dirs=False)
        lm.startup({"bench": cfg})
        lg = lm.get_log(("bench", 0))
        size_before = lg.size_in_bytes
        segments_before = len(lg.segments)
        cleaner = LogCleaner(lm, CleanerConfig(dedupe_buffer_size=args.dedupe_buffer,
                                               io_buffer_size=512 * 1024, backoff_ms=10))
        rss_before = _rss_kb()
        peak_before = _peak_rss_kb()
        rounds = []

        async def clean_all() -> None:
            while await cleaner.clean_filthiest_log():
                r = cleaner.last_result
                rounds.append(r)

        t0 = time.perf_counter()
        asyncio.run(clean_all())
        clean_s = time.perf_counter() - t0
        peak_after = _peak_rss_kb()
        bytes_read = sum(r.stats.bytes_read for r in rounds)
        msgs_read = sum(r.stats.messages_read for r in rounds)
        map_s = sum(r.stats.elapsed_index_secs for r in rounds)
        map_slots = None
        try:
            needed = (args.records + 1) / 0.9 + 1024
            from kafkalite.log.offset_map import slots_for_memory
            map_slots = slots_for_memory(int(min(max(48, args.dedupe_buffer), needed * 24)))
        except Exception:   # noqa: BLE001 - informative only
            pass
        out = {
            "records": args.records, "keys": args.keys, "value_size": args.value_size,
            "codec": args.codec, "write_s": write_s, "log_mb": size_before / MiB,
            "segments_before": segments_before, "segments_after": len(lg.segments),
            "size_after_mb": lg.size_in_bytes / MiB, "rounds": len(rounds),
            "clean_s": clean_s, "map_s": map_s, "mb_read": bytes_read / MiB,
            "mb_per_s": bytes_read / MiB / clean_s if clean_s else 0.0,
            "records_per_s": msgs_read / clean_s if clean_s else 0.0,
            "records_read": msgs_read,
            "records_after": sum(1 for _ in _records(lg)) if args.count_after else None,
            "rss_before_mb": rss_before / 1024, "peak_rss_mb": peak_after / 1024,
            "peak_growth_mb": (peak_after - max(peak_before, rss_before)) / 1024,
            "map_mb_first_round": (map_slots * 24 / MiB) if map_slots else None,
            "dedupe_buffer_mb": args.dedupe_buffer / MiB,
        }
        lm.shutdown()
        return out


def _records(lg):
    from kafkalite.log.record_batch import decode_records, split_batches
    data = lg.read(0, 1 << 31).read_bytes()
    for p, h in split_batches(data)[0]:
        yield from decode_records(memoryview(data)[p:p + h.size], h)


def child_retention(args: argparse.Namespace) -> dict:
    """The periodic checks over ``partitions`` logs of 3 segments each: the retention pass
    (delete policy, nothing due) and the cleaner's choice over compacted logs (nothing dirty
    enough)."""
    from kafkalite.config.log_config import LogConfig
    from kafkalite.log.cleaner_manager import LogCleanerManager
    from kafkalite.log.log_manager import LogManager
    from kafkalite.log.record_batch import build_batch

    now = int(time.time() * 1000)
    out = {"partitions": args.partitions}
    with tempfile.TemporaryDirectory(prefix="bench-retention-") as tmp:
        for policy in ("delete", "compact"):
            cfg = LogConfig(cleanup_policy=policy, segment_bytes=1 << 20,
                            segment_index_bytes=64 * 1024,
                            # compacted: cleaned once, so the check has a clean section
                            min_cleanable_dirty_ratio=0.99)
            lm = LogManager([Path(tmp) / policy], cfg, lock_dirs=False)
            lm.startup()
            batch = build_batch([(b"k%d" % j, b"v" * 100, now) for j in range(20)])
            for p in range(args.partitions):
                lg = lm.get_or_create_log("t", p, cfg)
                for _s in range(3):
                    lg.append_as_leader(batch, 0, now)
                    lg.roll()
            if policy == "delete":
                lm.cleanup_logs(now)        # first pass maps what it needs
                t0 = time.perf_counter()
                for _ in range(args.repeat):
                    assert lm.cleanup_logs(now) == 0
                dt = (time.perf_counter() - t0) / args.repeat
                out["retention_pass_ms"] = dt * 1000
                out["retention_us_per_partition"] = dt * 1e6 / args.partitions
            else:
                mgr = LogCleanerManager(lm)
                # a checkpoint at the active segment of every log: all clean, nothing to do
                for lg in lm.all_logs():
                    mgr._set_checkpoint((lg.topic, lg.partition), lg, lg.active_segment.base_offset)
                assert mgr.grab_filthiest_compacted_log(now) is None
                t0 = time.perf_counter()
                for _ in range(args.repeat):
                    assert mgr.grab_filthiest_compacted_log(now) is None
                dt = (time.perf_counter() - t0) / args.repeat
                out["cleaner_check_ms"] = dt * 1000
                out["cleaner_check_us_per_partition"] = dt * 1e6 / args.partitions
            lm.shutdown()
    return out


def run_child(kind: str, extra: list[str], quiet: bool = False) -> dict:
    cmd = [sys.executable, __file__, "--child", kind] + extra
    if not quiet:
        print("+", " ".join(cmd[2:]), file=sys.stderr, flush=True)
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    if p.returncode != 0:
        raise RuntimeError(f"{kind} failed:\n{p.stderr[-3000:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", default="throughput,memory,retention")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--keys", type=int, default=10_000)
    ap.add_argument("--value-size", type=int, default=100)
    ap.add_argument("--codec", default="none", choices=sorted(CODECS))
    ap.add_argument("--per-batch", type=int, default=500)
    ap.add_argument("--segment-bytes", type=int, default=64 * MiB)
    ap.add_argument("--dedupe-buffer", type=int, default=128 * MiB)
    ap.add_argument("--count-after", action="store_true")
    ap.add_argument("--partitions", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--dir", help=argparse.SUPPRESS)
    args = ap.parse_args()
    args.passthrough = ["--records", str(args.records), "--keys", str(args.keys),
                        "--value-size", str(args.value_size), "--codec", args.codec,
                        "--per-batch", str(args.per_batch), "--segment-bytes", str(args.segment_bytes)]

    if args.child == "write":
        print(json.dumps(child_write(args)))
        return 0
    if args.child == "clean":
        print(json.dumps(child_clean(args)))
        return 0
    if args.child == "retention":
        print(json.dumps(child_retention(args)))
        return 0

    only = set(args.only.split(","))
    rows = []
    if "throughput" in only:
        for codec in ("none", "lz4"):
            rows.append(run_child("clean", ["--records", str(args.records), "--keys", str(args.keys),
                                            "--value-size", str(args.value_size), "--codec", codec]))
    mem_rows = []
    if "memory" in only:
        # 1M distinct keys (every record its own key): the map must hold them all in one round
        # with the default 128 MiB buffer, or needs several rounds with a 16 MiB one.
        for buf in (128 * MiB, 16 * MiB):
            mem_rows.append(run_child("clean", ["--records", "1000000", "--keys", "1000000",
                                                "--value-size", "20", "--dedupe-buffer", str(buf)]))
    ret = None
    if "retention" in only:
        ret = run_child("retention", ["--partitions", str(args.partitions), "--repeat", str(args.repeat)])

    if rows:
        print("| log | codec | size | rounds | cleaned in | map phase | MB/s of log cleaned | records/s | after |")
        print("|---|---|---|---|---|---|---|---|---|")
        for r in rows:
            print(f"| {r['records']:,} updates over {r['keys']:,} keys, {r['value_size']} B values | "
                  f"{r['codec']} | {r['log_mb']:.1f} MiB | {r['rounds']} | {r['clean_s']:.2f} s | "
                  f"{r['map_s']:.2f} s | {r['mb_per_s']:.1f} | {r['records_per_s']:,.0f} | "
                  f"{r['size_after_mb']:.2f} MiB |")
        print()
    if mem_rows:
        print("| 1M distinct keys | dedupe buffer | map allocated | rounds | cleaned in | RSS before | peak RSS | peak growth |")
        print("|---|---|---|---|---|---|---|---|")
        for r in mem_rows:
            print(f"| {r['log_mb']:.1f} MiB log | {r['dedupe_buffer_mb']:.0f} MiB | "
                  f"{r['map_mb_first_round']:.1f} MiB | {r['rounds']} | {r['clean_s']:.2f} s | "
                  f"{r['rss_before_mb']:.0f} MiB | {r['peak_rss_mb']:.0f} MiB | "
                  f"{r['peak_growth_mb']:.0f} MiB |")
        print()
    if ret:
        print(f"| periodic check over {ret['partitions']:,} partitions x 3 segments | per pass | "
              "per partition |")
        print("|---|---|---|")
        print(f"| retention (`LogManager.cleanup_logs`, nothing due) | {ret['retention_pass_ms']:.1f} ms | "
              f"{ret['retention_us_per_partition']:.1f} µs |")
        print(f"| cleaner's choice (`grab_filthiest_compacted_log`, nothing dirty) | "
              f"{ret['cleaner_check_ms']:.1f} ms | {ret['cleaner_check_us_per_partition']:.1f} µs |")
    print(json.dumps({"throughput": rows, "memory": mem_rows, "retention": ret}), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
