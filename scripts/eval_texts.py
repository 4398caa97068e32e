#!/usr/bin/env python3
"""The texts of docs/fidelity.md's end-to-end tables (`stk eval`) and of calibration, made from
what every Python 3.11 ships, so any machine can rebuild them byte for byte: English prose from
the Python Language Reference as `pydoc` carries it (pydoc_data.topics), Python source from the
standard library.  The two halves never overlap: a fit reads the `fit-*` files, a judgement the
`eval-*` files (topics alternate between the two in sorted order; each code file is one module).

    python3 scripts/eval_texts.py OUT_DIR

Writes eval-english.txt, eval-code.txt, fit-english.txt, fit-code.txt and SHA256SUMS into
OUT_DIR, and prints the Python version the text came from (3.11 is what the tables used).
"""
import hashlib
import inspect
import os
import sys

import argparse as _eval_code      # eval-code.txt: argparse.py
import difflib as _fit_code        # fit-code.txt: difflib.py
import pydoc_data.topics as _topics


def main() -> None:
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    keys = sorted(_topics.topics)
    texts = {
        "eval-english.txt": "\n\n".join(_topics.topics[k] for k in keys[0::2]),
        "fit-english.txt": "\n\n".join(_topics.topics[k] for k in keys[1::2]),
        "eval-code.txt": inspect.getsource(_eval_code),
        "fit-code.txt": inspect.getsource(_fit_code),
    }
    sums = []
    for name, text in texts.items():
        data = text.encode("utf-8")
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)
        sums.append(f"{hashlib.sha256(data).hexdigest()}  {name}\n")
    with open(os.path.join(out, "SHA256SUMS"), "w") as f:
        f.writelines(sums)
    print(f"eval_texts: Python {sys.version.split()[0]}: " + ", ".join(f"{n} {len(t)} chars" for n, t in texts.items()))


if __name__ == "__main__":
    main()
