"""``kforge retime SESSION`` and ``kforge reverify SESSION``: measure a finished session again.

``retime`` times the best few nodes of every problem together with the reference, in one worker
with nothing else running, and the chosen kernel becomes the fastest of that one measurement (a
search does this by itself when it ends). ``reverify`` re-checks and re-times the chosen kernels on
this machine, say after a session was opened on another one.
"""

from __future__ import annotations

from pathlib import Path

from ..search.runner import retime_session, reverify_session
from .errors import UserError
from .eval_cmd import default_device


def register(subparsers) -> None:
    for name, what, fn in (
        ("retime", "re-time the best nodes of a session together and choose from that run", retime_session),
        ("reverify", "re-verify and re-time the chosen kernels of a session on this machine", reverify_session),
    ):
        p = subparsers.add_parser(name, help=what, description=what[0].upper() + what[1:] + ".")
        p.add_argument("session", metavar="SESSION", help="a session file (.kforge)")
        p.add_argument("--device", default=None, help="cpu, cuda or cuda:N (default: the best one here)")
        p.set_defaults(func=lambda args, _fn=fn: _run(args, _fn))


def _run(args, fn) -> int:
    path = Path(args.session).expanduser()
    if not path.exists():
        raise UserError(f"{path} does not exist; give a session file (.kforge).")
    print(fn(path, args.device or default_device(), print))
    return 0
