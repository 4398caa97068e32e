"""The repaired wheel as a new user gets it (scripts/test.sh runs this after scripts/build-wheel.sh):
installed into a fresh venv outside the repository, hashes checked, then run from a temporary
folder with nothing of the repository in reach (no STK_LIBRARY, STK_BIN, PYTHONPATH or
LD_LIBRARY_PATH):

- every library libstk.so and the stk binary load is bundled in the wheel (stk.libs/) or one the
  manylinux policy lets a wheel take from the system (glibc's, libstdc++, libgcc_s, libz);
- the README's Python block prints what the README says (tests/readme_python.py);
- the `stk` console script is on the venv's PATH: `stk --help` (the binary's usage and the Python
  commands), `stk convert` + `stk check` through the bundled binary, `stk eval --help` and
  `stk calibrate --help` from the Python implementations, with numpy the only dependency.

usage: wheel_install.py WHEEL SOURCE_ROOT
Prints one line per check, the install's wall time, and "wheel: N passed, N failed" last.
"""
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from readme_python import MODEL, block, check_output  # noqa: E402

# The sonames a manylinux policy lets a wheel leave to the system (auditwheel's lib_whitelist, less
# the X11 / GL / GLib ones nothing here links), and the loader.
POLICY_LIBS = {"libc.so.6", "libm.so.6", "libmvec.so.1", "libdl.so.2", "librt.so.1", "libpthread.so.0",
               "libstdc++.so.6", "libgcc_s.so.1", "libatomic.so.1", "libz.so.1", "libutil.so.1",
               "libresolv.so.2", "libanl.so.1", "libnsl.so.1", "linux-vdso.so.1", "ld-linux-x86-64.so.2"}
# Linked shared by libstk whatever BLIS / LAPACK are (static or shared): these must be bundled.
MUST_BUNDLE = ["libdeflate", "libcrypto", "libisal", "libsimdjson", "libre2", "libhwy", "libutf8proc"]


def requirement_block(lock: Path, name: str) -> str:
    """`name==V \\ --hash=...` lines of a pip-compile lock (the test venv's pinned numpy)."""
    m = re.search(rf"^{re.escape(name)}==\S+(?: \\\n\s+--hash=sha256:[0-9a-f]+)+", lock.read_text(), re.M)
    assert m, f"{lock} pins no {name}"
    return m.group(0)


class Checks:
    def __init__(self) -> None:
        self.passed = 0
        self.failed = 0

    def run(self, name: str, fn) -> None:
        try:
            detail = fn()
            self.passed += 1
            print(f"ok    {name}" + (f": {detail}" if detail else ""), flush=True)
        except Exception as e:  # noqa: BLE001  every failure is reported, the rest still run
            self.failed += 1
            print(f"FAIL  {name}: {type(e).__name__}: {e}", flush=True)


