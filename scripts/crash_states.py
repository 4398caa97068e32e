#!/usr/bin/env python3
"""Crash states of `stk convert` publishing into a generations root (modelled on ALICE, OSDI'14).

A root that already holds one generation is converted into again, and the conversion is killed
(SIGKILL, through the library's test-only hook STK_TEST_CRASH_AT=N) before its N-th durability
operation (create, write, fsync, link, rename, mkdir, unlink, rmdir, directory fsync: the ones
src/core/output_file.cc traces with STK_TEST_FS_TRACE).  For every crash point two states are
checked:

  kill   the directory as the killed process left it (what a kill -9 leaves: the page cache
         survives, so every completed operation is visible);
  power  a simulated power loss at that point, rebuilt from the trace: a file whose data was not
         fsynced is empty; a directory's entries are those it had at its last fsync (creates,
         links, renames, mkdirs and unlinks after it are undone); a directory never fsynced in
         the run keeps its entries from before the run (or, if it is new, has none).

In each state: CURRENT names the old generation or the new one (curr_hash of a complete run),
`stk check ROOT` passes (the current generation and the chain), and a rerun of the conversion
completes, publishes a generation chained to the current one, and `stk check` passes again.

usage: crash_states.py STK MODEL_DIR [--points N] [--jobs J] [--keep]
  --points N   crash points spread evenly over the run, the publication's last operations and the
               end of the run (no crash: the power-loss state of a finished run) always included
               (default 0 = every operation index, and the end)
"""
import argparse
import concurrent.futures
import json
import os
import shutil
import subprocess
import sys
import tempfile

CONVERT_ARGS = ["--partial"]


def run(cmd, env=None, check=True):
    e = dict(os.environ)
    for k in ("STK_TEST_FS_TRACE", "STK_TEST_CRASH_AT"):
        e.pop(k, None)
    if env:
        e.update(env)
    p = subprocess.run(cmd, env=e, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if check and p.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)}: exit {p.returncode}\n{p.stderr[-2000:]}")
    return p


def read_current(root):
    try:
        with open(os.path.join(root, "CURRENT"), "rb") as f:
            text = f.read().decode()
    except FileNotFoundError:
        return None
    name, h = text.rstrip("\n").split(" ")
    return name, h


# ---- power-loss reconstruction --------------------------------------------------------------

class Node:
    __slots__ = ("kind", "entries", "initial_path")

    def __init__(self, kind, initial_path=None):
        self.kind = kind          # "dir" or "file"
        self.entries = {} if kind == "dir" else None
        self.initial_path = initial_path  # for nodes present before the run


def scan(path):
    node = Node("dir" if os.path.isdir(path) else "file", path)
    if node.kind == "dir":
        for n in os.listdir(path):
            node.entries[n] = scan(os.path.join(path, n))
    return node


