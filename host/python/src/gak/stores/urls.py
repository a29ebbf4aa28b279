"""Store URLs in messages, without their passwords (HOSTS.md rule 14).

A URL's password may hold any character, reserved ones (``/ ? # @``) and
spaces included, when its writer did not percent-encode it; so the
authority cannot be found by its delimiters. What is hidden is everything
between the first ``:`` after ``scheme://`` and the LAST ``@`` — too much
rather than too little when a later ``@`` belongs to a query — and every
``password=`` option.
"""

from __future__ import annotations

import re
from typing import Optional
from urllib.parse import unquote

HIDDEN = "***"

_PASSWORD_OPTION = re.compile(r"(password=)[^&\s]*", re.IGNORECASE)


def _userinfo(url: str) -> Optional[tuple[int, int]]:
    """Where the password of ``url`` starts and ends, if it has one."""
    scheme_end = url.find("://")
    if scheme_end < 0:
        return None
    start = scheme_end + 3
    at = url.rfind("@", start)
    if at < 0:
        return None
    colon = url.find(":", start, at)
    if colon < 0:
        return None
    return colon + 1, at


def password_of(url: str) -> Optional[str]:
    """The password ``url`` carries (as written), or ``None``."""
    span = _userinfo(url)
    return None if span is None else url[span[0] : span[1]]


def shown(url: str) -> str:
    """``url`` fit for a message: ``scheme://user:***@host…``."""
    span = _userinfo(url)
    if span is not None:
        url = url[: span[0]] + HIDDEN + url[span[1] :]
    return _PASSWORD_OPTION.sub(r"\1" + HIDDEN, url)


def scrub(text: str, url: str) -> str:
    """``text`` (a driver's message, say) with ``url``'s password removed,
    as written and percent-decoded, and any ``password=`` option hidden."""
    secrets = set()
    pw = password_of(url)
    if pw:
        secrets |= {pw, unquote(pw)}
    for m in _PASSWORD_OPTION.finditer(url):
        value = m.group(0)[len("password=") :]
        if value:
            secrets |= {value, unquote(value)}
    for secret in sorted(secrets, key=len, reverse=True):
        text = text.replace(secret, HIDDEN)
    return _PASSWORD_OPTION.sub(r"\1" + HIDDEN, text)
