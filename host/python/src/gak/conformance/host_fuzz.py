"""Replaying the host-protocol fuzzers' generated cases
(``tests/host-protocol/fuzz/``, or the directory ``$GAK_HOST_FUZZ_DIR``
names — ``just soak`` writes many more there; README "Fuzzers"):

- ``sql.json``: no spelling of SQL run through a body's lent driver handle
  (``down.raw.execute``, one statement per call) lets the body end the
  kernel's transaction: the call is all or nothing, the database's label
  holds, and a zombie at a lower fence stays out;
- ``passwords.json``: every entry point that takes a store URL fails, and
  nothing it shows (the error and its chain, log records, warnings, what it
  prints; the CLI's stdout and stderr) holds any part of the password;
- ``retries.json``: a fenced write whose body meets (and swallows) a
  conflict on some attempts answers what its last attempt did, on the
  scripted store and on PostgreSQL.

Each ``replay_*`` raises :class:`~.host_protocol.CaseFailed` saying what
broke.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import os
import subprocess
import sys
import traceback
import warnings
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable, Iterator, Optional

from ..clock import ManualClock
from ..errors import GakError
from ..kernel import Downstream, Kernel
from ..stores import open_store
from .host_protocol import CaseFailed, cases_dir
from .scripted import ScriptedBackend

#: What a retry case's ``answer`` is in this host: it has no panics, so a
#: body that "panics" fails as any body does (README).
ANSWERS = {"ok": "ok", "write-failed": "write-failed", "panic": "write-failed", "storage": "storage"}
#: A serialization failure raised by the server, for a PostgreSQL body.
SERIALIZATION_FAILURE = "DO $$BEGIN RAISE EXCEPTION USING ERRCODE = '40001'; END$$"
#: How many passwords the CLI replay takes (a process per password and template).
CLI_CASES = 8
#: The CLI commands that take a store URL.
CLI_COMMANDS = ("conformance", "demo")


def fuzz_dir() -> Path:
    """``$GAK_HOST_FUZZ_DIR``, else the repository's ``tests/host-protocol/fuzz``."""
    env = os.environ.get("GAK_HOST_FUZZ_DIR")
    return Path(env) if env else cases_dir() / "fuzz"


def load(name: str) -> dict[str, Any]:
    """One generated file (``{generator, seed, cases, templates?}``), checked
    to hold cases: an empty or missing file fails, never passes vacuously."""
    path = fuzz_dir() / name
    data = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(data, dict) or not isinstance(data.get("cases"), list) or not data["cases"]:
        raise CaseFailed(f"{path}: expected a non-empty 'cases' list")
    return data


def _known(what: str, obj: Any, fields: set[str]) -> None:
    if not isinstance(obj, dict) or set(obj) - fields:
        raise CaseFailed(f"{what}: malformed (fields this replay does not know): {obj!r}")


def _answer(call: Callable[[], Any]) -> str:
    """``ok`` or the code of the GakError the call raised."""
    try:
        call()
    except GakError as e:
        return e.code
    return "ok"


# --- sql.json --------------------------------------------------------------------


def replay_sql(kernel: Kernel, i: int, case: Any, database: str) -> None:
    """``sql.json`` case ``i`` on ``kernel`` (a fresh store of ``database``,
    ``sqlite`` or ``postgres``, shared by the file's cases: each has its
    own resource and keys)."""
    _known(f"case {i}", case, {"sql", "postgres", "sqlite", "ends"})
    text, expect = case.get("sql"), case.get(database)
    if not isinstance(text, str) or expect not in ("refuse", "run", "any"):
        raise CaseFailed(f"case {i}: malformed: {case!r}")
    resource = f"fz-{i}"
    before, after, zombie = (f"fz/{i}/{k}" for k in ("before", "after", "zombie"))
    raised: list[Optional[BaseException]] = []

    def body(down: Downstream) -> None:
        raised.clear()
        down.put(before, "1")
        try:
            down.raw.execute(text)
            raised.append(None)
        except Exception as e:  # noqa: BLE001 - whatever the driver or the host raised
            raised.append(e)
        try:
            down.put(after, "1")
        except GakError:
            pass  # the call's answer says what it did

    answer = _answer(lambda: kernel.sideeffect.write_fenced(resource, 5, body))
    if not raised:
        raise CaseFailed(f"the body never ran (answered {answer})")
    what = f"answered {answer}, the statement {'ran' if raised[0] is None else f'raised {raised[0]!r}'}"
    # A body that returns normally ends a call only through a store error.
    if answer not in ("ok", "storage"):
        raise CaseFailed(f"expected ok or storage: {what}")
    done = answer == "ok"
    seen = kernel.sideeffect.sink_seen(resource)
    rows = kernel.with_downstream(lambda d: (d.get(before), d.get(after)))
    if (seen, rows) != ((5, ("1", "1")) if done else (0, (None, None))):
        raise CaseFailed(f"all or nothing broken: {what}, yet seen-fence {seen}, before/after {rows}")
    if expect == "refuse" and raised[0] is None:
        raise CaseFailed(f"expected the statement refused: {what}")
    if expect == "run" and (raised[0] is not None or not done):
        raise CaseFailed(f"expected the statement run and the call ok: {what}")
    late = _answer(lambda: kernel.sideeffect.write_fenced(resource, 2, lambda d: d.put(zombie, "1")))
    landed = kernel.with_downstream(lambda d: d.get(zombie))
    want = ("fence-stale", None) if done else ("ok", "1")
    if (late, landed) != want:
        raise CaseFailed(f"the zombie at fence 2 after {what}: expected {want}, got {(late, landed)}")


