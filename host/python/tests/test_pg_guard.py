"""A PostgreSQL body cannot end the kernel's transaction (HOSTS.md rule 12;
issue 23 item 1): the guard lexes as the server does, statements go out on
the extended protocol, and the transaction's id is checked after every body
statement — each defence tested on its own, the later ones with the guard
switched off."""

from __future__ import annotations

from typing import Any, Iterator

import psycopg
import pytest

from gak import Kernel, ManualClock, StorageError
from gak.stores import pg_body
from gak.stores.pg_body import TransactionControlRefused
from gak.stores.pg_lex import refusal, statements

#: Texts the guard refuses: the attacker's spellings first.
REFUSED = [
    "-- note\rCOMMIT",  # a `--` comment ends at \r as well as \n
    ";ROLLBACK",
    "/* a */;COMMIT",
    " ;\n;END",
    "\vCOMMIT",  # whitespace to PostgreSQL 16
    "\fcommit",
    "/* /* nested */ */COMMIT",
    "-- x\r\nABORT",
    "prepare/**/transaction 'x'",
    "start\ttransaction",
    "Rollback to savepoint s",
    "release s",
    "COMMIT AND CHAIN",
    "SELECT 1;COMMIT",
    "SELECT 1; SELECT 2",  # more than one statement
    "SELECT 'a\\'' ;COMMIT --'",  # a COMMIT once a body turned standard_conforming_strings off
    "SELECT E'x'\n'\\'' ;COMMIT --'",  # E'…' goes on after a newline, escapes and all
    "SELECT a$$;COMMIT",  # `a$$` is an identifier, no quote
    "SELECT $1$$;COMMIT$$",  # a `$` right after a parameter opens nothing
    "SELECT B'1''\\';COMMIT'",  # B'…' has no ''
    "COMMIT /* unterminated",
    # COPY's rows would cross the connection, a protocol the cursor does not speak
    "COPY t FROM STDIN",
    "copy (select 1) to stdout",
    '/* rows */ COPY "t" (a) TO\nSTDOUT',
    "COPY t FROM stdin -- ;",
]

#: One statement each, whatever they hide in comments and literals.
SINGLE = [
    "SELECT 1",
    "SELECT 1;",
    ";;SELECT 1;; -- done",
    "SELECT $$;COMMIT$$",
    "SELECT $q$ ' ;ROLLBACK $q$",
    "SELECT $a$ $b$ ;ABORT $b$ $a$",
    "SELECT $é$;COMMIT$é$",
    "SELECT 'x;COMMIT'",
    "SELECT 'it''s; ROLLBACK'",
    'SELECT 1 AS "a;END"',
    'SELECT U&"a;b"',
    "SELECT 1 /* /* */ ;COMMIT */",
    "SELECT 1 -- ;ROLLBACK\r",
    "SELECT E'\\';COMMIT'",
    "SELECT 'x'\n'y'",
    "INSERT INTO t VALUES ('commit')",
    "PREPARE q AS SELECT 1",
    "\u00a0COMMIT",  # one identifier (non-ASCII is an identifier character): the server's syntax error
    "SELECT 1 /* unterminated ;COMMIT",
    "SELECT '",
    "SELECT $$ ;COMMIT",
    'SELECT "open',
    "SELECT E'\\",
    "COPY t FROM 'stdin'",  # a server file named stdin: a statement like any
    'COPY "stdin" FROM \'/tmp/rows.csv\'',
    "COPY t TO '/tmp/x' -- STDOUT",
    "SELECT stdin FROM t",
]


@pytest.mark.parametrize("text", REFUSED)
def test_the_guard_refuses_transaction_control_in_any_spelling(text: str) -> None:
    assert refusal(text) is not None


@pytest.mark.parametrize("text", SINGLE)
def test_the_guard_lets_one_statement_through_whatever_it_hides(text: str) -> None:
    assert refusal(text) is None


def test_statements_are_split_as_the_server_splits_them() -> None:
    assert statements("  /* a /* nested */ c */ -- line\r commit") == [("COMMIT",)]
    assert statements("select $1; prepare transaction 'x'") == [("SELECT",), ("PREPARE", "TRANSACTION")]
    assert statements(";; -- nothing\n;") == []
    assert statements("'x' ; y") == [(), ("Y",)]
    # The two readings of '…' differ only in backslashes.
    assert statements("SELECT 'a\\'' ;COMMIT --'") == [("SELECT",)]
    assert statements("SELECT 'a\\'' ;COMMIT --'", backslash_quotes=True) == [("SELECT",), ("COMMIT",)]


# --- on the server -------------------------------------------------------------


@pytest.fixture
def pg_kernel(pg_backend: Any) -> Iterator[Kernel]:
    k = Kernel(pg_backend, clock=ManualClock(1_000))
    schema = pg_backend.schema
    k.with_downstream(lambda d: d.raw.execute(f'CREATE TABLE "{schema}".ledger (id int PRIMARY KEY)'))
    yield k
    k.close()


def _ledger(k: Kernel) -> str:
    return f'"{k.backend.schema}".ledger'


def _rows(k: Kernel) -> list[int]:
    return [r[0] for r in k.with_downstream(lambda d: d.raw.execute(f"SELECT id FROM {_ledger(k)} ORDER BY id").fetchall())]


def _after(k: Kernel) -> Any:
    return k.with_downstream(lambda d: d.get("after"))


