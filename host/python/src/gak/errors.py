"""The two exception types of the API.

Every refusal of the contract is a :class:`Refused` whose :attr:`~Refused.code`
is the spec's kebab-case variant name (``"lease-lost"``, ``"fence-stale"`` …);
callers branch on ``code``, never on the message. A failing store (or a
component that trapped) is a :class:`StorageError`: never a contract outcome.
"""

from __future__ import annotations

from ._contract import CODES

__all__ = ["CODES", "GakError", "OpenError", "Refused", "StorageError"]


class GakError(Exception):
    """Base of the errors gak raises (catch this to catch both kinds)."""

    #: The contract's variant name.
    code: str


class Refused(GakError):
    """The kernel refused the call; the store is unchanged.

    ``code`` is the contract's kebab-case variant (``"taken"``,
    ``"lease-lost"``, …); ``detail`` is for humans (the payload of
    ``invalid-plan`` / ``invalid-input``, else empty).
    """

    def __init__(self, code: str, detail: str = "") -> None:
        if code not in CODES:
            raise ValueError(f"unknown refusal code {code!r}")
        self.code = code
        self.detail = detail
        super().__init__(f"{code}: {detail}" if detail else code)

    def __reduce__(self):  # type: ignore[no-untyped-def]
        return (Refused, (self.code, self.detail))


class StorageError(GakError):
    """The store failed (I/O, lost connection, persistent conflicts, a trapped
    component). Never a contract outcome: the call may or may not have been
    applied only when the failure hit the commit itself."""

    code = "storage"

    def __init__(self, detail: str) -> None:
        self.detail = detail
        super().__init__(f"storage: {detail}")

    def __reduce__(self):  # type: ignore[no-untyped-def]
        return (StorageError, (self.detail,))


class OpenError(GakError):
    """A store URL or component could not be opened (bad option, missing file)."""

    code = "open"
