"""The README's Python block ("## Python") and what it must print, in one place: run from the
repository root against the build tree (tests/python/test_readme.py) and from a temporary folder
against the installed wheel (tests/wheel_install.py).  The block reads the tiny model at the
relative path bindings/testdata/tiny-gpt2, so a run elsewhere copies that folder beside it."""
import re
from pathlib import Path

MODEL = "bindings/testdata/tiny-gpt2"


def block(source_root: Path) -> str:
    text = (Path(source_root) / "README.md").read_text()
    section = text.split("\n## Python\n", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    assert len(blocks) == 1, f"README.md's Python section has {len(blocks)} python blocks, not 1"
    assert f'model = "{MODEL}"' in blocks[0], f"the README's block no longer reads {MODEL}"
    return blocks[0]


def check_output(stdout: str) -> None:
    """Asserts the block's printed lines (the values the README's comments show)."""
    lines = stdout.splitlines()
    assert len(lines) == 8, stdout
    assert lines[0].startswith("000001-") and lines[0].endswith("22 arrays, tokenizer ext"), lines[0]
    assert lines[1] == "(2, 512, 16) float32 False", lines[1]
    assert lines[2] == "ext 22 arrays", lines[2]
    assert lines[3] == "True", lines[3]
    assert lines[4] == "(261, 16)", lines[4]
    assert lines[5] == "[257, 108, 108, 111, 32, 119, 111, 114, 108, 100]", lines[5]
    assert "OK, manifest and 22 arrays verified" in lines[6], lines[6]
    assert lines[7].startswith("STK_E_NOT_FOUND "), lines[7]
