"""The conformance runner for the language-neutral vectors (``VECTORS.md``):
``python -m gak conformance [--store URL] [--component FILE] [FILE_OR_DIR…]``.

The same behaviour and output as ``gak conformance`` (the Rust runner): each
scenario runs on a fresh, empty store (a new SQLite file next to the given
path, a new PostgreSQL schema, a new map) with the fake clock at 0; one line
per scenario (``ok`` / ``FAIL``), then ``N passed, M failed``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Sequence

from ..clock import ManualClock
from ..component import _repo_root
from ..errors import OpenError
from ..kernel import Kernel
from ..stores.memory import MemoryBackend
from ..stores.sqlite import SqliteBackend
from ..stores.urls import shown
from . import calls
from .vectors import Malformed, parse_file, run_scenario


def builtin_dir() -> Path:
    """The repository's ``tests/vectors`` (the built-in suite)."""
    for start in (Path(__file__).resolve().parent, Path.cwd().resolve()):
        root = _repo_root(start)
        if root is not None and (root / "tests" / "vectors").is_dir():
            return root / "tests" / "vectors"
    raise OpenError("cannot find the built-in vectors (tests/vectors of the gak repository); pass FILE_OR_DIR")


def builtin() -> list[tuple[str, str]]:
    """The built-in suite as (``builtin:NAME``, text), like the Rust runner names them."""
    d = builtin_dir()
    return [(f"builtin:{p.name}", _read(p)) for p in sorted(d.glob("*.json"))]


def _read(p: Path) -> str:
    try:
        return p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        # An unreadable file becomes text that does not parse: a failure
        # naming the file, never a skip.
        return f"<unreadable: {e}>"


def load_paths(paths: Sequence[str]) -> list[tuple[str, str]]:
    """Vector files from paths (files, or directories of ``*.json``)."""
    out = []
    for raw in paths:
        p = Path(raw)
        if p.is_dir():
            out.extend((str(f), _read(f)) for f in sorted(p.glob("*.json")))
        else:
            out.append((str(p), _read(p)))
    return out


class Target:
    """Fresh stores from a URL: ``memory:``; ``sqlite:PATH`` (a new file next
    to PATH per scenario, removed afterwards); ``postgres://…`` (a new schema
    per scenario, dropped afterwards)."""

    def __init__(self, url: str, component: Optional[str] = None) -> None:
        self.url = url
        self.component = component
        self.count = 0
        self._cleanup: list[Any] = []
        if url.startswith(("postgres://", "postgresql://")):
            from ..stores.postgres import PostgresBackend

            self._pg = PostgresBackend(url, create=False)
        elif not (url in ("memory", "memory:") or url.startswith("sqlite:")):
            raise OpenError(f"unknown store {shown(url)!r}")

    def close(self) -> None:
        for c in self._cleanup:
            c()
        self._cleanup = []

    def fresh(self, clock: ManualClock) -> Kernel:
        self.close()
        self.count += 1
        if self.url.startswith(("postgres://", "postgresql://")):
            schema = f"{self._pg.schema}_c{os.getpid()}_{self.count}"
            backend: Any = self._pg.with_schema(schema)
            backend.drop_schema()
            backend.ensure_schema()
            self._cleanup.append(backend.drop_schema)
        elif self.url.startswith("sqlite:"):
            spec = self.url[len("sqlite:") :]
            base, _, query = spec.partition("?")
            base = base if base and not base.endswith("/") else os.path.join(base, "gak-conformance.db")
            stem = base[: -len(".db")] if base.endswith(".db") else base
            path = f"{stem}-py{os.getpid()}-{self.count}.db"
            _remove_db(path)
            backend = SqliteBackend(f"{path}?{query}" if query else path)
            self._cleanup.append(lambda: _remove_db(path))
        else:
            backend = MemoryBackend()
        return Kernel(backend, clock=clock, component=self.component)


def _remove_db(path: str) -> None:
    for suffix in ("", "-wal", "-shm"):
        try:
            os.remove(path + suffix)
        except OSError:
            pass


@dataclass
class Verdict:
    name: str
    failure: Optional[str]


def run(target: Target, files: Sequence[tuple[str, str]]) -> list[Verdict]:
    """Every scenario of the given files on ``target``."""
    verdicts: list[Verdict] = []
    try:
        for name, text in files:
            try:
                scenarios = parse_file(text)
            except Malformed as e:
                verdicts.append(Verdict(name, f"cannot parse: {e}"))
                continue
            for i, scenario in enumerate(scenarios):
                label = scenario.name if scenario.name is not None else f"#{i}"
                failure = run_scenario(target.fresh, calls.dispatch, scenario, name, i)
                verdicts.append(Verdict(f"{name} :: {label}", failure))
    finally:
        target.close()
    return verdicts


def render(verdicts: Sequence[Verdict]) -> str:
    """The runner's output: a line per scenario, then ``N passed, M failed``."""
    lines = [f"ok   {v.name}" if v.failure is None else f"FAIL {v.name}: {v.failure}" for v in verdicts]
    passed = sum(1 for v in verdicts if v.failure is None)
    lines.append(f"{passed} passed, {len(verdicts) - passed} failed")
    return "\n".join(lines) + "\n"
