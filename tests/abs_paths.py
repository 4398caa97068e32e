#!/usr/bin/env python3
"""No file of the repository names a machine's home or workspace directory (issue 31 item 3).

Every script and documented command must run from a fresh checkout on another machine, so no
tracked file may point into one machine's home or workspace.  What counts as such a path:

  a top-level root, home, Users, work or workspace folder followed by a name (root's, a user's,
  a workspace's files), or root, work, workspace alone before a space, a colon or the end of the
  line (the examples in test_pattern are built at run time so this file names none itself)

where the slash starts the path (not after a letter, digit, `_`, `.`, `$`, `}`, `)`, `]`, `~`,
`-` or `/`: a path after `$tmp`, `${B}`, `~` or `a` is relative to something).
What does not count: `~/.cache/stk/...` and `$HOME/...` (every machine has its own), `/tmp/NAME`
as a place to write output (a fresh machine has /tmp), `/usr/...` and the other system folders
(Debian's packages put the tools there), and the strings a test concatenates onto a directory
(`out + "/root"`).  Models and data come from `$STK_CACHE` (scripts/fetch-real-models.sh), the
venv from scripts/make-venv.sh, benchmark data from `$STK_BENCH_DATA`.

The files are those `git ls-files` lists (a walk of the tree, skipping hidden folders and meson
build folders, outside a git checkout); binary files are skipped.  ALLOWED below is the whole
allow-list, each entry with its reason; a hit elsewhere fails the test with FILE:LINE and the path.

Usage: abs_paths.py SOURCE_ROOT
"""
import os
import re
import subprocess
import sys

# Path prefixes (relative to the source root) whose files may hold such paths, and why.
ALLOWED = {
    # Fuzzer seeds: real-world config.json files and the fuzzer's mutations of them.  They are
    # inputs, bytes to parse; the paths in them (a model's `_name_or_path` on its author's
    # machine) are nobody's instruction to open anything.
    "fuzz/corpus/": "fuzzer input bytes",
    # Upstream files kept byte for byte (their licence and origin in tests/data/third_party).
    "tests/data/third_party/": "third-party files kept verbatim",
    # This test: its docstring and its pattern spell the paths it looks for.
    "tests/abs_paths.py": "the test itself",
}

_START = r"(?<![A-Za-z0-9_.$})\]~/-])"
_NAME = r"[A-Za-z0-9_.+-]+"
PATTERN = re.compile(
    _START + r"(?:"
    + r"/(?:root|work|workspace)/" + _NAME           # root, work, workspace + a name
    + r"|/(?:home|Users)/" + _NAME                   # home, Users + a user
    + r"|/(?:root|work|workspace)(?=[\s:]|$)"        # /root, /work alone
    + r")")


def tracked_files(root):
    try:
        out = subprocess.run(["git", "-C", root, "ls-files", "-z"], check=True,
                             capture_output=True).stdout
        files = [f for f in out.decode("utf-8", "surrogateescape").split("\0") if f]
        if files:
            return files, "git ls-files"
    except (OSError, subprocess.CalledProcessError):
        pass
    files = []
    for d, dirs, names in os.walk(root):
        dirs[:] = sorted(x for x in dirs if not x.startswith(".")
                         and not os.path.isdir(os.path.join(d, x, "meson-private")))
        for n in sorted(names):
            files.append(os.path.relpath(os.path.join(d, n), root))
    return files, "a walk of the tree"


def allowed(rel):
    return any(rel == a or (a.endswith("/") and rel.startswith(a)) for a in ALLOWED)


def scan(root, files):
    hits = []
    for rel in files:
        path = os.path.join(root, rel)
        if allowed(rel) or os.path.islink(path) or not os.path.isfile(path):
            continue
        with open(path, "rb") as f:
            data = f.read()
        if b"\0" in data[:8192]:
            continue  # binary
        text = data.decode("utf-8", "replace")
        for no, line in enumerate(text.splitlines(), 1):
            for m in PATTERN.finditer(line):
                hits.append(f"{rel}:{no}: {m.group(0)}   ({line.strip()[:120]})")
    return hits


def self_test():
    """The pattern against lines whose answer is known (a broken regex must not pass silently)."""
    r, w, h = "/" + "root", "/" + "work", "/" + "home"  # built here: this file names no such path
    flagged = [f"WHEEL={r}/.cache/x.whl", f"PY={w}/venv/bin/python", f"cd {h}/alice/src",
               "open('/Users/bob/m.gguf')", "HOME=/root", "x=/work:/usr", '"/workspace/a"',
               f"\t{r}/fm/models"]
    clean = ['out + "/root"', f"$tmp{r}/CURRENT", "${B}" + f"{w}/x", "~/.cache/stk/venv",
             "$HOME/.cache/stk", "/tmp/stk-demo", "/usr/bin/python3", f"a{h}/b", f"build{w}/x",
             f"https://github.com{r}/repo", "/worker/x", "/rooted"]
    bad = [s for s in flagged if not PATTERN.search(s)] + [s for s in clean if PATTERN.search(s)]
    if bad:
        sys.exit("abs_paths: the pattern misjudges: " + "; ".join(bad))


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__.strip().splitlines()[-1])
    root = sys.argv[1]
    self_test()
    files, how = tracked_files(root)
    for a in ALLOWED:  # a stale allow-list entry is an error too: the list says what is there
        if not any(f == a or (a.endswith("/") and f.startswith(a)) for f in files):
            sys.exit(f"abs_paths: allow-list entry {a!r} matches no file")
    hits = scan(root, files)
    if hits:
        print(f"abs_paths: {len(hits)} absolute home or workspace path(s) in {how}'s files "
              "(use $STK_CACHE, scripts/make-venv.sh's venv, $STK_BENCH_DATA or a relative path; "
              "tests/abs_paths.py says what counts):")
        for h in hits:
            print("  " + h)
        return 1
    print(f"abs_paths: {len(files)} files ({how}), none names a home or workspace directory "
          f"outside the allow-list ({len(ALLOWED)} entries)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
