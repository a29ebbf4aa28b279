"""HOSTS.md rule 14: no error or description shows a store URL's password
(issue 17 item 10: an unknown scheme printed it whole; issue 23: a password
holding '?' or '@' was cut by the URL parser and shown as an option or a
host). The generated passwords of ``tests/host-protocol/fuzz`` go through
every entry point in ``test_host_protocol.py``."""

from __future__ import annotations

import subprocess
import sys
import traceback

import pytest

from gak import GakError, Kernel
from gak.stores.urls import password_of, scrub, shown

from conftest import pg_with

PASSWORDS = ["S3CRET", "p/a?s#s w0rd", "a@b@c", "with space", "per%40cent", "colon:inside", "p?clock=hunter2", "p@hunter2"]


@pytest.mark.parametrize("password", PASSWORDS)
def test_shown_hides_any_password(password: str) -> None:
    url = f"mysql://alice:{password}@127.0.0.1:1/db?x=1"
    assert password_of(url) == password
    out = shown(url)
    # Everything between :// and the last @ (the user too): where a parser
    # would cut is what an attacker's password chooses.
    assert password not in out and out == "mysql://***@127.0.0.1:1/db?x=1"


def test_shown_hides_the_user_too_and_keeps_urls_without_user_information() -> None:
    assert shown("postgres://alice@db:5432/x") == "postgres://***@db:5432/x"
    assert shown("postgres://hunter2@db/x") == "postgres://***@db/x"  # a password written without its user
    for url in ("postgres://db/x?schema=s", "sqlite:/tmp/a.db", "memory:"):
        assert shown(url) == url
    assert shown("postgres://db/x?password=hunter2&a=b") == "postgres://db/x?password=***&a=b"


def test_scrub_removes_the_password_as_written_and_decoded() -> None:
    url = "postgres://alice:p%40ss@db/x"
    assert scrub("auth failed for p@ss and p%40ss", url) == "auth failed for *** and ***"


def test_scrub_removes_the_user_where_it_stands_as_a_word() -> None:
    url = "postgres://al%69ce:pw@db/x"
    assert scrub('password authentication failed for user "alice"', url) == (
        'password authentication failed for user "***"'
    )
    # A short user name does not eat the letters of other words.
    assert scrub('role "u" does not exist', "postgres://u@db/x") == 'role "***" does not exist'


@pytest.mark.parametrize("password", PASSWORDS)
@pytest.mark.parametrize(
    "template",
    [
        "postgresql+psycopg://alice:{}@127.0.0.1:1/db",
        "mysql://alice:{}@127.0.0.1:1/db",
        "postgres://alice:{}@127.0.0.1:1/db?connect_timeout=2",
        "postgres://alice:{}@127.0.0.1:1/db?schema=Bad-Name",
        "postgres://alice:{}@127.0.0.1:1/db?clock=sometimes",
    ],
)
def test_open_errors_never_show_the_password(template: str, password: str) -> None:
    url = template.format(password)
    with pytest.raises(GakError) as e:
        Kernel.open(url)
    everything = "".join(traceback.format_exception(e.value))
    assert password not in everything, everything


def test_the_cli_never_prints_the_password() -> None:
    url = "postgresql+psycopg://alice:S3CRET@127.0.0.1:1/db"
    out = subprocess.run([sys.executable, "-m", "gak", "conformance", "--store", url], capture_output=True, text=True)
    assert out.returncode == 2 and "unknown store" in out.stderr
    assert "S3CRET" not in out.stdout + out.stderr


@pytest.mark.parametrize(
    ("url", "secret"),
    [
        # The attacker's two: '?' in the password made the rest of it an
        # option (`clock=hunter2@… (expected db or host)`); a second '@'
        # made part of it the host (`failed to resolve host 'hunter2@…'`).
        ("postgres://alice:p?clock=hunter2@127.0.0.1:1/test", "hunter2"),
        ("postgres://alice:p@hunter2@127.0.0.1:1/test", "hunter2"),
    ],
)
def test_a_password_holding_question_marks_or_ats_is_not_cut(url: str, secret: str) -> None:
    with pytest.raises(GakError) as e:
        Kernel.open(url)
    everything = "".join(traceback.format_exception(e.value))
    assert secret not in everything, everything
    assert "127.0.0.1:1" in everything  # the host the grammar found: the real one


@pytest.mark.parametrize("password", PASSWORDS + ["it's", "back\\slash", "sp ace=x host=evil"])
def test_libpq_gets_the_password_as_a_keyword_byte_for_byte(password: str) -> None:
    from psycopg.conninfo import conninfo_to_dict

    from gak.stores import pg_url

    parts = pg_url.parse(f"postgres://alice:{password}@db:5/x?application_name=a%20b")
    assert parts.password == password.replace("%40", "@")  # user information is percent-decoded
    assert conninfo_to_dict(parts.conninfo(parts.params)) == {
        "host": "db",
        "port": "5",
        "user": "alice",
        "password": parts.password,
        "dbname": "x",
        "application_name": "a b",
    }


def test_a_postgres_description_names_the_server_not_the_password(pg_backend: object) -> None:
    from gak.stores.postgres import PostgresBackend

    schema = pg_backend.schema  # type: ignore[attr-defined]
    with_password = pg_with(schema=schema).replace("://postgres@", "://postgres:S3@CRET@", 1)
    backend = PostgresBackend(with_password, create=False)
    assert "S3" not in backend.describe() and "CRET" not in backend.describe()
    assert "127.0.0.1" in backend.describe() and "://postgres" not in backend.describe()  # nor the user
    assert "CRET" not in repr(Kernel(backend))
    backend.connect().close()  # the host is the one after the last '@' (trust auth: any password)


def test_the_parsed_parts_do_not_show_the_user_information() -> None:
    from gak.stores import pg_url

    parts = pg_url.parse("postgres://al1ce:S3CRET@db:5/x")
    assert (parts.user, parts.password) == ("al1ce", "S3CRET")
    assert "S3CRET" not in repr(parts) and "al1ce" not in repr(parts)
