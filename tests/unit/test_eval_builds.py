"""Standard-format (``load_inline``) builds of different candidates run side by side: only making
the shared precompiled header takes a machine-wide lock, not every build."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import textwrap

import pytest

BUILD = textwrap.dedent('''
    import sys
    from torch.utils import cpp_extension
    from kforge_desktop.kernels.policy import instrument_extensions

    instrument_extensions(sys.argv[1])
    src = "int twice_%s(int x) { return 2 * x + %s; }" % (sys.argv[2], sys.argv[2])
    mod = cpp_extension.load_inline("overlap", [src], functions=["twice_" + sys.argv[2]])
    assert getattr(mod, "twice_" + sys.argv[2])(20) == 40 + int(sys.argv[2])
''')


def _compiler_that_logs(tmp_path, log) -> str:
    """A C++ compiler wrapper that writes when each compile step starts and ends."""
    cxx = tmp_path / "cxx"
    cxx.write_text(textwrap.dedent(f'''\
        #!/bin/sh
        case " $* " in *" -c "*) echo "start $(date +%s.%N) $$" >> {log};; esac
        c++ "$@"; rc=$?
        case " $* " in *" -c "*) echo "end $(date +%s.%N) $$" >> {log};; esac
        exit $rc
    '''))
    cxx.chmod(cxx.stat().st_mode | stat.S_IEXEC)
    return str(cxx)


@pytest.mark.slow
def test_two_load_inline_builds_overlap(tmp_path):
    log = tmp_path / "compiles.log"
    env = dict(os.environ, CXX=_compiler_that_logs(tmp_path, log), MAX_JOBS="1",
               TORCH_EXTENSIONS_DIR=str(tmp_path / "ext"))
    cache = str(tmp_path / "inline")
    # the first build makes the shared precompiled header (under its lock); then two builds at once
    subprocess.run([sys.executable, "-c", BUILD, cache, "0"], env=env, check=True, timeout=900)
    log.write_text("")
    procs = [subprocess.Popen([sys.executable, "-c", BUILD, cache, str(i)], env=env) for i in (1, 2)]
    assert [p.wait(timeout=900) for p in procs] == [0, 0]
    spans: dict[str, list[float]] = {}
    for line in log.read_text().split("\n"):
        if line:
            what, when, pid = line.split()
            spans.setdefault(pid, []).append(float(when))
    (a0, a1), (b0, b1) = sorted(spans.values())
    assert len(spans) == 2
    assert b0 < a1, f"the second build started compiling {b0 - a1:.1f} s after the first had finished"
