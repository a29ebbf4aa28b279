#!/usr/bin/env python3
"""How fast the console serves a big board (issue 27, "Cost").

Builds a board of N tasks through `gak tasks seed` (in chunks, as an
operator would load one), gives it groups, limits, live claims, delayed,
failed and done tasks, starts `gak serve` on it and times the pages an
operator opens and `/metrics` a scraper reads. Prints one table (p50 and
p99 over the requests, milliseconds, and the answer's size), or JSON with
`--json`.

    python3 bench/console/board.py --store sqlite:/tmp/board.db --tasks 1000000
    python3 bench/console/board.py --store 'postgres://postgres@127.0.0.1/test?schema=board' \
        --tasks 1000000 --chunk 2000

A board that already holds tasks is reused as it is (`--tasks` is then only
what the table says). `--gak` names the binary (default: the release build,
`target/release/gak`). Standard library only.
"""
from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# The pages an operator opens, and what a scraper reads.
PATHS = [
    "/tasks?limit=100",
    "/tasks?state=open&limit=100",
    "/tasks?state=done&limit=100",
    "/tasks?state=delayed&limit=100",
    "/tasks?group=tenant-007&limit=100",
    "/groups",
    "/api/tasks?limit=100",
    "/api/counts",
    "/metrics",
]


def gak(binary: str, *args: str, stdin: str | None = None) -> str:
    done = subprocess.run(
        [binary, *args], input=stdin, capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        sys.exit(f"gak {' '.join(args[:2])} failed ({done.returncode}): {done.stderr.strip()}")
    return done.stdout


def tasks_of(i: int) -> dict:
    """Task i of the board: mostly done, some open, failed, delayed; one in
    seven in one of 100 tenant groups."""
    t: dict = {"id": f"job-{i:07d}", "title": f"send invoice {i}"}
    r = i % 20
    if r < 13:
        t["state"] = "done"
    elif r < 14:
        t["state"] = "failed"
    elif r == 14:
        t["not-before"] = 4_000_000_000_000 + i
    if i % 7 == 0:
        t["group"] = f"tenant-{i % 100:03d}"
    return t


def build(binary: str, store: str, n: int, chunk: int) -> float:
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "chunk.json"
        for at in range(0, n, chunk):
            path.write_text(json.dumps([tasks_of(i) for i in range(at, min(n, at + chunk))]))
            gak(binary, "tasks", "seed", "--store", store, str(path))
            print(f"seeded {min(n, at + chunk):,} of {n:,}", end="\r", file=sys.stderr)
    print(file=sys.stderr)
    # Limits on some groups, and live claims in them.
    for g in range(5):
        gak(binary, "groups", "limit", "--store", store, f"tenant-{g:03d}", "3")
    for _ in range(20):
        gak(binary, "tasks", "claim-next", "--store", store, "--agent", "bench", "--ttl", "1h")
    return time.monotonic() - started


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def fetch(url: str) -> tuple[float, int, int]:
    at = time.perf_counter()
    try:
        with urllib.request.urlopen(url, timeout=60) as r:
            body = r.read()
            status = r.status
    except urllib.error.HTTPError as e:
        body, status = e.read(), e.code
    return (time.perf_counter() - at) * 1000.0, status, len(body)


def serve(binary: str, store: str, port: int) -> subprocess.Popen:
    proc = subprocess.Popen(
        [binary, "serve", "--store", store, "--listen", f"127.0.0.1:{port}"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 60
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return proc
        except OSError:
            if proc.poll() is not None:
                sys.exit(f"gak serve exited: {proc.stderr.read().decode()}")
            if time.monotonic() > deadline:
                proc.kill()
                sys.exit("gak serve did not listen within 60 s")
            time.sleep(0.05)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--store", required=True)
    ap.add_argument("--tasks", type=int, default=1_000_000)
    ap.add_argument("--chunk", type=int, default=10_000, help="tasks per seed call (PostgreSQL: 2000)")
    ap.add_argument("--requests", type=int, default=30, help="requests per path")
    ap.add_argument("--gak", default=str(ROOT / "target" / "release" / "gak"))
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()

    # A store that does not exist yet (a new SQLite file) is built; so is an
    # empty one. Any other failure shows at the first seed.
    listed = subprocess.run(
        [args.gak, "tasks", "list", "--store", args.store, "--limit", "1", "--json"],
        capture_output=True,
        text=True,
        check=False,
    )
    empty = listed.returncode != 0 or not json.loads(listed.stdout)["items"]
    built = None
    if empty:
        built = build(args.gak, args.store, args.tasks, args.chunk)
    port = free_port()
    proc = serve(args.gak, args.store, port)
    rows = []
    try:
        for path in PATHS:
            url = f"http://127.0.0.1:{port}{path}"
            fetch(url)  # warm: the first call instantiates and compiles nothing new
            times, sizes = [], set()
            for _ in range(args.requests):
                ms, status, size = fetch(url)
                if status != 200:
                    sys.exit(f"{path}: HTTP {status}")
                times.append(ms)
                sizes.add(size)
            times.sort()
            rows.append(
                {
                    "path": path,
                    "p50_ms": round(statistics.median(times), 2),
                    "p99_ms": round(times[min(len(times) - 1, int(len(times) * 0.99))], 2),
                    "bytes": max(sizes),
                }
            )
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    report = {"store": args.store.split("?")[0].split("@")[-1], "tasks": args.tasks, "built_s": built, "rows": rows}
    if args.json:
        print(json.dumps(report))
        return
    if built is not None:
        print(f"built a board of {args.tasks:,} tasks in {built:.1f} s")
    print(f"{'path':34} {'p50 ms':>8} {'p99 ms':>8} {'bytes':>8}")
    for r in rows:
        print(f"{r['path']:34} {r['p50_ms']:8.2f} {r['p99_ms']:8.2f} {r['bytes']:8}")


if __name__ == "__main__":
    main()
