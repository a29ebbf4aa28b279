"""Build a wheel of the ``gak`` package that carries the component, so that
installing the wheel needs nothing else:

    python build_wheel.py [--component FILE] [--out DIR]

The component defaults to the lookup of :mod:`gak.component` (run
``cargo build -p gak`` first). The copy is placed at ``src/gak/gak.wasm``
only while the wheel is built (it is git-ignored), then removed.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--component")
    p.add_argument("--out", default=str(HERE / "dist"))
    a = p.parse_args()
    sys.path.insert(0, str(HERE / "src"))
    from gak.component import find_component

    source = find_component(a.component)
    bundled = HERE / "src" / "gak" / "gak.wasm"
    shutil.copyfile(source, bundled)
    try:
        subprocess.run(
            [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-w", a.out, str(HERE)],
            check=True,
        )
    finally:
        bundled.unlink(missing_ok=True)
    print(f"wheel with {source} in {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
