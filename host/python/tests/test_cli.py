"""`python -m gak`: the runner's output contract and the component lookup."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from gak import OpenError, find_component


def run(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gak", *args], capture_output=True, text=True, cwd=cwd)


def test_malformed_vectors_fail_and_name_the_place(tmp_path: Path) -> None:
    (tmp_path / "bad.json").write_text("{not json")
    (tmp_path / "steps.json").write_text(
        '[{"scenario": "s", "steps": [{"call": "taskboard.get", "args": {"id": "x"}, "err": "nope"}]}]'
    )
    out = run("conformance", str(tmp_path))
    assert out.returncode == 1
    assert "bad.json: cannot parse" in out.stdout
    assert "steps.json :: s: step 0 (" in out.stdout and "$[0].steps[0]" in out.stdout
    assert out.stdout.rstrip().endswith("0 passed, 2 failed")


def test_unknown_store_is_an_error() -> None:
    out = run("conformance", "--store", "redis://nope")
    assert out.returncode == 2 and "unknown store" in out.stderr


def test_lookup_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = find_component()
    explicit = tmp_path / "explicit.wasm"
    explicit.write_bytes(real.read_bytes())
    monkeypatch.setenv("GAK_COMPONENT", str(real))
    assert find_component(explicit) == explicit  # explicit beats the environment
    assert find_component() == real
    monkeypatch.setenv("GAK_COMPONENT", str(tmp_path / "missing.wasm"))
    with pytest.raises(OpenError):  # a named file that is missing never falls through
        find_component()
    monkeypatch.delenv("GAK_COMPONENT")
    monkeypatch.setenv("CARGO_TARGET_DIR", str(tmp_path))
    (tmp_path / "component").mkdir()
    (tmp_path / "component" / "gak.wasm").write_bytes(b"")
    assert find_component() == tmp_path / "component" / "gak.wasm"
    with pytest.raises(OpenError):
        find_component(tmp_path / "nope.wasm")
    assert os.environ.get("GAK_COMPONENT") is None


@pytest.mark.parametrize("options_first", [True, False], ids=["options-then-paths", "paths-then-options"])
def test_options_and_paths_in_either_order(tmp_path: Path, options_first: bool) -> None:
    # Issue 17 item 11: `--component F --store URL PATHS` (the documented
    # order) was refused as "unrecognized arguments".
    vector = tmp_path / "one.json"
    vector.write_text('[{"scenario": "one", "steps": [{"call": "taskboard.get", "args": {"id": "x"}, "err": "not-found"}]}]')
    options = ["--component", str(find_component()), "--store", f"sqlite:{tmp_path / 'v.db'}"]
    args = [*options, str(vector)] if options_first else [str(vector), *options]
    out = run("conformance", *args)
    assert out.returncode == 0, out.stderr
    assert out.stdout.rstrip().endswith("1 passed, 0 failed")
