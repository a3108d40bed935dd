"""``kforge memory list | show | remove | learn``: the kernels your sessions verified, kept as exemplars.

A finished search remembers its best kernel when the search wrote it and it beat the search's seeds;
later problems of the same family get it as their example (``search/memory.py``). This command
shows what is remembered and forgets what should not be.
"""

from __future__ import annotations

import json
from pathlib import Path

from .errors import UserError


def register(subparsers) -> None:
    p = subparsers.add_parser("memory", help="list, show or forget the kernels your sessions verified",
                              description="Kernels verified in your own sessions, kept as exemplars for later "
                                          "problems of the same family (stored as plain files in the user data "
                                          "folder; KFORGE_MEMORY_DIR overrides it).")
    sub = p.add_subparsers(dest="memory_command", metavar="ACTION")
    p.set_defaults(func=lambda args: (p.print_help(), 0)[1])

    lst = sub.add_parser("list", help="one line per remembered kernel")
    lst.add_argument("--language", choices=("cpp", "cuda"), help="only kernels of this language")
    lst.add_argument("--json", action="store_true", help="print machine-readable JSON")
    lst.set_defaults(func=_list)

    show = sub.add_parser("show", help="print one remembered kernel (its header and code)")
    show.add_argument("name", help="the kernel's name, as `kforge memory list` prints it")
    show.set_defaults(func=_show)

    rm = sub.add_parser("remove", help="forget one remembered kernel")
    rm.add_argument("name", help="the kernel's name, as `kforge memory list` prints it")
    rm.set_defaults(func=_remove)

    learn = sub.add_parser("learn", help="remember the best kernel of each problem of a session file",
                           description="What a finished search does by itself: remember each problem's fastest "
                                       "verified kernel when the search wrote it and it beat the seeds.")
    learn.add_argument("session", help="a .kforge session file")
    learn.set_defaults(func=_learn)


def _row(ex) -> dict:
    from ..search.memory import speedup_of

    return {"name": ex.name, "language": ex.language, "problem": ex.problem, "ops": list(ex.ops),
            "speedup": speedup_of(ex), "path": ex.path}


def _list(args) -> int:
    from ..search.memory import list_memory, memory_root

    kernels = list_memory(args.language)
    if args.json:
        print(json.dumps({"folder": str(memory_root()), "kernels": [_row(ex) for ex in kernels]}, indent=2))
        return 0
    if not kernels:
        print(f"No remembered kernels (in {memory_root()}). A search remembers its best kernel when the model "
              "or you wrote it and it beat the search's seeds.")
        return 0
    for ex in kernels:
        r = _row(ex)
        speed = f"{r['speedup']:.2f}x" if r["speedup"] else "-"
        print(f"{ex.name:<40} {ex.language:<4} {speed:>7}  {ex.problem}  ({' '.join(ex.ops)})")
    print(f"{len(kernels)} kernel{'s' if len(kernels) != 1 else ''} in {memory_root()}")
    return 0


def _find(name: str):
    from ..search.memory import find

    ex = find(name)
    if ex is None:
        raise UserError(f"no remembered kernel is called {name!r} (see `kforge memory list`).")
    return ex


def _show(args) -> int:
    print(Path(_find(args.name).path).read_text(), end="")
    return 0


def _remove(args) -> int:
    from ..search.memory import remove

    ex = _find(args.name)
    remove(ex.name)
    print(f"forgot {ex.name} ({ex.path})")
    return 0


def _learn(args) -> int:
    from ..search.memory import learn_from_session
    from ..store import SessionStore

    path = Path(args.session)
    if not path.exists():
        raise UserError(f"session file {path} does not exist.")
    store = SessionStore.open(path)
    try:
        learned = 0
        for problem in store.problems():
            ex = learn_from_session(store, problem.id)
            if ex is None:
                print(f"{problem.name}: nothing to remember (no verified kernel of the search's own beat its seeds)")
            else:
                learned += 1
                print(f"{problem.name}: remembered as {ex.name}")
    finally:
        store.close()
    return 0 if learned else 1
