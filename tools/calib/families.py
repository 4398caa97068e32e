"""`stk calibrate` + `stk convert --calibration` + `stk check` on every family fixture.

Each tests/fixtures/families/* model (written by transformers; no tokenizer of its own) is copied
with tests/fixtures/eval/tiny-llama's tokenizer beside it, its ids taken modulo the fixture's
vocabulary of 256, calibrated on a short text, converted with the statistics and checked.  Prints
one line per family: the sections its file holds and the outcome; exit 1 when one fails.

  PYTHONPATH=python STK_LIBRARY=BUILD/libstk.so STK_BIN=BUILD/src/cli/stk python tools/calib/families.py
"""
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import stk
from stk import evaluation

ROOT = Path(__file__).resolve().parents[2]
FAMILIES = ROOT / "tests" / "fixtures" / "families"
TOKENIZER = ROOT / "tests" / "fixtures" / "eval" / "tiny-llama"
SECTIONS = {1: "prf_pairs", 2: "attn_out", 4: "rope_pairs", 8: "ffn"}


def main():
    orig = evaluation.contexts_of
    evaluation.contexts_of = lambda tok, texts, c, n: [(p, [i % 256 for i in ids]) for p, ids in orig(tok, texts, c, n)]
    failed = 0
    with tempfile.TemporaryDirectory(prefix="stk-calib-families-") as tmp:
        text = Path(tmp) / "text.txt"
        text.write_text("the then in hello there, the thin thing in the heather. " * 40, encoding="utf-8")
        for fam in sorted(p.name for p in FAMILIES.iterdir() if (p / "config.json").exists()):
            d = Path(tmp) / fam
            shutil.copytree(FAMILIES / fam, d)
            for f in ("tokenizer.json", "tokenizer_config.json"):
                shutil.copy(TOKENIZER / f, d / f)
            stats, root = Path(tmp) / f"{fam}.stkcal", Path(tmp) / f"{fam}-root"
            try:
                r = stk.calibrate(str(d), [str(text)], str(stats), ctx=32, contexts=2, progress=False)
                sec = sorted({s for layer in r["sections"] for s in layer})
                stk.convert(d, root, calibration=stats, allow_uncertified_tokenizer=True)
                chk = subprocess.run([os.environ.get("STK_BIN", "stk"), "check", str(root)], capture_output=True, text=True)
                if chk.returncode != 0:
                    raise RuntimeError(f"stk check: rc {chk.returncode}: {chk.stderr.strip()[-300:]}")
                print(f"{fam:<16} ok    sections {','.join(sec) or '(none)'}")
            except Exception as e:  # one line per family, every failure listed
                if "trust_remote_code" in str(e):
                    print(f"{fam:<16} skip  transformers loads it only with trust_remote_code (custom code)")
                    continue
                failed += 1
                print(f"{fam:<16} FAIL  {type(e).__name__}: {str(e)[:300]}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