def power_loss_state(base, killed, trace_lines, out):
    """Rebuild in `out` what a power loss after the traced operations would leave of `killed`
    (which started as a copy of `base`; trace paths name `killed`).  Returns how many files it
    left empty (written but never fsynced)."""
    root = scan(base)
    nodes = []          # every node, kept alive so that id() stays unique
    before = {}         # id(dir) -> its entries before the run (pre-existing directories)
    pre_existing = set()

    def walk(n):
        nodes.append(n)
        pre_existing.add(id(n))
        if n.kind == "dir":
            before[id(n)] = dict(n.entries)
            for c in n.entries.values():
                walk(c)
    walk(root)
    durable_entries = {}  # id(dir) -> its entries at its last fsync
    fsynced = set()       # id(file) whose data was fsynced
    top = killed.rstrip("/")

    def parts(p):
        return [] if p == top else p[len(top) + 1:].split("/")

    def lookup(p):
        n = root
        for c in parts(p):
            n = n.entries[c]
        return n

    def parent(p):
        ps = parts(p)
        return lookup(top + "/" + "/".join(ps[:-1]) if len(ps) > 1 else top), ps[-1]

    for line in trace_lines:
        f = line.split(" ")
        op, a = f[1], f[2]
        b = f[3] if len(f) > 3 else None
        if a != top and not a.startswith(top + "/"):
            continue  # the fsync of the root's parent directory: outside what is rebuilt
        if op == "create":
            d, name = parent(a)
            d.entries[name] = Node("file")
            nodes.append(d.entries[name])
        elif op == "write":
            pass  # the bytes are the killed file's (files are written once, then fsynced)
        elif op == "fsync":
            fsynced.add(id(lookup(a)))
        elif op == "link":
            d, name = parent(b)
            d.entries[name] = lookup(a)
        elif op in ("unlink", "rmdir"):
            d, name = parent(a)
            d.entries.pop(name, None)
        elif op == "rename":
            sd, sn = parent(a)
            node = sd.entries.pop(sn)
            d, name = parent(b)
            d.entries[name] = node
        elif op == "mkdir":
            d, name = parent(a)
            d.entries[name] = Node("dir")
            nodes.append(d.entries[name])
        elif op == "fsyncdir":
            n = lookup(a)
            durable_entries[id(n)] = dict(n.entries)
        else:
            raise AssertionError("unknown trace op " + op)

    where = {}  # id(node) -> a path in the killed directory (for the bytes of new files)

    def locate(n, path):
        where.setdefault(id(n), path)
        if n.kind == "dir":
            for c, child in n.entries.items():
                locate(child, os.path.join(path, c))
    locate(root, top)

    def entries_of(n):
        if id(n) in durable_entries:
            return durable_entries[id(n)]
        return before.get(id(n), {})  # never fsynced: as before the run (a new one: empty)

    truncated = 0

    def materialize(n, path):
        nonlocal truncated
        os.mkdir(path)
        for name, child in entries_of(n).items():
            p = os.path.join(path, name)
            if child.kind == "dir":
                materialize(child, p)
            elif id(child) in pre_existing:
                shutil.copyfile(child.initial_path, p)
            elif id(child) in fsynced:
                src = where.get(id(child))
                if src is None:
                    raise AssertionError(f"power-loss state needs the bytes of an unlinked file ({p})")
                shutil.copyfile(src, p)
            else:
                open(p, "wb").close()  # written, never fsynced: its data is lost
                truncated += 1
    materialize(root, out)
    return {"files_truncated": truncated}


# ---- one crash point --------------------------------------------------------------------------

def check_state(stk, model, root, old, new_hash, label):
    cur = read_current(root)
    assert cur is not None, f"{label}: no CURRENT"
    assert cur == old or cur[1] == new_hash, f"{label}: CURRENT {cur} is neither the old {old} nor the new ({new_hash})"
    c = run([stk, "check", root, "--json"], check=False)
    assert c.returncode == 0, f"{label}: stk check failed: {c.stdout} {c.stderr}"
    assert json.loads(c.stdout)["generation"] == cur[0], f"{label}: check verified another generation"
    r = run([stk, "convert", model, root, "--json"] + CONVERT_ARGS, check=False)
    assert r.returncode == 0, f"{label}: rerun failed: {r.stderr[-1500:]}"
    j = json.loads(r.stdout)
    assert j["published"] and j["previous"] == cur[1], f"{label}: rerun did not chain to {cur[1]}: {j.get('previous')}"
    c = run([stk, "check", root, "--json"], check=False)
    assert c.returncode == 0, f"{label}: stk check after the rerun failed: {c.stdout}"
    assert json.loads(c.stdout)["generation"] == j["generation_name"]
    left = [n for n in os.listdir(root) if n.startswith(".staging-") or n.startswith(".trash-") or n == "CURRENT.tmp"]
    assert not left, f"{label}: leftovers after the rerun: {left}"
    return "new" if cur[1] == new_hash else "old"


