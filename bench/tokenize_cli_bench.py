#!/usr/bin/env python3
"""Whole-process tokenizer benchmark: `stk tokenize --json` as a user runs it, against tiktoken and
HF tokenizers run the same way (docs/benchmarks.md, "`stk tokenize`, whole process").

Every row is one process per run, timed from outside by this script with the same clocks: wall
time (perf_counter around the process) and CPU time (user + system of the child, getrusage), so
everything a user waits for counts on both sides: process start, loading the tokenizer (stk parses
tokenizer.json and builds its tables; Node loads the module and its vocabulary), reading the text,
encoding, and printing every id as JSON into a file.  Rows alternate run by run, so a change of
the machine's load hits all alike; medians.  The ids are then checked: stk's bpe ids must equal
tiktoken's and HF tokenizers'; greedy's (uncertified) only their count is shown.

Floor: `cat TEXT > FILE` (a process that reads the text and writes as many bytes).

    python3 bench/tokenize_cli_bench.py [BUILD_DIR (build)] [RUNS (5)] [HF_RUNS (3)]

Needs `npm ci --prefix bench/node`; writes bench/out/english24.txt (scripts/make_english_corpus.py,
24 MB) and the outputs under bench/out/cli/.
"""
import json
import os
import resource
import statistics
import subprocess
import sys
import time

root = os.path.abspath(os.path.join(os.path.dirname(__file__), '..'))
os.chdir(root)
build = sys.argv[1] if len(sys.argv) > 1 else 'build'
runs = int(sys.argv[2]) if len(sys.argv) > 2 else 5
hf_runs = int(sys.argv[3]) if len(sys.argv) > 3 else min(runs, 3)
model = 'tests/data/third_party/gpt2/hf-dir'
text = 'bench/out/english24.txt'
out = 'bench/out/cli'
os.makedirs(out, exist_ok=True)
subprocess.run([sys.executable, 'scripts/make_english_corpus.py', text, '24'], check=True)
n_bytes = os.path.getsize(text)
stk = os.path.join(build, 'src/cli/stk')

rows = [
    ('floor: cat', ['cat', text], runs),
    ('stk tokenize --mode greedy --json', [stk, 'tokenize', '--in', model, '--text', text, '--mode', 'greedy', '--json'], runs),
    ('stk tokenize --mode bpe --json', [stk, 'tokenize', '--in', model, '--text', text, '--mode', 'bpe', '--json'], runs),
    ('tiktoken (Node, whole text)', ['node', 'bench/node/tokenize_cli_peer.js', 'tiktoken', text], runs),
    ('HF tokenizers (Node, 64 KiB chunks)', ['node', 'bench/node/tokenize_cli_peer.js', 'hf_tokenizers', text,
                                             model + '/tokenizer.json'], hf_runs),
]


def run_once(name, argv):
    path = os.path.join(out, name.split(' (')[0].replace(' ', '_').replace('-', '').replace(':', '') + '.json')
    with open(path, 'wb') as f:
        r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        subprocess.run(argv, stdout=f, check=True)
        wall = time.perf_counter() - t0
        r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    return wall, cpu, path


load_before = os.getloadavg()
started = time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())
times = {name: ([], []) for name, _, _ in rows}
paths = {}
for r in range(runs):
    for name, argv, n in rows:
        if r >= n:
            continue
        wall, cpu, paths[name] = run_once(name, argv)
        times[name][0].append(wall)
        times[name][1].append(cpu)
load_after = os.getloadavg()


def ids_of(name):
    with open(paths[name]) as f:
        return json.load(f)['ids']


tik = ids_of('tiktoken (Node, whole text)')
hf = ids_of('HF tokenizers (Node, 64 KiB chunks)')
bpe = ids_of('stk tokenize --mode bpe --json')
greedy = ids_of('stk tokenize --mode greedy --json')
notes = {
    'stk tokenize --mode bpe --json': 'identical to tiktoken: %s; to HF tokenizers: %s' % (bpe == tik, bpe == hf),
    'stk tokenize --mode greedy --json': '%d ids (uncertified greedy; %+.1f %% against BPE)' % (len(greedy), 100.0 * (len(greedy) - len(tik)) / len(tik)),
    'tiktoken (Node, whole text)': '%d ids' % len(tik),
    'HF tokenizers (Node, 64 KiB chunks)': 'identical to tiktoken: %s' % (hf == tik),
}

tik_cpu = statistics.median(times['tiktoken (Node, whole text)'][1])
tik_wall = statistics.median(times['tiktoken (Node, whole text)'][0])
print(f'text: {text}, {n_bytes} bytes; started {started}; load average {load_before[0]:.1f} before, {load_after[0]:.1f} after; '
      f'medians of {runs} runs ({hf_runs} for HF tokenizers)')
print()
print('| process | wall s | CPU s | MB/s wall | MB/s CPU | speed-up vs tiktoken (CPU / wall) | ids |')
print('|---|---:|---:|---:|---:|---:|---|')
for name, _, _ in rows:
    wall = statistics.median(times[name][0])
    cpu = statistics.median(times[name][1])
    print(f'| {name} | {wall:.3f} | {cpu:.3f} | {n_bytes / 1e6 / wall:.1f} | {n_bytes / 1e6 / cpu:.1f} | '
          f'{tik_cpu / cpu:.1f}x / {tik_wall / wall:.1f}x | {notes.get(name, "-")} |')
print()
for name, _, _ in rows:
    print(f'{name}: wall {" ".join("%.3f" % x for x in times[name][0])}; CPU {" ".join("%.3f" % x for x in times[name][1])}')
