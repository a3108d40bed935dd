"""Can this problem be searched at all? Asked when a problem file or a session is opened, so a
``get_inputs()`` that raises is one clear sentence at once, not a search that goes straight to the
model and a warning about scaffolding minutes later.

The problem file is the user's own code (``load_problem`` already imports it in this process);
the check calls ``get_inputs()`` and builds ``Model(*get_init_inputs())`` on PyTorch's ``meta``
device, so it allocates no memory and computes nothing, whatever the shapes. Code written by the
model never goes through here.
"""

from __future__ import annotations

from ..problem.problem import Problem, ProblemError


def problem_trouble(problem: Problem) -> str | None:
    """One sentence saying why ``problem`` cannot be searched, or None when it can."""
    where = problem.path or problem.name
    try:
        mod = problem.load_module()
    except ProblemError as err:
        return str(err)
    import torch

    fix = f"fix {where} and open it again."
    with torch.device("meta"):
        try:
            inputs = mod.get_inputs()
            if not isinstance(inputs, (list, tuple)):
                return f"{problem.name}: get_inputs() must return a list of inputs, not {type(inputs).__name__}; {fix}"
        except Exception as err:
            if _only_meta(err):
                return None
            return f"{problem.name}: get_inputs() raised {type(err).__name__}: {_short(err)}; {fix}"
        try:
            init = mod.get_init_inputs()
            mod.Model(*init)
        except Exception as err:
            if _only_meta(err):
                return None
            return f"{problem.name}: Model(*get_init_inputs()) raised {type(err).__name__}: {_short(err)}; {fix}"
    return None


def _short(err: BaseException) -> str:
    text = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
    return text.rstrip(".")[:200]


def _only_meta(err: BaseException) -> bool:
    """Errors only the meta device causes (a ``.cuda()`` or ``.item()`` in the file): not the
    user's bug; the evaluator runs the problem for real."""
    return "meta" in str(err).lower()


class ProblemChecks:
    """The verdict of ``problem_trouble`` per problem source (a session is checked once).

    A problem file is checked when it is opened (it is imported then anyway). A session file is
    plain data: opening one runs none of its code, so its problem is checked when Start is pressed
    (``trouble``), and from then on Start stays off with the sentence (``known``)."""

    def __init__(self) -> None:
        self._seen: dict[str, str | None] = {}

    @staticmethod
    def _key(record) -> str | None:
        if record is None or (record.info or {}).get("modelopt"):
            return None  # a whole-model target was captured from the running model: not checked again
        return record.digest or record.source

    def known(self, record) -> str | None:
        """What an earlier check said about this problem (None when it passed or never ran)."""
        key = self._key(record)
        return self._seen.get(key) if key else None

    def trouble(self, record) -> str | None:
        """Check a stored problem (``ProblemRecord``) now, once."""
        key = self._key(record)
        if key is None:
            return None
        if key not in self._seen:
            self._seen[key] = problem_trouble(record.to_problem())
        return self._seen[key]
