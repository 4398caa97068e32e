"""``python -m stk ARGS``: the stk command itself (the binary shipped in the package), so the
arguments, output, ``--json`` objects and exit codes are exactly the command's."""

import os
import sys

from ._lib import binary_path


def main() -> None:
    exe = binary_path()
    os.execv(exe, ["stk", *sys.argv[1:]])


if __name__ == "__main__":
    main()