# --- retries.json ----------------------------------------------------------------


def replay_retry(kernel: Kernel, i: int, case: Any, scripted: Optional[ScriptedBackend]) -> None:
    """``retries.json`` case ``i``: on the scripted store (``scripted``: its
    backend, armed to answer the conflicting attempts' puts with a
    conflict) or on PostgreSQL (``None``: the body raises a serialization
    failure through its driver handle)."""
    _known(f"case {i}", case, {"attempts", "answer"})
    attempts, want = case.get("attempts"), ANSWERS.get(case.get("answer"))  # type: ignore[arg-type]
    if not isinstance(attempts, list) or not attempts or want is None:
        raise CaseFailed(f"case {i}: malformed: {case!r}")
    for a in attempts:
        _known(f"case {i} attempt", a, {"conflict", "body"})
        if not isinstance(a.get("conflict"), bool) or a.get("body") not in ("ok", "fail", "panic"):
            raise CaseFailed(f"case {i}: malformed attempt {a!r}")
    conflicts = sum(a["conflict"] for a in attempts)
    if any(not a["conflict"] for a in attempts[:conflicts]):
        raise CaseFailed(f"case {i}: a conflict after a clean attempt cannot be scripted")
    key, resource = f"rt/{i}", f"rt-{i}"
    if scripted is not None:
        faults = [{"on": "write", "table": "downstream", "answer": "conflict", "times": conflicts}]
        scripted.script.arm(faults if conflicts else [])
    met: list[Optional[BaseException]] = []  # per attempt: the conflict the body swallowed

    def body(down: Downstream) -> None:
        k = len(met)
        met.append(None)
        try:
            down.put(key, str(k))
            if scripted is None and k < len(attempts) and attempts[k]["conflict"]:
                down.raw.execute(SERIALIZATION_FAILURE)
        except Exception as e:  # noqa: BLE001 - swallowed: the call re-runs all the same
            met[k] = e
        end = attempts[k]["body"] if k < len(attempts) else "fail"
        if end != "ok":
            raise RuntimeError(f"the body ends with {end} on attempt {k}")

    answer = _answer(lambda: kernel.sideeffect.write_fenced(resource, 1, body))
    tx = scripted.script.counts() if scripted is not None else None
    if scripted is not None:
        scripted.script.arm([])
    what = f"answered {answer}, {len(met)} body runs, met {met!r}, transactions {tx}"
    if answer != want:
        raise CaseFailed(f"expected {want}: {what}")
    if len(met) != len(attempts):
        raise CaseFailed(f"expected {len(attempts)} body runs: {what}")
    for k, a in enumerate(attempts):
        if (met[k] is not None) != a["conflict"]:
            raise CaseFailed(f"attempt {k}: expected {'a' if a['conflict'] else 'no'} conflict: {what}")
    committed = int(want == "ok")
    if tx is not None and tx != {"begin": len(attempts), "commit": committed, "rollback": len(attempts) - committed}:
        raise CaseFailed(f"expected {len(attempts)} transactions, {committed} committed: {what}")
    seen = kernel.sideeffect.sink_seen(resource)
    value = kernel.with_downstream(lambda d: d.get(key))
    landed = (1, str(len(attempts) - 1)) if want == "ok" else (0, None)
    if (seen, value) != landed:
        raise CaseFailed(f"expected seen-fence and {key} {landed}, got {(seen, value)}: {what}")


# --- passwords.json --------------------------------------------------------------


def with_password(template: str, password: str) -> str:
    """``template`` with ``password`` written in as it is (not encoded)."""
    return template.replace("{password}", password)


def _pg_backend(url: str, create: bool) -> Any:
    from ..stores.postgres import PostgresBackend

    return PostgresBackend(url, create=create)


