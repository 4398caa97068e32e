"""The reports the C ABI does not produce, from the ``stk`` binary shipped in the package:
``inspect``, ``check`` and ``tokenize`` return the command's ``--json`` object, so they have exactly
its fields (docs/cli.md)."""

from __future__ import annotations

import json
import os
import subprocess
from typing import Any, Optional

from . import _lib
from .errors import PathLike, Status, StkError


def _run_json(command: str, *args: str) -> dict[str, Any]:
    """Run ``stk COMMAND ARGS --json`` and return its one JSON object; StkError when not ok."""
    proc = subprocess.run([_lib.binary_path(), command, *args, "--json"], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True)
    try:
        result = json.loads(proc.stdout)
    except json.JSONDecodeError:
        raise StkError(Status.INTERNAL, f"stk {command} printed no JSON (exit {proc.returncode}): "
                       f"{proc.stderr.strip()[-2000:]}") from None
    # (`stk inspect FILE.lwt --json` prints its own object without the shared keys: the exit code says)
    if not result.get("ok", proc.returncode == 0):
        raise StkError(int(result.get("status_code", Status.INTERNAL)), str(result.get("message", "")), result)
    if not isinstance(result, dict):
        raise StkError(Status.INTERNAL, f"stk {command} printed JSON that is not an object (exit {proc.returncode})")
    return result


def inspect(path: PathLike) -> dict[str, Any]:
    """What ``stk inspect PATH --json`` prints: a checkpoint (architecture, tensors and their roles),
    a generations root or generation (manifest: hash, tokenizer mode, stages, arrays, records), or a
    ``.lwt`` file (header, tensors, CRC32)."""
    return _run_json("inspect", os.fspath(path))


def check(root: PathLike, acceptance: bool = False, model: Optional[PathLike] = None) -> dict[str, Any]:
    """``stk check ROOT --json``: verify the current generation and the chain (every array's
    checksums); with ``acceptance`` also the spec's acceptance tests (``model`` gives them the
    weights).  Returns the command's JSON object; a failed verification raises StkError (status
    STK_E_CHECKSUM, ..., with the object as ``.result``)."""
    args = [os.fspath(root)]
    if acceptance:
        args.append("--acceptance")
    if model is not None:
        args += ["--model", os.fspath(model)]
    return _run_json("check", *args)


def tokenize(src: PathLike, text: str, *, mode: str = "bpe", ltok: Optional[int] = None) -> list[int]:
    """Token ids of ``text``, as ``stk tokenize --in SRC --prompt TEXT --json`` gives them: ``mode``
    "bpe" uses the model's own tokenizer (BPE or SentencePiece), "greedy" the O(1) greedy encoder."""
    args = ["--in", os.fspath(src), "--prompt", text, "--mode", mode]
    if ltok is not None:
        args += ["--ltok", str(ltok)]
    return list(_run_json("tokenize", *args)["ids"])