def main() -> int:
    wheel, src = Path(sys.argv[1]).resolve(), Path(sys.argv[2]).resolve()
    tmp = Path(tempfile.mkdtemp(prefix="stk-wheel-test-"))
    venv, run_dir = tmp / "venv", tmp / "run"
    env = {k: v for k, v in os.environ.items()
           if k not in ("STK_LIBRARY", "STK_BIN", "PYTHONPATH", "LD_LIBRARY_PATH", "VIRTUAL_ENV")}
    env["PATH"] = f"{venv / 'bin'}:/usr/bin:/bin"
    checks = Checks()

    def sh(*cmd, cwd=run_dir, ok=True):
        r = subprocess.run([str(c) for c in cmd], cwd=cwd, env=env, capture_output=True, text=True)
        if ok and r.returncode != 0:
            raise AssertionError(f"{' '.join(map(str, cmd))}: exit {r.returncode}\n{r.stdout[-2000:]}{r.stderr[-2000:]}")
        return r

    def install():
        subprocess.run(["/usr/bin/python3", "-m", "venv", venv], check=True, env=env)
        reqs = tmp / "requirements.txt"
        digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
        reqs.write_text(requirement_block(src / "scripts" / "requirements-test.txt", "numpy") + "\n"
                        f"stk @ {wheel.as_uri()} --hash=sha256:{digest}\n")
        t0 = time.monotonic()
        sh(venv / "bin" / "python3", "-m", "pip", "install", "-q", "--disable-pip-version-check",
           "--require-hashes", "-r", reqs, cwd=tmp)
        return f"{wheel.name} and numpy into a fresh venv in {time.monotonic() - t0:.1f} s"

    checks.run("pip install", install)
    run_dir.mkdir()
    shutil.copytree(src / MODEL, run_dir / MODEL)

    def where():
        r = sh(venv / "bin" / "python3", "-c",
               "import stk, stk._lib as l; print(stk.__file__); print(l.library_path()); print(l.binary_path())")
        paths = r.stdout.split()
        for p in paths:
            assert p.startswith(str(venv)), f"{p} is not inside the venv"
        return None

    checks.run("the package, libstk.so and the binary come from the venv", where)

    def bundled():
        pkg = next((venv / "lib").glob("python3*/site-packages"))
        libs = pkg / "stk.libs"
        have = sorted(p.name for p in libs.iterdir())
        for prefix in MUST_BUNDLE:
            assert any(n.startswith(prefix + "-") for n in have), f"{prefix} is not in stk.libs/ ({have})"
        for elf in (pkg / "stk" / "libstk.so", pkg / "stk" / "_bin" / "stk"):
            out = sh("ldd", elf).stdout
            for line in out.splitlines():
                line = line.strip()
                soname = line.split()[0]
                assert "not found" not in line, f"{elf.name}: {line}"
                if soname in POLICY_LIBS or soname.startswith("/lib64/ld-linux"):
                    continue
                target = line.split("=>")[1].split("(")[0].strip() if "=>" in line else ""
                assert os.path.dirname(os.path.realpath(target)) == os.path.realpath(libs), \
                    f"{elf.name} loads {line} from outside the wheel"
        return f"stk.libs/ holds {len(have)}: " + ", ".join(re.sub(r"-[0-9a-f]{8}\.", ".", n) for n in have)

    checks.run("every non-policy library is bundled and loaded from the wheel", bundled)

    def readme():
        r = sh(venv / "bin" / "python3", "-c", block(src))
        check_output(r.stdout)
        return None

    checks.run("the README's Python block, run from a temporary folder", readme)

    def console_help():
        assert shutil.which("stk", path=env["PATH"]) == str(venv / "bin" / "stk")
        r = sh("stk", "--help")
        assert "`eval`" in r.stdout and "`calibrate`" in r.stdout, r.stdout[:400]
        assert "convert" in r.stdout, r.stdout[:800]
        return None

    checks.run("`stk --help` (the console script on PATH)", console_help)

    def console_convert():
        sh("stk", "convert", "--in", MODEL, "--out", "root", "--threads", "2")
        r = sh("stk", "check", "--out", "root")
        assert "OK, manifest and 22 arrays verified" in r.stdout + r.stderr, r.stdout + r.stderr
        return None

    checks.run("`stk convert` and `stk check` through the bundled binary", console_convert)

    def python_commands():
        for cmd in ("eval", "calibrate"):
            r = sh("stk", cmd, "--help")
            assert r.stdout.startswith(f"usage: stk {cmd} "), r.stdout[:200]
        r = sh(venv / "bin" / "python3", "-c", "import importlib.util as u; print(u.find_spec('torch'))")
        assert r.stdout.strip() == "None", "torch is in the venv: the check is not of numpy alone"
        return None

    checks.run("`stk eval --help` and `stk calibrate --help` (Python commands, numpy alone)", python_commands)

    shutil.rmtree(tmp, ignore_errors=True)
    print(f"wheel: {checks.passed} passed, {checks.failed} failed")
    return 0 if checks.failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
