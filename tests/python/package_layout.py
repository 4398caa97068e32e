"""The wheel's contents without building it: configure the tree as pyproject.toml does
(-Dpython=true ...) and check meson's install plan for the python-runtime tag, the only tag
meson-python installs: the package's modules, its libstk.so and the stk binary, and nothing else.
(The full route, the wheel built, repaired and installed into a fresh venv, is scripts/test.sh's
wheel step: scripts/build-wheel.sh then tests/wheel_install.py.)

usage: package_layout.py MESON SOURCE_ROOT SCRATCH_DIR
"""
import glob
import json
import os
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
    # What ninja builds (pyproject.toml's compile args): the alias of exactly the installed targets.
    compile_args = json.loads(re.search(r"^compile = (\[.*\])$", toml, re.M).group(1))
    assert compile_args == ["python-runtime"], compile_args
    absdir = os.path.abspath(scratch) + os.sep
    built = sorted(os.path.relpath(k, absdir) for sec in plan.values() for k, v in sec.items()
                   if v.get("tag") == "python-runtime" and k.startswith(absdir))
    ninja = open(os.path.join(scratch, "build.ninja")).read()
    alias = re.search(r"^build python-runtime: phony\s*\|?(.*)$", ninja, re.M)
    if not alias or sorted(alias.group(1).split()) != built:
        print(f"the python-runtime alias builds {alias.group(1).split() if alias else None}, the wheel holds {built}")
        return 1
    # every module of python/stk (a module left out of python/meson.build would be missing from the wheel)
    modules = sorted(os.path.basename(f) for f in glob.glob(os.path.join(src, "python", "stk", "*.py")))
    want = sorted("{py_platlib}/stk/" + f for f in modules + ["py.typed", "libstk.so", "_bin/stk"])
    shutil.rmtree(scratch, ignore_errors=True)
    if got != want:
        print(f"python-runtime install plan:\n  got  {got}\n  want {want}")
        return 1
    print(f"python-runtime: {len(got)} files, as expected: {', '.join(got)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
