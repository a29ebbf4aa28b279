"""The shared host-protocol cases (``tests/host-protocol/*.json``), replayed
against this host: one test per case and store. PostgreSQL is skipped when
unreachable (failed under ``CI=true``); this host has a binding for every
store the cases name, so nothing else is skipped."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any, Iterator

import pytest

from gak import Clock, Kernel
from gak.conformance import Target
from gak.conformance.host_protocol import Case, fresh_scripted, load, run_case

from conftest import pg_dsn

CASES = load()


def _params() -> list[Any]:
    out = []
    for case in CASES:
        if case.is_url:
            out.append(pytest.param(case, "-", id=f"{case.file}::{case.name}"))
        for store in case.stores:
            out.append(pytest.param(case, store, id=f"{case.file}::{case.name}[{store}]"))
    return out


@pytest.fixture
def fresh(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    store = request.node.callspec.params["store"]
    if store in ("-", "scripted"):
        yield fresh_scripted
        return
    app = ""
    if store == "sqlite":
        target = Target(f"sqlite:{tmp_path / 'hp.db'}")
    else:
        dsn = pg_dsn()
        app = f"gak_pyhp_{uuid.uuid4().hex[:8]}"
        target = Target(f"{dsn}{'&' if '?' in dsn else '?'}schema=gak_pyhp&application_name={app}")

    def make(clock: Clock) -> tuple[Kernel, Any]:
        kernel = target.fresh(clock)  # type: ignore[arg-type]
        return kernel, kernel.backend

    try:
        yield make
    finally:
        if app:
            # A host that hung (a case failed on its 10 s bound) may still
            # hold locks the schema's DROP would wait for forever.
            import psycopg

            with psycopg.connect(pg_dsn(), autocommit=True) as admin:
                admin.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s",
                    (app,),
                )
        target.close()


def test_the_cases_are_there() -> None:
    names = {c.file for c in CASES}
    assert {"transactions.json", "sinks.json", "inputs.json", "runner.json", "urls.json"} <= names
    assert len(CASES) >= 30


@pytest.mark.parametrize(("case", "store"), _params())
def test_case(case: Case, store: str, fresh: Any) -> None:
    run_case(case, store, fresh)
