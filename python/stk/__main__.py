"""``python -m stk ARGS``: see stk.cli."""

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
