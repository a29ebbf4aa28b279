"""What a SQL text is to PostgreSQL: its statements and their leading words,
read by the rules of the server's own scanner (``src/backend/parser/scan.l``).

A sink body's lent cursor (:mod:`.pg_body`) must not let a body end the
kernel's transaction (HOSTS.md rule 12). Matching "the first word" misses
what the server skips before it: a ``--`` comment ends at ``\\r`` as well as
``\\n`` (``-- note\\rCOMMIT`` is a COMMIT), ``/* */`` comments nest, ``;``
starts a new statement (``;ROLLBACK``), and quotes of five kinds hide
everything in them. So the text is lexed here as the server lexes it:

- whitespace is ``[ \\t\\n\\r\\f\\v]`` (``\\v`` since PostgreSQL 16: taking it
  as whitespace everywhere refuses more, never less);
- ``'…'`` with ``''``; ``E'…'`` with backslash escapes; ``B'…'`` / ``X'…'``
  (no ``''``); ``U&'…'``; a literal followed by whitespace holding a newline
  and another ``'`` goes on (SQL's string continuation, in the same kind);
  ``"…"`` and ``U&"…"`` identifiers with ``""``;
- ``$tag$…$tag$`` (tag: a letter, ``_`` or non-ASCII character, then those
  or digits; or empty); a ``$`` that continues an identifier (``a$b``) or a
  number or parameter (``$1``) opens nothing;
- every non-ASCII character is an identifier character, so ``\\u00a0COMMIT``
  is one identifier, not COMMIT (the server answers it with a syntax error);
- ``;`` separates statements; empty ones do not count.

A text the scanner would reject (an unterminated comment, literal or dollar
quote) runs to its end here: it is no more refused than its parts are, and
the server refuses it anyway.
"""

from __future__ import annotations

from typing import Optional

from ._facts import TRANSACTION_CONTROL

#: The phrases (word tuples, upper case) that begin, end or split a
#: transaction: ``PREPARE`` is one only when ``TRANSACTION`` follows.
PHRASES: tuple[tuple[str, ...], ...] = tuple(tuple(p.split()) for p in TRANSACTION_CONTROL)
#: How many leading words of a statement the phrases need.
_WORDS = max(len(p) for p in PHRASES)

_SPACE = frozenset(" \t\n\r\f\v")
_HORIZONTAL = frozenset(" \t\f\v")
_NEWLINE = frozenset("\n\r")


def _ident_start(c: str) -> bool:
    return "a" <= c <= "z" or "A" <= c <= "Z" or c == "_" or c >= "\x80"


def _ident_cont(c: str) -> bool:
    return _ident_start(c) or "0" <= c <= "9" or c == "$"


def _line_end(text: str, i: int) -> int:
    """Where the ``--`` comment at ``i`` ends: at ``\\n`` or ``\\r``."""
    n = len(text)
    while i < n and text[i] not in _NEWLINE:
        i += 1
    return i


def _block_end(text: str, i: int) -> int:
    """The index after the (nested) ``/* */`` comment at ``i``."""
    depth, i, n = 1, i + 2, len(text)
    while i < n:
        if text.startswith("/*", i):
            depth += 1
            i += 2
        elif text.startswith("*/", i):
            depth -= 1
            i += 2
            if depth == 0:
                return i
        else:
            i += 1
    return n


def _continuation(text: str, i: int) -> Optional[int]:
    """The ``'`` that continues the literal closed just before ``i`` (the
    server's ``quotecontinue``: whitespace and ``--`` comments holding at
    least one newline, then ``'``), if one does."""
    n, newline = len(text), False
    while i < n:
        c = text[i]
        if c in _NEWLINE:
            newline = True
            i += 1
        elif c in _HORIZONTAL:
            i += 1
        elif text.startswith("--", i):
            i = _line_end(text, i)
            if i == n:
                return None
        else:
            break
    return i if newline and i < n and text[i] == "'" else None


def _literal_end(text: str, i: int, *, backslash: bool, doubled: bool) -> int:
    """The index after the literal whose opening ``'`` is at ``i``:
    ``backslash`` escapes the next character (``E'…'``), ``doubled`` ``''``
    is a quote inside it (not in ``B'…'`` / ``X'…'``)."""
    n = len(text)
    i += 1
    while i < n:
        c = text[i]
        if c == "\\" and backslash:
            i += 2
        elif c == "'":
            if doubled and i + 1 < n and text[i + 1] == "'":
                i += 2
                continue
            more = _continuation(text, i + 1)
            if more is None:
                return i + 1
            i = more + 1
        else:
            i += 1
    return n


def _identifier_end(text: str, i: int) -> int:
    """The index after the ``"…"`` identifier at ``i``."""
    n = len(text)
    i += 1
    while i < n:
        if text[i] == '"':
            if i + 1 < n and text[i + 1] == '"':
                i += 2
                continue
            return i + 1
        i += 1
    return n


