"""Store URLs in messages, without their user information (HOSTS.md rule 14).

A URL's password may hold any character, reserved ones (``/ ? # @ :``) and
spaces included, when its writer did not percent-encode it; so the
authority cannot be found by its delimiters. The user information runs from
``scheme://`` to the LAST ``@`` (the grammar :mod:`.pg_url` parses by, shared
with every host), and all of it is hidden — the user too (in
``postgres://{password}@host`` the "user" is the password) — too much rather
than too little when a later ``@`` belongs to a query. Every ``password=``
option is hidden as well.
"""

from __future__ import annotations

import re
from typing import Optional
from urllib.parse import unquote

HIDDEN = "***"

_PASSWORD_OPTION = re.compile(r"(password=)[^&\s]*", re.IGNORECASE)


def userinfo_span(url: str) -> Optional[tuple[int, int]]:
    """Where the user information of ``url`` starts (after ``://``) and
    ends (its last ``@``), if it has one."""
    scheme_end = url.find("://")
    if scheme_end < 0:
        return None
    start = scheme_end + 3
    at = url.rfind("@", start)
    return None if at < 0 else (start, at)


def password_of(url: str) -> Optional[str]:
    """The password ``url`` carries (as written), or ``None``."""
    span = userinfo_span(url)
    if span is None:
        return None
    _, colon, password = url[span[0] : span[1]].partition(":")
    return password if colon else None


def shown(url: str) -> str:
    """``url`` fit for a message: ``scheme://***@host…``."""
    span = userinfo_span(url)
    if span is not None and span[0] < span[1]:
        url = url[: span[0]] + HIDDEN + url[span[1] :]
    return _PASSWORD_OPTION.sub(r"\1" + HIDDEN, url)


def scrub(text: str, url: str) -> str:
    """``text`` (a driver's message, say) without ``url``'s user information:
    the whole of it and the password, as written and percent-decoded,
    wherever they appear; the user name where it stands as a word (a
    message names it in quotes; a short name would otherwise eat letters of
    other words); and any ``password=`` option."""
    secrets: set[str] = set()
    users: set[str] = set()
    span = userinfo_span(url)
    if span is not None:
        info = url[span[0] : span[1]]
        name, colon, password = info.partition(":")
        if colon:
            secrets |= {info, unquote(info), password, unquote(password)}
        users |= {name, unquote(name)}
    for m in _PASSWORD_OPTION.finditer(url):
        value = m.group(0)[len("password=") :]
        secrets |= {value, unquote(value)}
    secrets.discard("")
    for secret in sorted(secrets, key=len, reverse=True):
        text = text.replace(secret, HIDDEN)
    for name in sorted(users - {""}, key=len, reverse=True):
        text = re.sub(rf"(?<![\w$]){re.escape(name)}(?![\w$])", HIDDEN, text)
    return _PASSWORD_OPTION.sub(r"\1" + HIDDEN, text)
