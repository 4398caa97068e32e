"""The wheel's contents without building it: configure the tree as pyproject.toml does
(-Dpython=true ...) and check meson's install plan for the python-runtime tag, the only tag
meson-python installs: the package's modules, its libstk.so and the stk binary, and nothing else.
(The full route, `python -m build` then a fresh venv, is too slow for every CI run; it is recorded
in docs/decisions.md, "Python".)

usage: package_layout.py MESON SOURCE_ROOT SCRATCH_DIR
"""
import json
import shutil
import subprocess
import sys
import re


def main() -> int:
    meson, src, scratch = sys.argv[1:4]
    toml = open(f"{src}/pyproject.toml").read()
    setup = json.loads(re.search(r"^setup = (\[.*\])$", toml, re.M).group(1))
    install = json.loads(re.search(r"^install = (\[.*\])$", toml, re.M).group(1))
    assert install == ["--tags=python-runtime"], install
    shutil.rmtree(scratch, ignore_errors=True)
    r = subprocess.run([meson, "setup", scratch, *setup], cwd=src, capture_output=True, text=True)
    if r.returncode != 0:
        print(r.stdout[-3000:], r.stderr[-3000:])
        return 1
    plan = json.loads(subprocess.run([meson, "introspect", scratch, "--install-plan"], capture_output=True,
                                     text=True, check=True).stdout)
    got = sorted(v["destination"] for sec in plan.values() for v in sec.values() if v.get("tag") == "python-runtime")
    want = sorted("{py_platlib}/stk/" + f for f in
                  ["__init__.py", "__main__.py", "_lib.py", "py.typed", "runtime.py", "libstk.so", "_bin/stk"])
    shutil.rmtree(scratch, ignore_errors=True)
    if got != want:
        print(f"python-runtime install plan:\n  got  {got}\n  want {want}")
        return 1
    print(f"python-runtime: {len(got)} files, as expected: {', '.join(got)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
