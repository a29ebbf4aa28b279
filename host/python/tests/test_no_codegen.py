"""Nothing in the package is generated at run time: the code that lowers
and lifts values is generated from the WIT by gak-gen and committed
(host/gen), so a WIT change breaks Python when it is regenerated, not
when it is imported. The package never calls ``exec``, ``eval`` or
``compile`` — not in its source, not at import, not while it serves calls."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import gak

PACKAGE = Path(gak.__file__).resolve().parent
BANNED = {"exec", "eval", "compile"}


def _uses(source: str) -> list[str]:
    """Where ``source`` names a code-generating builtin (a call, an alias,
    ``builtins.exec``), or calls one by a name a grep sees."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Name) and node.id in BANNED:
            found.append(f"line {node.lineno}: {node.id}")
        elif isinstance(node, ast.Attribute) and node.attr in BANNED:
            owner = node.value
            if isinstance(owner, ast.Name) and owner.id in {"builtins", "__builtins__"}:
                found.append(f"line {node.lineno}: {owner.id}.{node.attr}")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in BANNED:
            found.append(f"line {node.lineno}: {node.value!r}")  # getattr(builtins, "exec")
    for i, line in enumerate(source.splitlines(), 1):
        code = line.split("#", 1)[0]
        if re.search(r"(?<![\w.])(exec|eval|compile)\s*\(", code):
            found.append(f"line {i}: {line.strip()}")
    return found


def test_the_package_source_names_no_code_generating_builtin() -> None:
    files = sorted(PACKAGE.rglob("*.py"))
    assert len(files) > 30 and PACKAGE / "_lift.py" in files
    found = {str(f.relative_to(PACKAGE)): _uses(f.read_text()) for f in files}
    assert {f: u for f, u in found.items() if u} == {}


def test_the_source_check_has_teeth() -> None:
    assert _uses("exec(src, ns)\n")
    assert _uses("import builtins\nf = builtins.exec\n")
    assert _uses("run = eval\n")
    assert _uses("code = compile(text, 'x', 'exec')\n")
    assert _uses("f = getattr(__builtins__, 'exec')\n")
    assert not _uses("import re\nPATTERN = re.compile('x')  # exec(\n")


#: Run in a child: ``exec``, ``eval`` and ``compile`` raise when gak's own
#: code calls them (at import or later), and when anything calls them on
#: gak's behalf once the package is imported (the stdlib generating code for
#: it at run time counts too; a module imported lazily runs its own code,
#: which is no code generated for gak). The stdlib's use on gak's behalf at
#: import (``dataclasses`` writes each class's ``__init__`` with ``exec``)
#: is listed. Then kernels on memory and SQLite serve every kind of call.
_GUARDED = r"""
import builtins, sys

real = {name: getattr(builtins, name) for name in ("exec", "eval", "compile")}
imported = [False]
others = []


def in_gak(frame):
    name = frame.f_globals.get("__name__", "") or ""
    return name == "gak" or name.startswith("gak.")


def importing(frame):
    # The import system runs a module's code with exec (and compiles its
    # source without a cached .pyc): loading a module, not generating code.
    name = frame.f_globals.get("__name__", "") or ""
    return name.startswith(("importlib._bootstrap", "_frozen_importlib"))


def guarded(name):
    def call(*args, **kwargs):
        caller = sys._getframe(1)
        if in_gak(caller):
            raise AssertionError(f"gak called {name} ({caller.f_globals['__name__']}:{caller.f_lineno})")
        # The nearest frame up the stack that is gak's or the import
        # system's: under gak, the call generates code for it; under an
        # import, it belongs to the module being imported.
        f = caller
        while f is not None and not (in_gak(f) or importing(f)):
            f = f.f_back
        if f is not None and in_gak(f):
            if imported[0]:
                raise AssertionError(f"{name} ran under gak ({f.f_globals['__name__']}:{f.f_lineno})")
            others.append(caller.f_globals.get("__name__"))
        return real[name](*args, **kwargs)

    return call


for name in real:
    setattr(builtins, name, guarded(name))

import gak
from gak import Action, Granted, Kernel, Snapshot, StepDef, TaskSeed
from gak.stores.sqlite import SqliteBackend

imported[0] = True
print("stdlib at import:", sorted(set(others)), flush=True)

for kernel in (Kernel.open("memory:"), Kernel(SqliteBackend(sys.argv[1]))):
    board = kernel.taskboard
    board.seed([TaskSeed("a"), TaskSeed("b", deps=("a",))])
    task = board.claim("a", "w", 60_000)
    board.renew("a", task.token, 60_000)
    board.complete("a", task.token)
    assert board.claim_next("w", 60_000).id == "b"
    assert len(board.list().items) == 2
    granted = kernel.sideeffect.acquire(Action("k", "r"), 60_000)
    assert isinstance(granted, Granted)
    kernel.sideeffect.complete(Action("k", "r"), granted.lease, b"done")
    assert kernel.sideeffect.acquire(Action("k", "r"), 60_000).result == b"done"
    kernel.sideeffect.write_fenced("sink", 1, lambda down: down.put("x", "1"))
    kernel.checkpoint.save_if_newer(Snapshot("run", 1, fields={"k": "v"}))
    assert kernel.checkpoint.load("run").fields == {"k": "v"}
    assert kernel.checkpoint.build_plan([StepDef("s")]).run == ["s"]
    kernel.retention.prune_dry_run(1 << 50, 10)
    try:
        board.claim("missing", "w", 60_000)
    except gak.Refused as e:
        assert e.code == "not-found"
    kernel.close()

# The guard itself: code of a gak module that calls exec is refused.
probe = {"__name__": "gak.probe", "__builtins__": builtins}
try:
    real["exec"]("exec('1')", probe)
except AssertionError as e:
    print("guard:", e, flush=True)
print("served", flush=True)
"""


def test_importing_and_serving_calls_runs_no_exec(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-c", _GUARDED, str(tmp_path / "k.db")], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr[-3000:]
    lines = out.stdout.splitlines()
    assert "served" in lines, out.stdout
    assert any(line.startswith("guard: gak called exec (gak.probe") for line in lines), out.stdout
    # Only the standard library's dataclasses generate code while gak is
    # imported (each class's __init__, __repr__, __eq__ ...).
    (stdlib,) = [line for line in lines if line.startswith("stdlib at import:")]
    assert stdlib == "stdlib at import: ['dataclasses']", stdlib