@pytest.mark.parametrize("text", [t for t in REFUSED if "unterminated" not in t])
def test_a_refused_text_is_never_sent_and_changes_nothing(pg_kernel: Kernel, text: str) -> None:
    seen: list[Exception] = []
    sent: list[int] = []

    def body(down: Any) -> None:
        down.raw.execute(f"INSERT INTO {_ledger(pg_kernel)} VALUES (1)")
        session = down._worker.session
        sent.append(session.statements)
        try:
            down.raw.execute(text)
        except TransactionControlRefused as e:
            seen.append(e)
        sent.append(session.statements)
        down.put("after", "1")

    pg_kernel.sideeffect.write_fenced("ledger", 1, body)  # the refusal did not end the call
    assert len(seen) == 1 and sent[0] == sent[1]
    assert _rows(pg_kernel) == [1] and _after(pg_kernel) == "1"
    assert pg_kernel.sideeffect.sink_seen("ledger") == 1


@pytest.fixture
def no_guard(monkeypatch: pytest.MonkeyPatch) -> None:
    """The lexer's guard switched off: what the other defences catch alone."""
    monkeypatch.setattr(pg_body, "refusal", lambda text: None)


def test_a_body_statement_goes_out_on_the_extended_protocol(pg_kernel: Kernel, no_guard: None) -> None:
    # The simple protocol (psycopg's choice for a query without parameters)
    # would run both statements; the extended one runs one per call.
    seen: list[str] = []

    def body(down: Any) -> None:
        try:
            down.raw.execute(f"INSERT INTO {_ledger(pg_kernel)} VALUES (1); INSERT INTO {_ledger(pg_kernel)} VALUES (2)")
        except psycopg.Error as e:
            seen.append(str(e))

    with pytest.raises(StorageError):  # an error the server raised ends the call
        pg_kernel.sideeffect.write_fenced("ledger", 1, body)
    assert seen and "cannot insert multiple commands into a prepared statement" in seen[0]
    assert _rows(pg_kernel) == []


def test_a_query_without_parameters_keeps_its_percent_signs(pg_kernel: Kernel) -> None:
    got = pg_kernel.with_downstream(lambda d: d.raw.execute("SELECT '100%', 'a%sb'").fetchone())
    assert got == ("100%", "a%sb")


@pytest.mark.parametrize(
    ("text", "committed"),
    [
        ("-- note\rCOMMIT", True),
        ("COMMIT AND CHAIN", True),  # leaves a transaction open: only the id tells
        (";ROLLBACK AND CHAIN", False),
        ("/* a */ ROLLBACK", False),
    ],
)
def test_the_transaction_check_catches_what_the_guard_missed(
    pg_kernel: Kernel, no_guard: None, text: str, committed: bool
) -> None:
    ledger = _ledger(pg_kernel)
    raised: list[str] = []

    def body(down: Any) -> None:
        down.raw.execute(f"INSERT INTO {ledger} VALUES (1)")
        for step in (
            lambda: down.raw.execute(text),
            lambda: down.put("after", "1"),  # the kernel's deferred write: never sent
            lambda: down.get("other"),
            lambda: down.raw.execute(f"INSERT INTO {ledger} VALUES (2)"),
        ):
            try:
                step()
            except Exception as e:  # noqa: BLE001 - the body carries on, as a careless one would
                raised.append(type(e).__name__)

    with pytest.raises(StorageError):  # never reported committed
        pg_kernel.sideeffect.write_fenced("ledger", 1, body)
    assert raised == ["OperationalError", "StorageError", "OperationalError"]
    # What the body's own COMMIT made durable before the check could see it
    # (the guard's job), and nothing the kernel sent after.
    assert _rows(pg_kernel) == ([1] if committed else [])
    assert _after(pg_kernel) is None
    assert pg_kernel.sideeffect.sink_seen("ledger") == (1 if committed else 0)


def test_a_body_conflict_reruns_the_call_however_often_it_happens(pg_kernel: Kernel) -> None:
    # A statement that fails in a pipeline makes the server skip the rest;
    # psycopg counted one it was preparing there (txid_current(), after its
    # fifth run) as prepared, and the next attempt's EXECUTE of it failed
    # with "prepared statement does not exist" — storage, not a re-run. The
    # rollback now makes psycopg and the server forget them together.
    for i in range(12):
        attempts: list[int] = []

        def body(down: Any) -> None:
            attempts.append(len(attempts))
            down.put(f"k{i}", str(len(attempts)))
            if len(attempts) == 1:
                try:
                    down.raw.execute("DO $$BEGIN RAISE EXCEPTION USING ERRCODE = '40001'; END$$")
                except psycopg.errors.SerializationFailure:
                    pass  # swallowed: the call re-runs all the same

        pg_kernel.sideeffect.write_fenced(f"r{i}", 1, body)
        assert attempts == [0, 1]
        assert pg_kernel.with_downstream(lambda d: d.get(f"k{i}")) == "2"


def test_a_body_cursor_still_runs_many_rows_and_fetches_after_the_round_trip(pg_kernel: Kernel) -> None:
    ledger = _ledger(pg_kernel)

    def body(down: Any) -> Any:
        down.raw.executemany(f"INSERT INTO {ledger} VALUES (%s)", [(1,), (2,), (3,)])
        cur = down.raw.execute(f"SELECT id FROM {ledger} WHERE id >= %s ORDER BY id", (2,))
        return cur.rowcount, cur.fetchall(), cur.statusmessage

    assert pg_kernel.with_downstream(body) == (2, [(2,), (3,)], "SELECT 2")
    assert _rows(pg_kernel) == [1, 2, 3]