def _conformance(url: str) -> Any:
    from . import Target

    target = Target(url)
    try:
        return target.fresh(ManualClock(0))
    finally:
        target.close()


def _demo(url: str) -> None:
    from ..demo import main

    code = main(url)
    if code != 0:
        raise _Failed(f"the demo answered {code}")


class _Failed(Exception):
    """An entry point that reports failure by its answer, not by raising."""


#: Every in-process entry point of this host that takes a store URL (the
#: API's flavours, the tools'): each must fail.
ENTRY_POINTS: dict[str, Callable[[str], Any]] = {
    "open_store": lambda url: open_store(url),
    "Kernel.open": lambda url: Kernel.open(url),
    "PostgresBackend(url)": lambda url: _pg_backend(url, True),
    "PostgresBackend(url, create=False).drop_schema()": lambda url: _pg_backend(url, False).drop_schema(),
    "PostgresBackend(url, create=False).session().begin()": lambda url: _pg_backend(url, False).session().begin(),
    "conformance.Target(url).fresh()": _conformance,
    "demo.main(url)": _demo,
}


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record))


@contextlib.contextmanager
def _everything_shown() -> Iterator[list[str]]:
    """What the block shows besides its exception: log records (every
    level, every logger), warnings, and what it prints."""
    lines: list[str] = []
    records, root = _Records(), logging.getLogger()
    level = root.level
    out, err = io.StringIO(), io.StringIO()
    root.addHandler(records)
    root.setLevel(logging.DEBUG)
    try:
        with warnings.catch_warnings(record=True) as caught, contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            warnings.simplefilter("always")
            yield lines
    finally:
        root.removeHandler(records)
        root.setLevel(level)
        lines += records.lines + [str(w.message) for w in caught] + [out.getvalue(), err.getvalue()]


def _markers_in(texts: list[str], markers: list[str]) -> Optional[str]:
    for text in texts:
        for m in markers:
            if m in text:
                return f"{m!r} in {text!r}"
    return None


def replay_password(templates: list[str], i: int, case: Any) -> int:
    """``passwords.json`` case ``i`` through every entry point with every
    template; how many openings were tried."""
    _known(f"case {i}", case, {"password", "markers"})
    password, markers = case.get("password"), case.get("markers")
    if not isinstance(password, str) or not markers or not all(isinstance(m, str) and m in password for m in markers):
        raise CaseFailed(f"case {i}: malformed: {case!r}")
    tried = 0
    for template in templates:
        url = with_password(template, password)
        for name, open_ in ENTRY_POINTS.items():
            error: Optional[BaseException] = None
            opened: Any = None
            with _everything_shown() as shown:
                try:
                    opened = open_(url)
                except Exception as e:  # noqa: BLE001 - every kind of failure counts, and is read
                    error = e
            if error is None:
                if hasattr(opened, "close"):
                    opened.close()
                raise CaseFailed(f"{name}: opening {template!r} with password {i} succeeded")
            texts = shown + ([] if error is None else ["".join(traceback.format_exception(error))])
            found = _markers_in(texts, markers)
            if found is not None:
                raise CaseFailed(f"{name} on {template!r}: shows the password: {found}")
            tried += 1
    return tried


def cli_jobs(data: dict[str, Any]) -> list[tuple[str, str, list[str]]]:
    """(command, URL, markers) for the CLI replay: the first
    :data:`CLI_CASES` passwords in every template, a process each, the
    commands taking turns (so each meets every template)."""
    return [
        (CLI_COMMANDS[(i + k) % len(CLI_COMMANDS)], with_password(t, c["password"]), c["markers"])
        for i, c in enumerate(data["cases"][:CLI_CASES])
        for k, t in enumerate(data["templates"])
    ]


def replay_cli(jobs: list[tuple[str, str, list[str]]], env: Optional[dict[str, str]] = None) -> list[str]:
    """Run ``python -m gak COMMAND --store URL`` for every job, a few at a
    time; the failures (a command that exited 0, output holding a marker)."""

    def one(job: tuple[str, str, list[str]]) -> Optional[str]:
        command, url, markers = job
        out = subprocess.run(
            [sys.executable, "-m", "gak", command, "--store", url],
            capture_output=True,
            text=True,
            timeout=120,
            env=env,
        )
        if out.returncode == 0:
            return f"{command} {url!r}: exited 0"
        found = _markers_in([out.stdout, out.stderr], markers)
        return None if found is None else f"{command}: shows the password: {found}"

    with ThreadPoolExecutor(max_workers=min(8, os.cpu_count() or 2)) as pool:
        return [f for f in pool.map(one, jobs) if f is not None]
