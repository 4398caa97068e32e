"""`stk eval` and `stk calibrate` against the library's plain forward over the same tokens
(issue 38 item 4; docs/benchmarks.md "stk eval and stk calibrate").

    python bench/eval_calibrate_bench.py MODEL GEN --eval TEXT [--eval TEXT] --fit TEXT [--fit TEXT]
        [--contexts 4] [--runs 3] [--threads 2]

Each run, in this order: the calibrate floor (one plain forward of each calibration context of
512 tokens, --contexts per --fit text, last logits only: what `stk calibrate` computes beside its
moments), the whole `stk calibrate` process on them; the eval floor (two plain forwards of each
eval context with every position's logits: the original and the swapped run, without the swap),
the whole `stk eval --swap ffn:15` process on them.  The whole processes are timed from
outside (fork to exit, model load, tokenizing and the file written included) and report their
peak RSS; the floors are timed in this process around the feeds alone.  The medians and each
ratio are printed; the 1-minute load average before each run too.  STK_LIBRARY / STK_BIN /
PYTHONPATH as for `python -m stk`.
"""
import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

from stk import evaluation
from stk.lm import LanguageModel, Tokenizer


def _cpu(who: int) -> float:
    r = resource.getrusage(who)
    return r.ru_utime + r.ru_stime


def floor(lm: LanguageModel, ctxs: list[list[int]], threads: int, passes: int, all_logits: bool) -> tuple[float, float]:
    """Wall and CPU seconds (this process, every thread) of the plain forwards."""
    seq = lm.sequence(sinks=0, window=512, threads=threads, max_batch=512)
    seq.feed(ctxs[0][:64])  # warm: pages touched, pool started
    t, c = time.monotonic(), _cpu(resource.RUSAGE_SELF)
    for _ in range(passes):
        for ids in ctxs:
            seq.reset()
            seq.feed(ids, all_logits=all_logits)
    return time.monotonic() - t, _cpu(resource.RUSAGE_SELF) - c


def whole(argv: list[str]) -> tuple[float, float, float]:
    """Wall seconds, CPU seconds and peak RSS (GiB) of `python -m stk ARGV` (os.wait4: that
    process's rusage)."""
    t = time.monotonic()
    p = subprocess.Popen([sys.executable, "-m", "stk", *argv], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.monotonic() - t
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        raise SystemExit(f"stk {' '.join(argv)}: exit {p.returncode}")
    return wall, ru.ru_utime + ru.ru_stime, ru.ru_maxrss / 2**20


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("gen")
    ap.add_argument("--eval", action="append", required=True)
    ap.add_argument("--fit", action="append", required=True)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--contexts", type=int, default=4)
    ap.add_argument("--only", choices=("", "calibrate", "eval"), default="")
    a = ap.parse_args()
    print(f"{len(a.fit) * a.contexts} calibration contexts, {len(a.eval) * a.contexts} eval contexts of 512, threads {a.threads}")
    tok = Tokenizer(a.model)
    fit = [ids for _, ids in evaluation.contexts_of(tok, a.fit, 512, a.contexts)]
    ev = [ids for _, ids in evaluation.contexts_of(tok, a.eval, 512, a.contexts)]
    lm = LanguageModel(a.model)
    rows: dict[str, list[float]] = {}
    th = ["--threads", str(a.threads)]

    def put(k: str, v: float) -> None:
        rows.setdefault(k, []).append(v)
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(a.runs):
            load = os.getloadavg()[0]
            if a.only in ("", "calibrate"):
                w, c = floor(lm, fit, a.threads, 1, False)
                put("cal_floor", w)
                put("cal_floor_cpu", c)
                w, c, rss = whole(["calibrate", "--model", a.model, *[x for t in a.fit for x in ("--text", t)],
                                   "--contexts", str(a.contexts), "--out", os.path.join(tmp, "s.stats"), *th])
                put("cal", w)
                put("cal_cpu", c)
                put("cal_rss_gib", rss)
            if a.only in ("", "eval"):
                w, c = floor(lm, ev, a.threads, 2, True)
                put("eval_floor", w)
                put("eval_floor_cpu", c)
                w, c, rss = whole(["eval", "--model", a.model, "--gen", a.gen, *[x for t in a.eval for x in ("--text", t)],
                                   "--contexts", str(a.contexts), "--swap", "ffn:15", *th])
                put("eval", w)
                put("eval_cpu", c)
                put("eval_rss_gib", rss)
            print(f"run {r + 1}: load {load:.2f}  " + "  ".join(f"{k} {v[-1]:.2f}" for k, v in rows.items()), flush=True)
    med = {k: statistics.median(v) for k, v in rows.items()}
    print(f"median of {a.runs}: " + "  ".join(f"{k} {v:.2f}" for k, v in med.items()))
    for what in ("cal", "eval"):
        if what in med:
            print(f"{what}: wall {med[what] / med[what + '_floor']:.2f}x its floor, CPU "
                  f"{med[what + '_cpu'] / med[what + '_floor_cpu']:.2f}x")

if __name__ == "__main__":
    main()
