#!/usr/bin/env python3
"""Per-call latency of the hosts side by side, from one run.

    python3 host/latency.py [N] [--passes P]        (or: just latency-hosts N)

Runs, one after another on the same machine, the latency tool of each host:

- Rust:       target/release/examples/latency N (cargo build --release -p gak-examples --example latency)
- Python:     host/python/.venv/bin/python host/python/tools/latency.py N
- JavaScript: node host/js/bench/latency.mjs N
- Go:         host/go/cmd/gak-latency N (go build, cgo over target/release/libgak.a)
- C:          host/c/bench/latency.c, compiled by cc against target/release/libgak.a

and prints one table of wall-clock microseconds per call, by operation and
store, with each host's ratio to the Rust host. Every tool embeds the same
component and makes the same calls on the same stores (memory:, SQLite with
synchronous=FULL and NORMAL, PostgreSQL when it answers; the Rust tool adds
the async API). Go and C run the Rust host itself through libgak's C ABI, so
the Rust, Go and C tools run in turn, P times (default 3), and each of their
figures is the median of its passes: drift of a busy machine moves all three
alike. The Python and JavaScript environments are the ones `cargo test`
creates (host/python/.venv, host/js/node_modules and host/js/gen); run the
test command once first. libgak is built here (cargo build --release -p
gak-c). A host whose tool cannot run is reported and left out, never
guessed.

Speed is measured here, never asserted: run it on a quiet machine.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LINE = re.compile(r"^(?P<label>\S.*?)\s+(?P<us>[0-9.]+) µs/op\s")


def store_kind(url: str) -> str:
    if url.startswith("memory"):
        return "memory"
    if url.startswith("postgres"):
        return "postgres"
    if "synchronous=normal" in url:
        return "sqlite normal"
    return "sqlite full"


def parse(text: str) -> dict[tuple[str, str], float]:
    """(operation, store kind) -> µs per call, from a tool's output."""
    figures: dict[tuple[str, str], float] = {}
    store = None
    for line in text.splitlines():
        if line.startswith("-- "):
            store = store_kind(line[3:].strip())
            continue
        m = LINE.match(line)
        if m and store:
            figures[(m["label"].strip(), store)] = float(m["us"])
    return figures


def run(
    name: str, cmd: list[str], env: dict[str, str] | None = None, cwd: Path = ROOT
) -> dict[tuple[str, str], float]:
    print(f"[{name}] {' '.join(cmd)}", file=sys.stderr, flush=True)
    try:
        out = subprocess.run(
            cmd, cwd=cwd, env={**os.environ, **(env or {})}, capture_output=True, text=True, check=False
        )
    except OSError as e:
        print(f"[{name}] cannot run: {e}", file=sys.stderr)
        return {}
    if out.returncode != 0:
        print(f"[{name}] failed (exit {out.returncode}):\n{out.stderr[-2000:]}", file=sys.stderr)
        return {}
    return parse(out.stdout)


NATIVE_LIBS = ["-lgcc_s", "-lutil", "-lrt", "-lpthread", "-lm", "-ldl"]


def build_libgak(target: Path) -> Path | None:
    """target/release/libgak.a, built now; None when cargo fails."""
    print("[libgak] cargo build --release -p gak-c", file=sys.stderr, flush=True)
    out = subprocess.run(["cargo", "build", "--release", "-q", "-p", "gak-c"], cwd=ROOT, check=False)
    lib = target / "release"
    return lib if out.returncode == 0 and (lib / "libgak.a").exists() else None


def build_c(lib: Path | None) -> list[str] | None:
    """The C latency tool, compiled against libgak.a."""
    if lib is None:
        return None
    exe = lib / "gak-latency-c"
    cmd = ["cc", "-O2", "host/c/bench/latency.c", "-Ihost/c/include", str(lib / "libgak.a"), *NATIVE_LIBS, "-o", str(exe)]
    print(f"[C] {' '.join(cmd)}", file=sys.stderr, flush=True)
    if subprocess.run(cmd, cwd=ROOT, check=False).returncode != 0:
        return None
    return [str(exe)]