def crash_point(stk, model, base, old, new_hash, k, work, n_ops):
    d = os.path.join(work, f"k{k}")
    os.mkdir(d)
    root = os.path.join(d, "root")
    shutil.copytree(base, root)
    trace = os.path.join(d, "trace")
    env = {"STK_TEST_FS_TRACE": trace}
    if k <= n_ops:
        env["STK_TEST_CRASH_AT"] = str(k)
    p = run([stk, "convert", model, root] + CONVERT_ARGS, env=env, check=False)
    if k <= n_ops:
        assert p.returncode == -9, f"crash point {k}: the convert was not killed (exit {p.returncode})"
    else:  # after the last operation: the run completed; a power loss now must keep the new one
        assert p.returncode == 0, f"uninterrupted run: exit {p.returncode}"
    lines = open(trace).read().splitlines() if os.path.exists(trace) else []
    assert len(lines) == k - 1, f"crash point {k}: {len(lines)} operations traced"
    power = os.path.join(d, "power")
    stats = power_loss_state(base, root, lines, power)
    out = {"k": k, "op": None}
    out["power"] = check_state(stk, model, power, old, new_hash, f"crash point {k} (power loss)")
    out["kill"] = check_state(stk, model, root, old, new_hash, f"crash point {k} (kill -9)")
    out["truncated"] = stats["files_truncated"]
    shutil.rmtree(d)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("stk")
    ap.add_argument("model")
    ap.add_argument("--points", type=int, default=0)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--keep", action="store_true")
    a = ap.parse_args()
    stk = os.path.abspath(a.stk)
    model = os.path.abspath(a.model)
    work = tempfile.mkdtemp(prefix="stk-crash-states-")
    try:
        base = os.path.join(work, "base")
        run([stk, "convert", model, base] + CONVERT_ARGS)
        old = read_current(base)
        # The reference: an uninterrupted run from the same state, traced.
        ref = os.path.join(work, "ref")
        shutil.copytree(base, ref)
        trace = os.path.join(work, "ref.trace")
        r = run([stk, "convert", model, ref, "--json"] + CONVERT_ARGS, env={"STK_TEST_FS_TRACE": trace})
        new_hash = json.loads(r.stdout)["generation"]
        ops = open(trace).read().splitlines()
        n = len(ops)
        kinds = [l.split(" ")[1] for l in ops]
        # k = n + 1: after the last operation (the run completed), so that the power-loss model
        # is also asked whether a finished publication survives.
        if a.points <= 0 or a.points >= n:
            points = list(range(1, n + 2))
        else:
            tail = list(range(max(1, n - 15), n + 2))   # the publication: rename, fsyncs, CURRENT swap; the end
            m = a.points - len(tail)  # the rest evenly over the operations before the publication
            spread = [1 + (i * (tail[0] - 2)) // max(1, m - 1) for i in range(m)]
            points = sorted(set(spread + tail))
        print(f"crash_states: {n} durability operations in a convert of {model} into a root with one generation "
              f"({', '.join(f'{kinds.count(x)} {x}' for x in sorted(set(kinds)))}); {len(points)} points "
              f"(crashes before an operation, and the end), 2 states each", flush=True)
        results = []
        with concurrent.futures.ThreadPoolExecutor(max_workers=a.jobs) as ex:
            futs = {ex.submit(crash_point, stk, model, base, old, new_hash, k, work, n): k for k in points}
            for f in concurrent.futures.as_completed(futs):
                res = f.result()
                res["op"] = kinds[res["k"] - 1] if res["k"] <= n else "end"
                results.append(res)
        results.sort(key=lambda r: r["k"])
        first_new_kill = next((r["k"] for r in results if r["kill"] == "new"), None)
        first_new_power = next((r["k"] for r in results if r["power"] == "new"), None)
        states = 2 * len(results)
        kills = sum(1 for r in results if r["k"] <= n)
        print(f"crash_states: {states} states ({kills} kill -9 points and the end of the run, each as left and after a "
              f"power loss), all passed: "
              f"CURRENT old or new and whole, stk check passes, a rerun publishes a chained generation", flush=True)
        def at(k):
            return "never" if k is None else (f"crash point {k} (before op {k}, {kinds[k - 1]})" if k <= n else "the end of the run")
        print(f"crash_states: the new generation is current from {at(first_new_kill)} on after a kill, from "
              f"{at(first_new_power)} on after a power loss; power-loss states with files emptied: "
              f"{sum(1 for r in results if r['truncated'])}", flush=True)
        return 0
    finally:
        if not a.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
