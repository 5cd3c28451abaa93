"""Run ``ctxledger`` (or ``-m MODULE``) and note how much of its CPU time the drift checker took.

    python benchmarks/_checker_time.py --db URL audit SESSION      # like ``ctxledger --db URL audit SESSION``
    python benchmarks/_checker_time.py -m engine.hooks claude-code  # like ``python -m engine.hooks ...``

Every call of ``projections.grounding.checker.run_checker`` (what the audit, blame, the grounding
cache and the hooks call to check a summary) is timed with the process clock; at exit the process's
total CPU seconds and the checker's are written as JSON to the file ``$CTXLEDGER_CHECKER_TIME`` names.
The benchmarks use it to say what share of each command is the checker's own work.
"""

from __future__ import annotations

import atexit
import importlib.util
import json
import os
import runpy
import sys
import time

_spent = [0.0, 0]


def _timed(original):
    def timed(*args, **kwargs):
        t = time.process_time()
        try:
            return original(*args, **kwargs)
        finally:
            _spent[0] += time.process_time() - t
            _spent[1] += 1

    return timed


class _PatchOnImport:
    """Times ``run_checker`` from the moment its module is loaded (it is not imported here: a
    process that never checks, like a hook for an event it ignores, loads nothing more). The
    modules that import the name afterwards get the timed function. A plain finder (any object with
    ``find_spec``), not an ``importlib.abc.MetaPathFinder``: importing ``importlib.abc`` loads
    importlib.resources, tempfile, shutil, bz2 and lzma, ~10 ms the measured hook does not spend."""

    NAME = "projections.grounding.checker"

    def find_spec(self, name, path, target=None):
        if name != self.NAME:
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        run = spec.loader.exec_module

        def exec_module(module):
            run(module)
            module.run_checker = _timed(module.run_checker)

        spec.loader.exec_module = exec_module
        return spec


def _wrap() -> None:
    sys.meta_path.insert(0, _PatchOnImport())


def _report() -> None:
    path = os.environ.get("CTXLEDGER_CHECKER_TIME")
    if path:
        with open(path, "w") as f:
            json.dump({"cpu": time.process_time(), "checker": _spent[0], "checks": _spent[1]}, f)


def main() -> None:
    args = sys.argv[1:]
    _wrap()
    atexit.register(_report)
    if args[:1] == ["-m"]:
        sys.argv = args[1:]
        runpy.run_module(args[1], run_name="__main__", alter_sys=True)
        return
    from engine.cli import main as cli

    sys.argv = ["ctxledger", *args]
    cli()


if __name__ == "__main__":
    main()
