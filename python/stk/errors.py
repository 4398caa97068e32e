"""libstk's status codes and the exception every failure raises."""

from __future__ import annotations

import enum
import os
from typing import Any, Optional, Union

from ._lib import lib as _c

PathLike = Union[str, "os.PathLike[str]"]


class Status(enum.IntEnum):
    """stk_status: libstk's status codes (values pinned by stk.h)."""
    OK = 0
    INVALID_ARGUMENT = 1
    STRUCT_SIZE = 2
    ARENA_TOO_SMALL = 3
    NOT_IMPLEMENTED = 4
    STAGE_ORDER = 5
    CANCELLED = 6
    IO = 10
    NOT_FOUND = 11
    OUTPUT_EXISTS = 12
    TRUNCATED = 20
    BAD_MAGIC = 21
    BAD_DTYPE = 22
    BAD_RANK = 23
    DIMS_OVERFLOW = 24
    SIZE_MISMATCH = 25
    MISALIGNED = 26
    CHECKSUM = 27
    MISSING_ARRAY = 28
    SCHEMA = 29
    BAD_HEADER = 30
    CORRUPT = 31
    UNSUPPORTED = 40
    UNSAFE_PICKLE = 41
    LFS_POINTER = 42
    UNKNOWN_MODEL = 43
    BAD_JSON = 44
    NONFINITE = 45
    PARAM_COUNT = 46
    SP_REJECTED = 60
    MPHF_EXHAUSTED = 61
    TABLE_FULL = 62
    KEY_NOT_FOUND = 63
    NOMEM = 90
    INTERNAL = 99


class StkError(Exception):
    """A libstk failure: ``status`` (an int, a :class:`Status` when known), ``status_name``
    ("STK_E_CHECKSUM") and ``message`` (names the file, tensor and offset where there is one).
    Errors reported by the ``stk`` command also carry its whole ``--json`` object as ``result``."""

    def __init__(self, status: int, message: str, result: Optional[dict[str, Any]] = None) -> None:
        try:
            self.status: int = Status(status)
        except ValueError:
            self.status = status
        self.status_name: str = _c.stk_status_str(status).decode().split(":")[0]
        self.message: str = message
        self.result = result
        super().__init__(f"{self.status_name}: {message}")


def _raise(status: int) -> None:
    """stk_last_error() is per thread: call this on the thread that made the failing call."""
    if status != 0:
        raise StkError(status, (_c.stk_last_error() or b"").decode("utf-8", "replace"))



def _p(path: PathLike) -> bytes:
    return os.fsencode(os.fspath(path))
