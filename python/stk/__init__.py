"""stk, the Sera Transfer Kit, from Python.

The same operations as the ``stk`` command, under the same names::

    import stk
    summary = stk.convert("bindings/testdata/tiny-gpt2", "/tmp/stk-root")   # publish a generation
    with stk.Generation("/tmp/stk-root") as gen:                            # verify and map it
        w = gen.arrays["prf_W.bin"]            # read-only numpy view of the mapped bytes, no copy
    weights = stk.read_lwt("model.lwt")        # name -> numpy array

How it reaches the library (docs/decisions.md, "Python"): the conversion, verification, mapped
arrays, lookups and ``.lwt`` files go through libstk's public C ABI (``stk.h``) with ctypes, which
releases the GIL during every call; the reports the C ABI does not produce (``inspect``,
``check``, ``tokenize``: the ``--json`` objects of the command) come from the ``stk`` binary
shipped inside the package, so they have exactly the command's fields.  ``python -m stk ARGS``
runs that binary.
"""

from __future__ import annotations

from typing import Any

from . import _lib  # noqa: F401 - stk._lib, the ctypes layer (tests use it)
from ._lib import lib as _c
from .convert import ProgressCallback, convert  # noqa: F401 - public type
from .errors import PathLike, Status, StkError  # noqa: F401 - public type
from .generation import Generation
from .lwt import LWT_DTYPES, LwtFile, export_lwt, read_lwt
from .reports import check, inspect, tokenize
from . import runtime  # noqa: F401 - stk.runtime, the reference runtime of the arrays

__all__ = ["Status", "StkError", "inspect", "convert", "check", "tokenize", "Generation", "export_lwt", "read_lwt",
           "LwtFile", "LWT_DTYPES", "version", "eval", "calibrate"]

__version__ = bytes(_c.stk_version_string()).decode()


def version() -> str:
    """The version of the libstk actually loaded ("0.1.0")."""
    return bytes(_c.stk_version_string()).decode()


def eval(*args: Any, **kwargs: Any) -> dict[str, Any]:  # noqa: A001 - the command's name, `stk eval`
    """``stk eval``: the original model against the same forward with modules computed from a
    generation's arrays (stk.evaluation.evaluate; needs ``pip install 'stk[eval]'``), or a
    faithful generation as the library runs it against the original run by the library (numpy
    only; ``reference="transformers"``: the original from transformers)."""
    from .evaluation import evaluate
    return evaluate(*args, **kwargs)


def calibrate(*args: Any, **kwargs: Any) -> dict[str, Any]:
    """``stk calibrate``: activation statistics of a model on text, for ``stk convert --calibration``
    (stk.calibration.calibrate; needs ``pip install 'stk[eval]'``)."""
    from .calibration import calibrate as run
    return run(*args, **kwargs)
