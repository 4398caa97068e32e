#!/usr/bin/python3
"""parse_tensors streaming benchmark driver (docs/benchmarks.md, "parse_tensors streaming").

  /usr/bin/python3 bench/parse_bench.py BUILD_DIR DATA_DIR [runs]

For each of DATA_DIR/gpt2 and DATA_DIR/llama7b (written by bench/parse_make_checkpoint.py):
warm the page cache once, then `runs` times (default 3) in turn:
  floor  parse_tensors_bench floor: mmap + sum of every byte as u64 words (the floor: reading
         the same bytes from the page cache)
  cat    `cat FILES > /dev/null` (a peer: the plain read(2) path)
  digest SHA-256 over as many bytes as the checkpoint, in memory, one thread (what the v2
         digest hashes for a BF16 checkpoint: its own cost on one core)
  stk    parse_tensors_bench stk: the stage through the C API (threads = 1)
  stk-t2 the same with threads = 2 (chunks hashed by two workers; same digest)
and print medians of wall time, CPU time and peak RSS, and the bound of seed 1.3
(max layer bytes in f32 + 512 MiB).
"""
import glob
import json
import os
import resource
import statistics
import subprocess
import sys
import time


def timed(cmd, **kw):
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    out = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, **kw).stdout
    wall = time.monotonic() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    return wall, cpu, out


def main():
    build, data = sys.argv[1], sys.argv[2]
    runs = int(sys.argv[3]) if len(sys.argv) > 3 else 3
    exe = os.path.join(build, "bench", "parse_tensors_bench")
    for name in ("gpt2", "llama7b"):
        d = os.path.join(data, name)
        files = sorted(glob.glob(os.path.join(d, "*.safetensors")))
        subprocess.run(["cat"] + files, stdout=subprocess.DEVNULL, check=True)  # warm the page cache
        res = {"floor": [], "cat": [], "digest": [], "stk": [], "stk-t2": []}
        info = None
        for _ in range(runs):
            w, c, out = timed([exe, "floor", d])
            res["floor"].append((w, c, json.loads(out)["peak_rss"]))
            w, c, _ = timed(["sh", "-c", "cat \"$@\" > /dev/null", "cat"] + files)
            res["cat"].append((w, c, 0))
            if info:
                w, c, out = timed([exe, "digest", str(info["bytes"])])
                res["digest"].append((w, c, 0))
            w, c, out = timed([exe, "stk", d])
            info = json.loads(out)
            res["stk"].append((w, c, info["peak_rss"]))
            w, c, out = timed([exe, "stk", d, "2"])  # the digest on a second thread
            info2 = json.loads(out)
            assert info2["digest"] == info["digest"], (info2["digest"], info["digest"])
            res["stk-t2"].append((w, c, info2["peak_rss"]))
        gb = info["bytes"] / 1e9
        bound = info["max_layer_f32"] + (512 << 20)
        print("## %s: %.2f GB in %d file(s), %d parameters, largest layer %.1f MiB in f32" %
              (name, gb, len(files), info["n_params"], info["max_layer_f32"] / 2**20))
        print("| run | wall s (median of %d) | GB/s | CPU s | peak RSS MiB |" % runs)
        print("|---|---|---|---|---|")
        w, c, out = timed([exe, "digest", str(info["bytes"])])
        res["digest"].append((w, c, 0))
        for k in ("floor", "cat", "digest", "stk", "stk-t2"):
            w = statistics.median(x[0] for x in res[k])
            c = statistics.median(x[1] for x in res[k])
            rss = statistics.median(x[2] for x in res[k])
            print("| %s | %.2f | %.2f | %.2f | %s |" % (k, w, gb / w, c, ("%.0f" % (rss / 2**20)) if rss else "-"))
        stk_rss = statistics.median(x[2] for x in res["stk"])
        print("bound (seed 1.3): %.0f MiB; stk peak RSS %.0f MiB (%.0f%% of the bound); digest %s" %
              (bound / 2**20, stk_rss / 2**20, 100.0 * stk_rss / bound, info["digest"]))
        print("all runs (wall s):", {k: [round(x[0], 2) for x in v] for k, v in res.items()})
        print(flush=True)


if __name__ == "__main__":
    main()
