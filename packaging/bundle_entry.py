"""Entry point of the standalone bundle (PyInstaller).

A frozen app has no ``python -m``: the evaluator starts its isolated workers as
``<executable> -m kforge_desktop.kernels.worker ...``, so this entry runs such a module itself;
``kforge ...`` runs the CLI when the bundle is called under that name; anything else opens the window.
"""

import os
import runpy
import sys


def _run() -> int:
    if len(sys.argv) >= 3 and sys.argv[1] == "-m":
        module = sys.argv[2]
        sys.argv = [module] + sys.argv[3:]
        runpy.run_module(module, run_name="__main__", alter_sys=True)
        return 0
    if len(sys.argv) >= 3 and sys.argv[1] == "-c":  # a few tools probe the interpreter this way
        code = sys.argv[2]
        sys.argv = ["-c"] + sys.argv[3:]
        exec(compile(code, "<string>", "exec"), {"__name__": "__main__"})
        return 0
    if os.path.basename(sys.argv[0]).startswith("kforge") and not os.path.basename(sys.argv[0]).startswith(
        "kforge-desktop"
    ):
        from kforge_desktop.cli.main import main as cli_main

        return cli_main(sys.argv[1:])
    from kforge_desktop.gui.app import main

    return main(sys.argv[1:])


if __name__ == "__main__":
    sys.exit(_run())