def median(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[len(ordered) // 2] if len(ordered) % 2 else (ordered[len(ordered) // 2 - 1] + ordered[len(ordered) // 2]) / 2


def main() -> int:
    args = sys.argv[1:]
    passes = 3
    if len(args) >= 2 and args[-2] == "--passes" and args[-1].isdigit():
        passes, args = max(1, int(args[-1])), args[:-2]
    n = args[0] if args else "5000"
    if not n.isdigit() or len(args) > 1:
        print("usage: host/latency.py [N] [--passes P]", file=sys.stderr)
        return 2
    # The Rust build also writes target/component/gak.wasm, the file the
    # Python and JavaScript hosts load (host/HOSTS.md).
    target = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
    component = str(target / "component" / "gak.wasm")
    print("[Rust] cargo build --release -p gak-examples --example latency", file=sys.stderr, flush=True)
    built = subprocess.run(
        ["cargo", "build", "--release", "-q", "-p", "gak-examples", "--example", "latency"], cwd=ROOT, check=False
    )
    rust_tool = [str(target / "release" / "examples" / "latency")] if built.returncode == 0 else None
    lib = build_libgak(target)
    c_tool = build_c(lib)
    go_tool = None
    if lib is not None:
        exe = target / "release" / "gak-latency-go"
        go_env = {"CGO_LDFLAGS": f"-L{lib}", "CGO_ENABLED": "1", "GOFLAGS": "-mod=readonly", "GOPROXY": "off"}
        print("[Go] go build ./cmd/gak-latency", file=sys.stderr, flush=True)
        made = subprocess.run(
            ["go", "build", "-o", str(exe), "./cmd/gak-latency"],
            cwd=ROOT / "host" / "go",
            env={**os.environ, **go_env},
            check=False,
        )
        go_tool = [str(exe)] if made.returncode == 0 else None
    hosts: dict[str, dict[tuple[str, str], float]] = {
        "Rust": {},
        "Python": run(
            "Python",
            [str(ROOT / "host/python/.venv/bin/python"), "host/python/tools/latency.py", n],
            {"GAK_COMPONENT": component, "PYTHONPATH": str(ROOT / "host/python/src")},
        ),
        "JS": run(
            "JS",
            ["node", "host/js/bench/latency.mjs", n],
            {"GAK_COMPONENT": component},
        ),
        "Go": {},
        "C": {},
    }
    # The three tools that embed the same Rust core run in turn, `passes`
    # times, and each figure is their median: a machine that speeds up or
    # slows down during the run moves all three alike.
    tools = {"Rust": rust_tool, "Go": go_tool, "C": c_tool}
    samples: dict[str, dict[tuple[str, str], list[float]]] = {h: {} for h in tools}
    for _ in range(passes):
        for name, tool in tools.items():
            if tool is None:
                continue
            for key, us in run(name, [*tool, n]).items():
                samples[name].setdefault(key, []).append(us)
    for name in tools:
        hosts[name] = {key: median(values) for key, values in samples[name].items()}
    rows: list[tuple[str, str]] = []
    for figures in hosts.values():
        rows.extend(key for key in figures if key not in rows)
    order = ["memory", "sqlite normal", "sqlite full", "postgres"]
    rows.sort(key=lambda r: (order.index(r[1]), r[0]))
    names = list(hosts)
    head = f"{'operation':<40} {'store':<14}" + "".join(f"{h + ' µs':>11}" for h in names)
    head += "".join(f"{h + '/Rust':>12}" for h in names[1:])
    print(
        f"per-call wall time, N={n}, one run (Rust, Go, C: median of {passes} passes run in turn, each one "
        "round after N/10 warm-up calls; Python: best of 3 rounds; JS: median of 3 rounds after 5,000 warm-up calls)"
    )
    print(head)
    for label, store in rows:
        cells = [hosts[h].get((label, store)) for h in names]
        line = f"{label:<40} {store:<14}" + "".join(f"{c:>11.1f}" if c is not None else f"{'-':>11}" for c in cells)
        rust = cells[0]
        for c in cells[1:]:
            line += f"{c / rust:>11.2f}x" if c is not None and rust else f"{'-':>12}"
        print(line)
    missing = [h for h, f in hosts.items() if not f]
    if missing:
        print(f"not measured: {', '.join(missing)} (see stderr)")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