def _dollar_end(text: str, i: int) -> Optional[int]:
    """The index after the dollar-quoted string at ``i``, if ``$`` opens one."""
    n, j = len(text), i + 1
    if j < n and _ident_start(text[j]):
        j += 1
        while j < n and (_ident_start(text[j]) or "0" <= text[j] <= "9"):
            j += 1
    if j >= n or text[j] != "$":
        return None
    tag = text[i : j + 1]
    end = text.find(tag, j + 1)
    return n if end < 0 else end + len(tag)


def _word_end(text: str, i: int) -> int:
    n = len(text)
    while i < n and _ident_cont(text[i]):
        i += 1
    return i


class Words(tuple[str, ...]):
    """A statement's leading words; ``stdio``: a word token of it (not a
    literal or a quoted identifier) is ``STDIN`` or ``STDOUT``."""

    stdio: bool = False


def _words(words: list[str], stdio: bool) -> Words:
    out = Words(words)
    out.stdio = stdio
    return out


def statements(text: str, *, backslash_quotes: bool = False) -> list[Words]:
    """The leading words (upper case, at most as many as a phrase of
    :data:`PHRASES` has) of every non-empty statement of ``text``, in order;
    ``()`` for a statement that does not start with a word. Each is a
    :class:`Words` (a tuple) whose ``stdio`` says whether the statement
    names ``STDIN`` or ``STDOUT``.

    ``backslash_quotes``: read ``'…'`` as the server does after ``SET
    standard_conforming_strings = off`` (backslash escapes, as in ``E'…'``)."""
    out: list[Words] = []
    words: list[str] = []
    stdio = False
    leading = True  # only words seen so far in this statement
    empty = True
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c in _SPACE:
            i += 1
            continue
        if c == "-" and text.startswith("--", i):
            i = _line_end(text, i)
            continue
        if c == "/" and text.startswith("/*", i):
            i = _block_end(text, i)
            continue
        if c == ";":
            if not empty:
                out.append(_words(words, stdio))
            words, stdio, leading, empty = [], False, True, True
            i += 1
            continue
        empty = False
        if _ident_start(c):
            j = _word_end(text, i)
            if j == i + 1 and j < n:
                # One letter before a quote: a prefixed literal, not a word.
                nxt, k = text[j], -1
                if nxt == "'" and c in "eE":
                    k = _literal_end(text, j, backslash=True, doubled=True)
                elif nxt == "'" and c in "bBxX":
                    k = _literal_end(text, j, backslash=False, doubled=False)
                elif nxt == "'" and c in "nN":
                    k = _literal_end(text, j, backslash=backslash_quotes, doubled=True)
                elif c in "uU" and text.startswith("&'", j):
                    k = _literal_end(text, j + 1, backslash=False, doubled=True)
                elif c in "uU" and text.startswith('&"', j):
                    k = _identifier_end(text, j + 1)
                if k >= 0:
                    leading = False
                    i = k
                    continue
            if j - i in (5, 6) and text[i:j].isascii() and text[i:j].upper() in ("STDIN", "STDOUT"):
                stdio = True
            if leading and len(words) < _WORDS:
                word = text[i:j]
                # The server folds ASCII letters only; a word with another
                # character is no keyword anyway.
                words.append(word.upper() if word.isascii() else word)
            i = j
            continue
        leading = False
        if c == "'":
            i = _literal_end(text, i, backslash=backslash_quotes, doubled=True)
        elif c == '"':
            i = _identifier_end(text, i)
        elif c == "$":
            end = _dollar_end(text, i)
            # No quote: a parameter (`$1`) or a lone `$`, with whatever
            # continues it (a `$` right after `$1` opens nothing either).
            i = end if end is not None else _word_end(text, i + 1)
        elif "0" <= c <= "9" or (c == "." and i + 1 < n and "0" <= text[i + 1] <= "9"):
            # A number, with whatever letters, digits, `.` and `$` follow it
            # (`1e5`, `0x1F`, `1_000`, `1$`): no `$` there opens a quote.
            i += 1
            while i < n and (_ident_cont(text[i]) or text[i] == "."):
                i += 1
        else:
            i += 1
    if not empty:
        out.append(_words(words, stdio))
    return out


def refusal(text: str) -> Optional[str]:
    """Why a body may not send ``text`` through the lent cursor, or ``None``:
    a statement that begins, ends or splits the transaction, a ``COPY``
    naming ``STDIN`` or ``STDOUT`` (its rows would cross the connection, a
    protocol of its own that the cursor does not speak), or more than one
    statement — under either reading of ``'…'`` (a body may have turned
    ``standard_conforming_strings`` off), so an ambiguous text is refused."""
    readings = [statements(text), statements(text, backslash_quotes=True)]
    for found in readings:
        for words in found:
            for phrase in PHRASES:
                if words[: len(phrase)] == phrase:
                    return f"{' '.join(phrase)} refused: a body runs inside the kernel's transaction and must not end it"
            if words.stdio and words[:1] == ("COPY",):
                return (
                    "COPY FROM STDIN / TO STDOUT refused: a body's cursor runs statements, not COPY's data "
                    "exchange (write rows with INSERT)"
                )
    if any(len(found) > 1 for found in readings):
        return (
            "a text of more than one statement refused: a body's statement runs in the kernel's "
            "transaction, one per call"
        )
    return None
