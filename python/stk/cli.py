"""``stk ARGS`` (the console script pip installs) and ``python -m stk ARGS``: the stk command.  The commands implemented in Python (``eval`` and
``calibrate``, which need torch and transformers) run here; every other command is the binary shipped in the package,
exec'd, so its arguments, output, ``--json`` objects and exit codes are exactly the command's."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence
from typing import Optional

from ._lib import binary_path


def _eval(argv: Sequence[str]) -> int:
    from .evaluation import main
    return main(argv)


def _calibrate(argv: Sequence[str]) -> int:
    from .calibration import main
    return main(argv)


# name -> main(argv) -> exit code; the binary's `stk --help` does not list these, `python -m stk` does
PYTHON_COMMANDS: dict[str, Callable[[Sequence[str]], int]] = {"eval": _eval, "calibrate": _calibrate}


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] in PYTHON_COMMANDS:
        return PYTHON_COMMANDS[args[0]](args[1:])
    if len(args) == 2 and args[0] == "help" and args[1] in PYTHON_COMMANDS:  # stk help eval = stk eval --help
        return PYTHON_COMMANDS[args[1]](["--help"])
    if len(args) == 1 and args[0] in ("--help", "-h", "help"):
        # the console script `stk` (pyproject.toml's [project.scripts]) or `python -m stk`
        prog = "python -m stk" if os.path.basename(sys.argv[0]) == "__main__.py" else "stk"
        print(f"{prog}: the stk command (below), plus the Python commands: "
              + ", ".join(f"`{n}`" for n in PYTHON_COMMANDS) + f" ({prog} eval --help)\n", flush=True)
    exe = binary_path()
    os.execv(exe, ["stk", *args])  # does not return
