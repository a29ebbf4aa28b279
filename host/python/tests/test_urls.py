"""HOSTS.md rule 14: no error or description shows a store URL's password
(issue 17 item 10: an unknown scheme printed it whole)."""

from __future__ import annotations

import subprocess
import sys
import traceback

import pytest

from gak import GakError, Kernel
from gak.stores.urls import password_of, scrub, shown

PASSWORDS = ["S3CRET", "p/a?s#s w0rd", "a@b@c", "with space", "per%40cent", "colon:inside"]


@pytest.mark.parametrize("password", PASSWORDS)
def test_shown_hides_any_password(password: str) -> None:
    url = f"mysql://alice:{password}@127.0.0.1:1/db?x=1"
    assert password_of(url) == password
    out = shown(url)
    assert password not in out and out == "mysql://alice:***@127.0.0.1:1/db?x=1"


def test_shown_keeps_urls_without_a_password() -> None:
    for url in ("postgres://alice@db:5432/x", "postgres://db/x?schema=s", "sqlite:/tmp/a.db", "memory:"):
        assert shown(url) == url
    assert shown("postgres://db/x?password=hunter2&a=b") == "postgres://db/x?password=***&a=b"


def test_scrub_removes_the_password_as_written_and_decoded() -> None:
    url = "postgres://alice:p%40ss@db/x"
    assert scrub("auth failed for p@ss and p%40ss", url) == "auth failed for *** and ***"


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


def test_a_postgres_description_names_the_server_not_the_password(pg_backend: object) -> None:
    from gak.stores.postgres import PostgresBackend

    dsn = pg_backend.dsn  # type: ignore[attr-defined]
    schema = pg_backend.schema  # type: ignore[attr-defined]
    with_password = dsn.replace("://postgres@", "://postgres:S3CRET@", 1).replace("?", f"?schema={schema}&", 1)
    backend = PostgresBackend(with_password, create=False)
    assert "S3CRET" not in backend.describe() and "127.0.0.1" in backend.describe()
    assert "S3CRET" not in repr(Kernel(backend))
