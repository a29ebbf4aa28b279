"""A wheel built by build_wheel.py carries the component: installed on its
own, outside the repository and without GAK_COMPONENT, it runs."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parents[1]


def test_wheel_carries_the_component(tmp_path: Path) -> None:
    out = tmp_path / "dist"
    subprocess.run([sys.executable, str(HERE / "build_wheel.py"), "--out", str(out)], check=True, capture_output=True)
    (wheel,) = out.glob("gak-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "gak/gak.wasm" in names and "gak/py.typed" in names
    assert "gak/stores/postgres.sql" in names  # the PostgreSQL binding's schema and functions
    assert not any("xworker" in n for n in names)  # a test tool (tests/xworker.py), not the package's
    assert not (HERE / "src" / "gak" / "gak.wasm").exists()  # the copy is not left behind
    target = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target), str(wheel)], check=True
    )
    env = {k: v for k, v in os.environ.items() if k not in ("GAK_COMPONENT", "CARGO_TARGET_DIR")}
    env["PYTHONPATH"] = str(target)
    code = (
        "import gak, pathlib; k = gak.Kernel.open('memory:'); "
        "k.taskboard.seed([gak.TaskSeed('a')]); print(k.component_path, k.taskboard.claim('a', 'w', 10).fence)"
    )
    run = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    path, fence = run.stdout.split()
    assert path == str(target / "gak" / "gak.wasm") and fence == "1"


def test_the_packaged_sql_is_the_shared_file() -> None:
    """``gak/stores/postgres.sql`` is a copy of ``host/sql/postgres.sql``
    (the one every host runs), shipped so an installed wheel has it: the
    bytes must be the same whenever the repository's file is there."""
    shared = HERE.parents[1] / "host" / "sql" / "postgres.sql"
    if not shared.is_file():
        pytest.skip(f"{shared} is not here (outside the repository)")
    packaged = HERE / "src" / "gak" / "stores" / "postgres.sql"  # gak.stores.postgres.SQL_FILE
    assert packaged.read_bytes() == shared.read_bytes(), f"copy {shared} to {packaged}"
