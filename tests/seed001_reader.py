#!/usr/bin/env python3
"""Seed 001's readers read stk's float32 export: `stk export --dtype float32` of the tiny GPT-2
(bindings/testdata/tiny-gpt2), read by tests/seed001_reader.c (a reader written from seed 001's
TensorIndexEntry alone, fread into the C struct), must list the seed's tensors with the source's
shapes and every float32 bit (safetensors' numpy loader; Conv1D weights transposed to [out, in]
as the seed says).  A low-bit export (version 2) is refused by that reader: its header says so.

usage: seed001_reader.py STK_BIN SEED001_READER MODEL_DIR
"""
import os
import subprocess
import sys
import tempfile

import numpy as np
from safetensors.numpy import load_file


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def fnv1a64(b):
    h = 1469598103934665603
    for x in b:
        h = ((h ^ x) * 1099511628211) & 0xFFFFFFFFFFFFFFFF
    return h


def main():
    stk, reader, model = sys.argv[1:4]
    src = load_file(os.path.join(model, "model.safetensors"))
    with tempfile.TemporaryDirectory(prefix="seed001.") as tmp:
        out = os.path.join(tmp, "f32.lwt")
        r = subprocess.run([stk, "export", model, out, "--dtype", "float32"], capture_output=True, text=True)
        if r.returncode:
            fail(f"stk export: {r.stderr}")
        r = subprocess.run([reader, out], capture_output=True, text=True)
        if r.returncode:
            fail(f"the seed 001 reader refused stk's float32 export: {r.stderr}")
        lines = r.stdout.splitlines()
        n_layer = 1 + max(int(k.split(".")[1]) for k in src if k.startswith("h."))
        if len(lines) != 2 + 12 * n_layer + 2:
            fail(f"{len(lines)} tensors, the seed's layout has {2 + 12 * n_layer + 2}")
        for line in lines:
            name, rest = line.split(" ", 1)
            shape_text, digest = rest.rsplit(" ", 1)
            hub = name[len("transformer."):]
            v = src[hub].astype("<f4")
            if v.ndim == 2 and hub.startswith("h.") and hub.endswith(".weight"):
                v = v.T  # Conv1D [in, out] -> [out, in]
            v = np.ascontiguousarray(v)
            want_shape = "[" + ", ".join(str(d) for d in v.shape) + "]"
            if shape_text != want_shape:
                fail(f"{name}: shape {shape_text}, the source gives {want_shape}")
            if int(digest, 16) != fnv1a64(v.tobytes()):
                fail(f"{name}: the values differ from the source")
        print(f"seed 001 reader: {len(lines)} tensors of {out}, every value equal to {model}")

        low = os.path.join(tmp, "i8.lwt")
        r = subprocess.run([stk, "export", model, low, "--dtype", "int8"], capture_output=True, text=True)
        if r.returncode:
            fail(f"stk export int8: {r.stderr}")
        r = subprocess.run([reader, low], capture_output=True, text=True)
        if r.returncode != 1 or "not a version 1 header" not in r.stderr:
            fail(f"the seed 001 reader should refuse a version 2 file by its header: {r.returncode} {r.stderr}")
        print("seed 001 reader: an int8 export (version 2) is refused by its header")
    return 0


if __name__ == "__main__":
    sys.exit(main())
