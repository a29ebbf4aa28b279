"""``python -m gak``: the same commands as the Rust ``gak`` binary.

    python -m gak demo [--store URL] [--component FILE]
    python -m gak conformance [--store URL] [--component FILE] [FILE_OR_DIR ...]
"""

from __future__ import annotations

import argparse
import sys
from typing import Optional, Sequence

from .errors import GakError

USAGE = """\
python -m gak — a crash-safe coordination kernel (the Python host)

usage:
  python -m gak demo [--store URL] [--component FILE]
  python -m gak conformance [--store URL] [--component FILE] [FILE_OR_DIR...]

store URLs: memory:   sqlite:PATH[?synchronous=normal]   postgres://user@host:port/db?schema=NAME
  demo default: sqlite:gak-demo.db      conformance default: memory:
component: --component FILE, else $GAK_COMPONENT, else the copy bundled in the
  package, else <repo>/target/component/gak.wasm (see gak.component)"""


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gak", usage=USAGE, add_help=True)
    parser.add_argument("command", choices=["demo", "conformance"])
    parser.add_argument("--store")
    parser.add_argument("--component")
    parser.add_argument("paths", nargs="*")
    # Intermixed: options may come before or after the paths (`parse_args`
    # binds the empty `paths` at the first option and then refuses the
    # paths that follow it as "unrecognized arguments").
    args = parser.parse_intermixed_args(argv)
    try:
        if args.command == "demo":
            if args.paths:
                parser.error("demo takes no paths")
            from .demo import main as demo

            return demo(args.store or "sqlite:gak-demo.db", args.component)
        from . import conformance

        target = conformance.Target(args.store or "memory:", args.component)
        files = conformance.load_paths(args.paths) if args.paths else conformance.builtin()
        verdicts = conformance.run(target, files)
        sys.stdout.write(conformance.render(verdicts))
        return 0 if verdicts and all(v.failure is None for v in verdicts) else 1
    except GakError as e:
        print(f"gak: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
