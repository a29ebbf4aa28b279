"""Finding the kernel component (``gak.wasm``).

Lookup order (the first that exists wins):

1. an explicit path (``Kernel.open(url, component=PATH)``, ``--component FILE``);
2. the ``GAK_COMPONENT`` environment variable;
3. a copy bundled in the installed package (``gak/gak.wasm``: a wheel built
   with ``host/python/build_wheel.py`` carries it, so installing that wheel
   needs nothing else);
4. the repository default where ``cargo build -p gak`` publishes it:
   ``$CARGO_TARGET_DIR/component/gak.wasm`` when ``CARGO_TARGET_DIR`` is set,
   else ``<repo>/target/component/gak.wasm``, the repository being found
   from this package's source location (an editable install) or the current
   directory.

An explicit path or ``GAK_COMPONENT`` that names a missing file is an error,
never a silent fall-through to another copy.
"""

from __future__ import annotations

import os
from importlib import resources
from pathlib import Path
from typing import Optional, Union

from .errors import OpenError

#: The file name everywhere.
NAME = "gak.wasm"


def _repo_root(start: Path) -> Optional[Path]:
    for p in (start, *start.parents):
        if (p / "wit" / "world.wit").is_file() and (p / "Cargo.toml").is_file():
            return p
    return None


def candidates() -> list[tuple[str, Path]]:
    """Where the component is looked for after an explicit path and
    ``GAK_COMPONENT``, in order, with a label for error messages."""
    out: list[tuple[str, Path]] = []
    bundled = resources.files("gak").joinpath(NAME)
    out.append(("bundled in the package", Path(str(bundled))))
    target = os.environ.get("CARGO_TARGET_DIR")
    if target:
        out.append(("$CARGO_TARGET_DIR/component", Path(target) / "component" / NAME))
    for start in (Path(__file__).resolve().parent, Path.cwd().resolve()):
        root = _repo_root(start)
        if root is not None:
            out.append(("repository default", root / "target" / "component" / NAME))
    return out


def find_component(path: Union[str, os.PathLike[str], None] = None) -> Path:
    """The component file, by the lookup order above."""
    if path is not None:
        p = Path(path)
        if not p.is_file():
            raise OpenError(f"component {p} does not exist")
        return p
    env = os.environ.get("GAK_COMPONENT")
    if env:
        p = Path(env)
        if not p.is_file():
            raise OpenError(f"GAK_COMPONENT={env} does not exist")
        return p
    tried = candidates()
    for _, p in tried:
        if p.is_file():
            return p
    listing = "; ".join(f"{label}: {p}" for label, p in tried)
    raise OpenError(
        "cannot find the gak component (gak.wasm). Build it with `cargo build -p gak`, "
        f"or set GAK_COMPONENT. Tried: {listing}"
    )
