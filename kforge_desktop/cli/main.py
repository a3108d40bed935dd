"""The ``kforge`` command: every job of the desktop app, headless.

Each sub-command lives in its own module under ``cli/`` exposing ``register(subparsers)``; the
module's handler returns an exit code. Errors a user can act on are raised as ``UserError`` and
printed as one sentence (``--debug`` shows the traceback).
"""

from __future__ import annotations

import argparse
import importlib
import sys

from .errors import UserError

# sub-command modules, in the order `kforge --help` lists them
COMMAND_MODULES = (
    "optimize_cmd",  # optimize, resume, show, sample
    "eval_cmd",  # eval
    "profile_cmd",  # profile, bench, export
    "models_cmd",  # models list | fetch-default
    "memory_cmd",  # memory list | show | remove | learn
    "session_cmd",  # retime, reverify
    "gui_cmd",  # desktop
)


def build_parser() -> argparse.ArgumentParser:
    from .. import __version__

    parser = argparse.ArgumentParser(
        prog="kforge",
        description=(
            "Kernel Forge Desktop: a local LLM writes kernels, Monte Carlo Tree Search explores them, "
            "every candidate is built, proven correct and timed in an isolated worker."
        ),
    )
    parser.add_argument("--version", action="version", version=f"kforge {__version__}")
    parser.add_argument("--debug", action="store_true", help="show tracebacks for errors")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(f"{__package__}.{name}").register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 0
    try:
        return int(args.func(args) or 0)
    except UserError as err:
        print(f"kforge: {err}", file=sys.stderr)
        return err.exit_code
    except KeyboardInterrupt:
        print("kforge: interrupted", file=sys.stderr)
        return 130
    except Exception as err:  # last resort: one sentence, traceback only with --debug
        if args.debug:
            raise
        print(f"kforge: unexpected {type(err).__name__}: {err} (run with --debug for details)", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
