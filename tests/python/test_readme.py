"""The README's Python example, extracted and run as written from the repository root
(tests/readme_python.py holds the extraction and the expected output; tests/wheel_install.py runs
the same block against the installed wheel)."""
import subprocess
import sys

from conftest import SOURCE_ROOT
from readme_python import block, check_output


def test_readme_python_example():
    r = subprocess.run([sys.executable, "-c", block(SOURCE_ROOT)], cwd=SOURCE_ROOT, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    check_output(r.stdout)
