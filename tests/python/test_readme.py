"""The README's Python example, extracted and run as written from the repository root."""
import re
import subprocess
import sys

from conftest import SOURCE_ROOT


def test_readme_python_example():
    text = (SOURCE_ROOT / "README.md").read_text()
    section = text.split("\n## Python\n", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    assert len(blocks) == 1
    r = subprocess.run([sys.executable, "-c", blocks[0]], cwd=SOURCE_ROOT, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].startswith("000001-") and lines[0].endswith("22 arrays, tokenizer ext")
    assert lines[1] == "(2, 512, 16) float32 False"
    assert lines[2] == "ext 22 arrays"
    assert lines[3] == "True"
    assert lines[4] == "(261, 16)"
    assert lines[5] == "[257, 108, 108, 111, 32, 119, 111, 114, 108, 100]"
    assert "OK, manifest and 22 arrays verified" in lines[6]
    assert lines[7].startswith("STK_E_NOT_FOUND ")
