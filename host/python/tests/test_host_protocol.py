"""The shared host-protocol cases (``tests/host-protocol/*.json``) and the
fuzzers' generated ones (``tests/host-protocol/fuzz/``, or
``$GAK_HOST_FUZZ_DIR``), replayed against this host: one test per case and
store. PostgreSQL is skipped when unreachable (failed under ``CI=true``);
this host has a binding for every store the cases name. The one other skip
is a case of a language feature Python does not have (``workers.json``'s
``panic`` handler: Python has no panics), reported skipped with the reason,
never passed."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any, Iterator, Optional

import pytest

from gak import Clock, Kernel, ManualClock
from gak.conformance import Target, host_fuzz
from gak.conformance.host_protocol import Case, CaseSkipped, fresh_scripted, load, run_case, unplayable
from gak.conformance.scripted import ScriptedBackend

from conftest import pg_dsn, pg_with

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
    why = unplayable(request.node.callspec.params["case"])
    if why is not None:
        pytest.skip(why)  # before a store is made for it
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
    assert {"transactions.json", "sinks.json", "inputs.json", "runner.json", "urls.json", "workers.json"} <= names
    assert len(CASES) >= 30
    # Only the panic case is skipped, and only it: every other worker case runs.
    skipped = [c.name for c in CASES if unplayable(c) is not None]
    assert skipped == ["worker/a-panic-fails-its-task-and-the-worker-goes-on"], skipped


@pytest.mark.parametrize(("case", "store"), _params())
def test_case(case: Case, store: str, fresh: Any) -> None:
    try:
        run_case(case, store, fresh)
    except CaseSkipped as e:
        pytest.skip(str(e))


# --- the scripted store counts operations as every host does ----------------


def _scripted(faults: list[dict[str, Any]]) -> Any:
    from gak.conformance.scripted import ScriptedBackend

    backend = ScriptedBackend()
    session = backend.session()
    backend.script.arm(faults)
    session.begin()
    return session


def test_a_write_set_is_one_write_operation() -> None:
    from gak.stores.base import StoreFailure

    s = _scripted([{"on": "write", "nth": 2, "answer": "failure"}])
    s.write([("tasks", "a", "{}"), ("indexes", "q/1", "{}"), ("meta", "m", None)])  # the 1st
    with pytest.raises(StoreFailure):
        s.write([("tasks", "b", "{}")])  # the 2nd
    s.put("downstream", "k", "v")  # the 3rd: `times` was 1


def test_a_write_set_touches_every_table_of_its_changes() -> None:
    from gak.stores.base import StoreConflict

    s = _scripted([{"on": "write", "table": "indexes", "answer": "conflict"}])
    s.write([("tasks", "a", "{}"), ("meta", "m", "{}")])  # not on indexes: not counted
    with pytest.raises(StoreConflict):
        s.write([("tasks", "a", "{}"), ("indexes", "q/1", None)])


def test_a_read_is_one_read_operation_however_many_keys_and_ranges() -> None:
    from gak.stores.base import StoreFailure

    s = _scripted([{"on": "read", "nth": 2, "answer": "failure"}])
    s.read([("tasks", "a"), ("tasks", "b"), ("meta", "m")], [("indexes", "q/", None, 10), ("tasks", "", None, 5)])
    s.read([], [], True)  # reads nothing from the store: not an operation
    with pytest.raises(StoreFailure):
        s.get("downstream", "k")  # the 2nd


def test_a_read_touches_the_tables_of_its_keys_and_ranges() -> None:
    from gak.stores.base import StoreFailure

    s = _scripted([{"on": "read", "table": "indexes", "answer": "failure", "times": "all"}])
    s.read([("tasks", "a")], [("tasks", "", None, 5)])
    for keys, ranges in [([("indexes", "i")], []), ([("tasks", "a")], [("indexes", "q/", None, 1)])]:
        with pytest.raises(StoreFailure):
            s.read(keys, ranges)


@pytest.mark.parametrize(
    ("fault", "fails"),
    [
        ({"on": "read", "nth": 2, "answer": "failure"}, False),  # a claim reads once
        ({"on": "write", "nth": 2, "answer": "failure"}, False),  # and writes once
        ({"on": "read", "answer": "failure"}, True),
        ({"on": "write", "table": "indexes", "answer": "failure"}, True),  # its write set touches the queue
        ({"on": "write", "table": "snapshots", "answer": "failure"}, False),
    ],
)
def test_a_claim_is_one_read_and_one_write_on_the_scripted_store(fault: dict[str, Any], fails: bool) -> None:
    from gak import ManualClock, StorageError, TaskSeed

    kernel, backend = fresh_scripted(ManualClock(0))
    kernel.taskboard.seed([TaskSeed("a")])
    backend.script.arm([fault])
    if fails:
        with pytest.raises(StorageError):
            kernel.taskboard.claim("a", "w", 100)
        assert backend.script.counts() == {"begin": 1, "commit": 0, "rollback": 1}
    else:
        assert kernel.taskboard.claim("a", "w", 100).fence == 1
        assert backend.script.counts() == {"begin": 1, "commit": 1, "rollback": 0}
    kernel.close()


# --- the fuzzers' generated cases (tests/host-protocol/fuzz, README "Fuzzers") ----

SQL = host_fuzz.load("sql.json")["cases"]
RETRIES = host_fuzz.load("retries.json")["cases"]
PASSWORDS = host_fuzz.load("passwords.json")


def test_the_fuzz_cases_are_there() -> None:
    # Each file's cases are replayed one test id each below; an empty file
    # would pass them vacuously.
    assert SQL and RETRIES and PASSWORDS["cases"] and PASSWORDS["templates"]
    assert all("{password}" in t for t in PASSWORDS["templates"])


def _fresh_pg(tag: str) -> tuple[Kernel, Any]:
    from gak.stores.postgres import PostgresBackend

    backend = PostgresBackend(pg_with(schema=f"gak_py{tag}_{uuid.uuid4().hex[:10]}"))
    return Kernel(backend, clock=ManualClock(1_000)), backend.drop_schema


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def sql_fuzz(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Kernel, str]]:
    """One fresh store per database for every case of ``sql.json``."""
    if request.param == "sqlite":
        kernel = Kernel.open(f"sqlite:{tmp_path_factory.mktemp('fuzz') / 'sql.db'}", clock=ManualClock(1_000))
        yield kernel, "sqlite"
        kernel.close()
        return
    kernel, drop = _fresh_pg("fz")
    yield kernel, "postgres"
    kernel.close()
    drop()


@pytest.mark.parametrize("i", range(len(SQL)), ids=[f"#{i}" for i in range(len(SQL))])
def test_fuzz_sql(sql_fuzz: tuple[Kernel, str], i: int) -> None:
    kernel, database = sql_fuzz
    host_fuzz.replay_sql(kernel, i, SQL[i], database)


@pytest.fixture(scope="module", params=["scripted", "postgres"])
def retry_fuzz(request: pytest.FixtureRequest) -> Iterator[tuple[Kernel, Optional[ScriptedBackend]]]:
    """One store for every case of ``retries.json``: the scripted one (armed
    per case) or a fresh PostgreSQL schema."""
    if request.param == "scripted":
        backend = ScriptedBackend()
        kernel = Kernel(backend, clock=ManualClock(1_000))
        yield kernel, backend
        kernel.close()
        return
    kernel, drop = _fresh_pg("rt")
    yield kernel, None
    kernel.close()
    drop()


@pytest.mark.parametrize("i", range(len(RETRIES)), ids=[f"#{i}" for i in range(len(RETRIES))])
def test_fuzz_retries(retry_fuzz: tuple[Kernel, Optional[ScriptedBackend]], i: int) -> None:
    kernel, scripted = retry_fuzz
    host_fuzz.replay_retry(kernel, i, RETRIES[i], scripted)


@pytest.mark.parametrize("i", range(len(PASSWORDS["cases"])), ids=[f"#{i}" for i in range(len(PASSWORDS["cases"]))])
def test_fuzz_password(i: int) -> None:
    tried = host_fuzz.replay_password(PASSWORDS["templates"], i, PASSWORDS["cases"][i])
    assert tried == len(PASSWORDS["templates"]) * len(host_fuzz.ENTRY_POINTS)


def test_fuzz_passwords_on_the_command_line() -> None:
    jobs = host_fuzz.cli_jobs(PASSWORDS)
    assert len(jobs) == min(len(PASSWORDS["cases"]), host_fuzz.CLI_CASES) * len(PASSWORDS["templates"])
    assert host_fuzz.replay_cli(jobs) == []
