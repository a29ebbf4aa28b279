"""A PostgreSQL store URL, split by the grammar every host shares
(``tests/store-facts/cases.json`` → ``postgres-url``; HOSTS.md rule 14).

``postgres[ql]://[USER[:PASSWORD]@][HOST[:PORT][,HOST[:PORT]…]][/DBNAME][?NAME=VALUE[&…]]``

A password may hold any character, ``/ ? # @ :`` and spaces included, when
whoever wrote the URL did not percent-encode it; a grammar that cuts the
authority at its first ``/``, ``?`` or ``@`` hands part of the password on as
a host or an option, and messages then show it (``clock=hunter2@…``,
``failed to resolve host 'hunter2@127.0.0.1'``). So:

- the user information runs to the **last** ``@`` after ``://``; user and
  password split at its first ``:``, each percent-decoded leniently (a ``%``
  not followed by two hex digits stays as written, ``+`` stays ``+``);
- then the hosts (``HOST[:PORT]``, comma-separated, ``[v6]`` allowed) up to
  the first ``/`` or ``?``, the database name up to ``?``, and ``&``-separated
  ``NAME=VALUE`` parameters, strictly percent-decoded; a repeated parameter's
  last value wins.

The parts reach libpq as keywords of a connection string this module
writes, never as the URL: libpq never parses the user information again.
No error message holds any of it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Optional

from ..errors import OpenError
from ._facts import POSTGRES_SCHEMES
from .urls import userinfo_span

#: A parameter name libpq (or gak) could know: anything else could not be
#: written into a connection string as one keyword.
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_ESCAPE = re.compile(r"%([0-9A-Fa-f]{2})")


def _decoded(text: str, what: Optional[str]) -> str:
    """``text`` with its ``%XX`` escapes decoded as UTF-8. ``what`` ``None``
    (the user information): leniently — any other ``%`` stays as written,
    bytes that are not UTF-8 become U+FFFD — so what its writer meant
    literally survives. Otherwise strictly: either is an error naming
    ``what`` (never the text)."""
    if "%" not in text:
        return text
    out = bytearray()
    i, n = 0, len(text)
    while i < n:
        m = _ESCAPE.match(text, i)
        if m is not None:
            out.append(int(m.group(1), 16))
            i = m.end()
            continue
        if text[i] == "%" and what is not None:
            raise OpenError(f"postgres URL: {what} holds a '%' that is no percent escape (%XX)")
        out += text[i].encode("utf-8", "surrogatepass")
        i += 1
    if what is None:
        return out.decode("utf-8", "replace")
    try:
        return out.decode("utf-8")
    except UnicodeDecodeError:
        raise OpenError(f"postgres URL: {what} holds percent escapes that are not UTF-8") from None


def _port(text: str) -> int:
    if not (text.isascii() and text.isdigit()) or not 0 < int(text) < 65536:
        raise OpenError(f"postgres URL: port {text!r} (expected a number from 1 to 65535)")
    return int(text)


def _host(item: str) -> tuple[str, Optional[int]]:
    """``HOST[:PORT]`` or ``[V6][:PORT]``."""
    if item.startswith("["):
        close = item.find("]")
        if close < 0:
            raise OpenError("postgres URL: a host's '[' has no ']'")
        name, rest = item[1:close], item[close + 1 :]
        if rest and not rest.startswith(":"):
            raise OpenError("postgres URL: a host's ']' is followed by neither ':' nor ','")
        port_text = rest[1:] if rest else None
    else:
        name, colon, after = item.partition(":")
        port_text = after if colon else None
    port = _port(port_text) if port_text is not None else None
    name = _decoded(name, "a host")
    if "," in name:
        raise OpenError("postgres URL: a host name holds ','")
    return name, port


@dataclass(frozen=True)
class PostgresUrl:
    """The parts of a PostgreSQL URL (``None``: absent). Its ``repr`` shows
    neither user nor password."""

    user: Optional[str] = field(repr=False)
    password: Optional[str] = field(repr=False)
    hosts: tuple[tuple[str, Optional[int]], ...]
    dbname: Optional[str]
    params: dict[str, str] = field(default_factory=dict)

    def target(self) -> str:
        """Where it points, for messages: hosts and database, never the user
        information."""
        hosts = ",".join(
            (f"[{h}]" if ":" in h else h) + ("" if p is None else f":{p}") for h, p in self.hosts
        )
        return f"{hosts or self.params.get('host', 'localhost')}/{self.dbname or ''}"

    def conninfo(self, params: dict[str, str]) -> str:
        """A libpq connection string of these parts and ``params`` (the URL's
        parameters the binding passes on; they win over the URL's parts, as
        libpq's own URL parameters do)."""
        words: dict[str, str] = {}
        if self.hosts:
            words["host"] = ",".join(h for h, _ in self.hosts)
            if any(p is not None for _, p in self.hosts):
                words["port"] = ",".join("" if p is None else str(p) for _, p in self.hosts)
        if self.user is not None:
            words["user"] = self.user
        if self.password is not None:
            words["password"] = self.password
        if self.dbname is not None:
            words["dbname"] = self.dbname
        words.update(params)
        return " ".join(f"{k}={_quoted(v)}" for k, v in words.items())


def _quoted(value: str) -> str:
    """A connection-string value: in quotes, ``\\`` and ``'`` escaped."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def parse(url: str) -> PostgresUrl:
    """Split ``url`` (see the module docs). Raises :class:`OpenError`, whose
    message never holds the user information."""
    scheme = next((s for s in POSTGRES_SCHEMES if url.startswith(s)), None)
    if scheme is None:
        raise OpenError(f"not a PostgreSQL URL (expected {' or '.join(POSTGRES_SCHEMES)})")
    user = password = None
    span = userinfo_span(url)
    rest = url[len(scheme) :]
    if span is not None:
        start, at = span
        name, colon, secret = url[start:at].partition(":")
        user = _decoded(name, None)
        password = _decoded(secret, None) if colon else None
        rest = url[at + 1 :]
    cut = min((i for i in (rest.find("/"), rest.find("?")) if i >= 0), default=len(rest))
    authority, rest = rest[:cut], rest[cut:]
    hosts = tuple(_host(item) for item in authority.split(",") if item)
    dbname: Optional[str] = None
    if rest.startswith("/"):
        path, _, query = rest[1:].partition("?")
        dbname = _decoded(path, "the database name") or None
    else:
        query = rest[1:]
    params: dict[str, str] = {}
    for pair in query.split("&"):
        if not pair:
            continue
        raw_name, eq, raw_value = pair.partition("=")
        name = _decoded(raw_name, "a parameter name")
        if not _NAME.match(name):
            raise OpenError("postgres URL: a parameter name that is not a plain word (letters, digits, '_')")
        if not eq:
            raise OpenError(f"postgres URL: parameter {name!r} has no value (expected {name}=VALUE)")
        params[name] = _decoded(raw_value, f"parameter {name!r}")
    return PostgresUrl(user, password, hosts, dbname, params)
