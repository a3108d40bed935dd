"""nvcc's compile errors written as g++ writes the same ones, so that one set of fixes (``autofix``) serves both
compilers."""

from __future__ import annotations

import re

# nvcc's messages, in the form g++ gives the same errors (the fixes below read g++'s)
_NVCC_ERR = re.compile(r"^kernel\.cu\((\d+)\): error: ([^\n]*)((?:\n(?!kernel\.cu\(|\S)[^\n]*)*)", re.M)
_NVCC_TYPES = {"long": "long int", "int64_t": "long int", "int32_t": "int", "size_t": "long unsigned int",
               "unsigned long": "long unsigned int", "long long": "long long int"}


def _assigned_name(context: str) -> str | None:
    """The variable an nvcc "modifiable lvalue" error points at: the name under its caret
    (``if (e > rows) e = rows;`` with ``^`` under the second ``e``), else the one a line starts by assigning."""
    shown = context.split("\n")
    for k in range(1, len(shown)):
        if shown[k].strip() == "^" and (m := re.match(r"\w+", shown[k - 1][shown[k].index("^"):])):
            return m.group(0)
    a = re.search(r"^\s*(\w+)\s*[-+*/]?=", context, re.M)
    return a.group(1) if a else None


def gcc_form(errors: str) -> str:
    """``errors`` with nvcc's messages (``kernel.cu(69): error: expression must be a modifiable lvalue`` and
    the source line below it) also written as g++ writes the same error, so that one set of fixes serves
    both compilers: an undefined identifier, a const pointer initializing a mutable one, an assignment
    to a const local, a std::min/max of two types; any other error keeps its line (``kernel.cu:69:1:``)."""
    extra = []
    for m in _NVCC_ERR.finditer(errors):
        line, msg, context = m.group(1), m.group(2).strip(), m.group(3)
        at = f"kernel.cu:{line}:1: error: "
        if u := re.match(r'identifier "(\w+)" is undefined', msg):
            extra.append(f"{at}‘{u.group(1)}’ was not declared in this scope")
        elif c := re.match(r'a value of type "const (\w+) \*" cannot be used to initialize an entity of type '
                           r'"(\w+) \*"', msg):
            extra.append(f"{at}invalid conversion from ‘const {c.group(1)}*’ to ‘{c.group(2)}*’")
        elif msg == "expression must be a modifiable lvalue" and (name := _assigned_name(context)):
            extra.append(f"{at}assignment of read-only variable ‘{name}’")
        elif (o := re.match(r'no instance of overloaded function "(?:std::)?(max|min)" matches the argument list', msg)) \
                and (t := re.search(r"argument types are: \(([^)]*)\)", context)):
            names = [re.sub(r"^const\s+", "", x.strip()) for x in t.group(1).split(",")]
            types = ", ".join(_NVCC_TYPES.get(x, x) for x in names)
            extra.append(f"{at}no matching function for call to ‘{o.group(1)}({types})’")
        else:
            extra.append(f"{at}{msg}")
    return errors + ("\n" + "\n".join(extra) if extra else "")
