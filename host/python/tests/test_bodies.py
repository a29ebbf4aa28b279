"""What a fenced sink's body may do inside the kernel's transaction (HOSTS.md
rules 12, 13) and the sizes refused before lowering (rule 16), beyond the
shared cases: the issue's own reproductions (items 2, 3, 8, 9)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any, Callable

import pytest

from gak import Action, Granted, Kernel, ManualClock, Refused, StorageError, TaskSeed
from gak.stores.memory import MemoryBackend, MemorySession


def _ledger(kernel: Kernel, create: str) -> None:
    kernel.with_downstream(lambda down: down.raw.execute(create))


def _rows(kernel: Kernel) -> int:
    return int(kernel.with_downstream(lambda down: down.raw.execute("SELECT count(*) FROM ledger").fetchone()[0]))


# --- SQLite: a body cannot end the kernel's transaction (item 3) -------------


@pytest.fixture
def sqlite_kernel(tmp_path: Path) -> Any:
    k = Kernel.open(f"sqlite:{tmp_path / 'b.db'}", clock=ManualClock(1_000))
    _ledger(k, "CREATE TABLE ledger (id INTEGER PRIMARY KEY, note TEXT)")
    yield k
    k.close()


def test_sqlite_with_conn_in_a_body_commits_nothing(sqlite_kernel: Kernel) -> None:
    # The reproduction: `with conn:` committed the kernel's
    # transaction mid-call; the kernel's COMMIT then failed (storage) while
    # the ledger row and the fence were durable, and a retry wrote twice.
    def body(down: Any) -> None:
        conn = down.raw
        conn.execute("INSERT INTO ledger (note) VALUES (?)", ("paid",))
        with conn:
            pass

    with pytest.raises(Refused) as e:
        sqlite_kernel.sideeffect.write_fenced("ledger", 1, body)
    assert e.value.code == "write-failed"
    assert _rows(sqlite_kernel) == 0 and sqlite_kernel.sideeffect.sink_seen("ledger") == 0

    def once(down: Any) -> None:
        down.raw.execute("INSERT INTO ledger (note) VALUES (?)", ("paid",))

    sqlite_kernel.sideeffect.write_fenced("ledger", 1, once)  # the retry
    assert _rows(sqlite_kernel) == 1 and sqlite_kernel.sideeffect.sink_seen("ledger") == 1


@pytest.mark.parametrize("statement", ["COMMIT", "ROLLBACK", "END", "BEGIN", "SAVEPOINT s", "RELEASE s"])
def test_sqlite_transaction_statements_are_refused_in_a_body(sqlite_kernel: Kernel, statement: str) -> None:
    seen: list[str] = []

    def body(down: Any) -> None:
        down.raw.execute("INSERT INTO ledger (note) VALUES ('x')")
        try:
            down.raw.execute(statement)
        except Exception as e:  # noqa: BLE001 - the body sees the refusal
            seen.append(str(e))

    # The refusal changed nothing: the body carried on and the call commits once.
    sqlite_kernel.sideeffect.write_fenced("ledger", 1, body)
    assert seen == ["not authorized"]
    assert _rows(sqlite_kernel) == 1 and sqlite_kernel.sideeffect.sink_seen("ledger") == 1


def test_sqlite_lent_connection_has_no_commit_and_no_escape(sqlite_kernel: Kernel) -> None:
    kept: list[Any] = []

    def body(down: Any) -> None:
        raw = down.raw
        kept.append(raw)
        for end in (raw.commit, raw.rollback):
            with pytest.raises(Exception, match="refused"):
                end()
        cur = raw.execute("SELECT 1")
        assert not hasattr(cur, "connection") and cur.fetchall() == [(1,)]

    sqlite_kernel.sideeffect.write_fenced("ledger", 1, body)
    with pytest.raises(Exception, match="body that has returned"):
        kept[0].execute("INSERT INTO ledger (note) VALUES ('late')")  # outside any transaction
    assert _rows(sqlite_kernel) == 0


def test_sqlite_a_statement_error_the_body_caught_ends_the_call(sqlite_kernel: Kernel) -> None:
    def insert_if_absent(down: Any) -> None:
        down.raw.execute("INSERT INTO ledger (id, note) VALUES (1, 'first')")
        try:
            down.raw.execute("INSERT INTO ledger (id, note) VALUES (1, 'again')")
        except Exception:  # noqa: BLE001 - "already there": the body carries on
            pass

    with pytest.raises(StorageError):
        sqlite_kernel.sideeffect.write_fenced("ledger", 1, insert_if_absent)
    assert _rows(sqlite_kernel) == 0 and sqlite_kernel.sideeffect.sink_seen("ledger") == 0

    def on_conflict(down: Any) -> None:  # the portable way to write it
        for note in ("first", "again"):
            down.raw.execute("INSERT INTO ledger (id, note) VALUES (1, ?) ON CONFLICT DO NOTHING", (note,))

    sqlite_kernel.sideeffect.write_fenced("ledger", 1, on_conflict)
    assert _rows(sqlite_kernel) == 1


# --- PostgreSQL: a failed statement is never reported committed (item 2) -----


@pytest.fixture
def pg_kernel(pg_backend: Any) -> Any:
    k = Kernel(pg_backend, clock=ManualClock(1_000))
    _ledger(k, f'CREATE TABLE "{pg_backend.schema}".ledger (id int PRIMARY KEY, note text)')
    yield k
    k.close()


def _pg(kernel: Kernel, sql: str) -> str:
    return sql.replace("ledger", f'"{kernel.backend.schema}".ledger')


def _pg_rows(kernel: Kernel) -> int:
    return int(kernel.with_downstream(lambda d: d.raw.execute(_pg(kernel, "SELECT count(*) FROM ledger")).fetchone()[0]))


def test_postgres_insert_if_absent_that_failed_is_storage_not_ok(pg_kernel: Kernel) -> None:
    # The reproduction: the duplicate insert aborted the transaction,
    # the body caught the error, COMMIT was answered with ROLLBACK and
    # write_fenced returned normally; nothing was committed, not even the
    # first insert or the fence.
    def body(down: Any) -> None:
        down.raw.execute(_pg(pg_kernel, "INSERT INTO ledger VALUES (1, 'first')"))
        try:
            down.raw.execute(_pg(pg_kernel, "INSERT INTO ledger VALUES (1, 'again')"))
        except Exception:  # noqa: BLE001 - "already there"
            pass

    with pytest.raises(StorageError):
        pg_kernel.sideeffect.write_fenced("ledger", 1, body)
    assert _pg_rows(pg_kernel) == 0 and pg_kernel.sideeffect.sink_seen("ledger") == 0


@pytest.mark.parametrize(
    "statement",
    ["COMMIT", "  /* why */ rollback", "-- x\nEND", "SAVEPOINT s", "RELEASE s", "ABORT", "BEGIN",
     "START TRANSACTION", "PREPARE TRANSACTION 'x'", "SELECT 1; COMMIT"],
)
def test_postgres_transaction_control_is_refused_before_it_is_sent(pg_kernel: Kernel, statement: str) -> None:
    def body(down: Any) -> None:
        down.raw.execute(_pg(pg_kernel, "INSERT INTO ledger VALUES (1, 'x')"))
        down.raw.execute(statement)

    with pytest.raises(Refused) as e:
        pg_kernel.sideeffect.write_fenced("ledger", 1, body)
    assert e.value.code == "write-failed" and "refused" in str(e.value)
    assert _pg_rows(pg_kernel) == 0 and pg_kernel.sideeffect.sink_seen("ledger") == 0


def test_postgres_commit_checks_that_it_committed(pg_backend: Any) -> None:
    from gak.stores.base import StoreFailure

    s = pg_backend.session()
    try:
        s.begin()
        s.lend()
        with pytest.raises(Exception):
            s.raw.execute("SELECT * FROM gak_no_such_table")
        assert s.reclaim() is not None
        with pytest.raises(StoreFailure, match="rolled back"):
            s.commit()  # the binding never reports the aborted transaction committed
        s.begin()  # and the connection is usable again
        s.put("downstream", "k", "v")
        s.commit()
    finally:
        s.close()


# --- a body behaves alike on SQLite and PostgreSQL (issue 23 item 4) ----------


@pytest.fixture(params=["sqlite", "postgres"])
def sql_kernel(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    """A kernel on either database with a ``ledger`` table (spelled
    ``{ledger}`` in statements, ``{p}`` for a parameter)."""
    if request.param == "sqlite":
        k = Kernel.open(f"sqlite:{tmp_path / 'alike.db'}", clock=ManualClock(1_000))
        names = {"ledger": "ledger", "p": "?"}
    else:
        backend = request.getfixturevalue("pg_backend")
        k = Kernel(backend, clock=ManualClock(1_000))
        names = {"ledger": f'"{backend.schema}".ledger', "p": "%s"}
    k.with_downstream(lambda d: d.raw.execute("CREATE TABLE {ledger} (id int PRIMARY KEY)".format(**names)))
    yield k, names
    k.close()


@pytest.mark.parametrize(
    ("statement", "params", "ends"),
    [
        # The database raised it: the call ends (storage) even though the body caught it.
        pytest.param("SELEC 1", None, True, id="syntax-error"),
        pytest.param("SELECT nope FROM {ledger}", None, True, id="missing-column"),
        pytest.param("SELECT * FROM gak_no_such_table", None, True, id="missing-table"),
        pytest.param("INSERT INTO {ledger} VALUES (1)", None, True, id="unique-violation"),
        # The host (or its driver) refused it before the database ran it: nothing changed.
        pytest.param("COMMIT", None, False, id="transaction-control"),
        pytest.param("SELECT 1; SELECT 2", None, False, id="two-statements"),
        pytest.param("INSERT INTO {ledger} VALUES ({p})", (object(),), False, id="unsendable-value"),
        pytest.param("INSERT INTO {ledger} VALUES ({p})", (2, 3), False, id="wrong-parameter-count"),
    ],
)
def test_a_body_statement_ends_the_call_alike_on_both_databases(
    sql_kernel: Any, statement: str, params: Any, ends: bool
) -> None:
    k, names = sql_kernel
    seen: list[Exception] = []

    def body(down: Any) -> None:
        down.raw.execute("INSERT INTO {ledger} VALUES (1)".format(**names))
        try:
            down.raw.execute(statement.format(**names), *(() if params is None else (params,)))
        except Exception as e:  # noqa: BLE001 - the body carries on, as "insert if absent" does
            seen.append(e)
        down.put("after", "1")

    if ends:
        with pytest.raises(StorageError):
            k.sideeffect.write_fenced("ledger", 1, body)
    else:
        k.sideeffect.write_fenced("ledger", 1, body)
    assert len(seen) == 1
    rows = k.with_downstream(lambda d: d.raw.execute("SELECT count(*) FROM {ledger}".format(**names)).fetchone()[0])
    assert (rows, k.with_downstream(lambda d: d.get("after")), k.sideeffect.sink_seen("ledger")) == (
        (0, None, 0) if ends else (1, "1", 1)
    )


# --- what no store can hold is refused alike on every store (issue 23 item 3) --


@pytest.mark.parametrize(
    ("key", "value"),
    [("k\0", "v"), ("k", "v\0w"), ("\ud800", "v"), ("k", "\udfff"), ("k", b"v"), (1, "v")],
    ids=["nul-key", "nul-value", "surrogate-key", "surrogate-value", "bytes-value", "int-key"],
)
def test_a_downstream_key_or_value_no_store_can_hold_is_invalid_input(kernel: Kernel, key: Any, value: Any) -> None:
    # Memory and SQLite stored a NUL; PostgreSQL refused it only at COMMIT
    # (storage, after the body returned). Now: refused where it is written,
    # typed, nothing written, and the call goes on.
    seen: list[Refused] = []

    def body(down: Any) -> None:
        for op in (lambda: down.put(key, value), lambda: down.get(key) if value == "v" else None):
            try:
                op()
            except Refused as e:
                seen.append(e)
        down.put("k", "ok")

    kernel.sideeffect.write_fenced("r", 1, body)
    assert [e.code for e in seen] == ["invalid-input"] * (2 if value == "v" else 1)
    assert kernel.with_downstream(lambda down: down.get("k")) == "ok"
    assert kernel.sideeffect.sink_seen("r") == 1


# --- re-entrance (item 9) ----------------------------------------------------


def _within(seconds: float, f: Callable[[], Any]) -> Any:
    box: list[Any] = []
    t = threading.Thread(target=lambda: box.append(f()), daemon=True)
    t.start()
    t.join(seconds)
    assert not t.is_alive(), "the call hangs"
    return box[0]


@pytest.mark.parametrize("via", ["write_fenced", "with_downstream"])
def test_a_call_from_a_body_into_the_same_kernel_is_refused(via: str) -> None:
    k = Kernel(MemoryBackend(), clock=ManualClock(0))
    other = Kernel(MemoryBackend(), clock=ManualClock(0))
    inner: list[str] = []

    def body(down: Any) -> None:
        try:
            k.taskboard.seed([TaskSeed("inside")])
            inner.append("ok")
        except Refused as e:
            inner.append(e.code)
        other.taskboard.seed([TaskSeed("elsewhere")])  # another store: allowed
        down.put("k", "v")

    if via == "write_fenced":
        _within(10, lambda: k.sideeffect.write_fenced("r", 1, body))
    else:
        _within(10, lambda: k.with_downstream(body))
    assert inner == ["invalid-input"]
    assert other.taskboard.get("elsewhere").id == "elsewhere"
    with pytest.raises(Refused):
        k.taskboard.get("inside")


# --- sizes before lowering (item 8) ------------------------------------------


class Begins(MemoryBackend):
    def __init__(self) -> None:
        super().__init__()
        self.begins = 0

    def session(self) -> MemorySession:
        backend = self

        class S(MemorySession):
            def begin(self) -> None:
                backend.begins += 1
                super().begin()

        return S(self)


@pytest.mark.parametrize(
    "call",
    [
        pytest.param(lambda k, g: k.sideeffect.complete(Action("k", "r"), g.lease, b"x" * (48 << 20)), id="48MiB-result"),
        pytest.param(lambda k, g: k.sideeffect.complete(Action("k", "r"), g.lease, b"x" * ((1 << 20) + 1)), id="1MiB+1"),
        pytest.param(lambda k, g: k.taskboard.seed([TaskSeed(f"t{i}") for i in range(10_001)]), id="10001-items"),
        pytest.param(lambda k, g: k.taskboard.seed([TaskSeed("é" * 600_000)]), id="1.2MB-of-utf8"),
        pytest.param(lambda k, g: k.taskboard.seed([TaskSeed(f"{i}", "t" * 1_000_000) for i in range(70)]), id="70MB-total"),
        pytest.param(lambda k, g: k.sideeffect.write_fenced("r" * (2 << 20), 1, lambda d: None), id="sink-resource"),
        pytest.param(lambda k, g: k.taskboard.get("\ud800"), id="lone-surrogate"),
        pytest.param(lambda k, g: k.taskboard.claim("a", "w", 1 << 64), id="u64-overflow"),
    ],
)
def test_oversized_or_unsendable_arguments_are_refused_before_a_transaction(call: Any) -> None:
    store = Begins()
    k = Kernel(store, clock=ManualClock(1_000))
    g = k.sideeffect.acquire(Action("k", "r"), 1_000)
    assert isinstance(g, Granted)
    store.begins = 0
    with pytest.raises(Refused) as e:
        call(k, g)
    assert e.value.code == "invalid-input"
    assert store.begins == 0


def test_arguments_at_the_bounds_reach_the_component() -> None:
    store = Begins()
    k = Kernel(store, clock=ManualClock(1_000))
    g = k.sideeffect.acquire(Action("k", "r"), 1_000)
    assert isinstance(g, Granted)
    assert k.sideeffect.complete(Action("k", "r"), g.lease, b"x" * (1 << 20)) == b"x" * (1 << 20)
    with pytest.raises(Refused) as e:  # 257 bytes: the component's to judge
        k.taskboard.seed([TaskSeed("i" * 257)])
    assert e.value.code == "invalid-input" and store.begins == 3
