"""User mistakes in `python -m stk eval` / `calibrate` (issue 39, items 2, 3, 9, 12): one line on
stderr naming what is wrong and an exit code, never a traceback, and every argument checked before
the model loads (stk.evaluation._load is replaced by a function that fails the test)."""
import os
import subprocess
import sys

import pytest

from stk import calibration, evaluation
from conftest import SOURCE_ROOT, TINY

TINY_LLAMA = SOURCE_ROOT / "tests" / "fixtures" / "eval" / "tiny-llama"


@pytest.fixture()
def text(tmp_path):
    p = tmp_path / "prose.txt"
    p.write_text("the then in hello there, the thin thing in the heather. " * 40, encoding="utf-8")
    return str(p)


@pytest.fixture()
def no_load(monkeypatch):
    """The model must not load: every refusal below comes first."""
    def fail(model):
        raise AssertionError(f"the model was loaded ({model}) before the arguments were checked")
    monkeypatch.setattr(evaluation, "_load", fail)


def run(main, argv, capsys):
    rc = main(argv)
    cap = capsys.readouterr()
    assert "Traceback" not in cap.err
    # transformers' own loading bar may come first; the command's words are its last line
    return rc, cap.err.strip().splitlines()[-1]


# ---- torch missing -------------------------------------------------------------------------

@pytest.mark.parametrize("command", ["eval", "calibrate"])
def test_torch_missing_is_one_line(tmp_path, text, command):
    """A torch that does not import (a package shadowing it raises ModuleNotFoundError, as a
    missing one does): --reference transformers says what to install, before anything else."""
    fake = tmp_path / "fake"
    (fake / "torch").mkdir(parents=True)
    (fake / "torch" / "__init__.py").write_text("raise ModuleNotFoundError(\"No module named 'torch'\", name='torch')\n")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(fake)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    argv = [sys.executable, "-m", "stk", command, "--model", str(tmp_path / "no-model"), "--text", text, "--reference",
            "transformers"]  # the default paths run on the library: tests/python/test_probe_paths.py
    if command == "calibrate":
        argv += ["--out", str(tmp_path / "x.stkcal")]
    p = subprocess.run(argv, capture_output=True, text=True, env=env)
    assert p.returncode == 1
    assert "Traceback" not in p.stderr
    assert p.stderr.strip() == (f"stk {command}: stk {command} needs torch and transformers, which the rest of stk does "
                                "not: pip install 'stk[eval]' (or: pip install torch transformers accelerate gguf); "
                                "No module named 'torch'")


# ---- eval ----------------------------------------------------------------------------------

def test_eval_missing_text(tmp_path, no_load, capsys):
    rc, err = run(evaluation.main, ["--model", str(TINY_LLAMA), "--text", str(tmp_path / "none.txt")], capsys)
    assert rc == 2 and err == f"stk eval: --text {tmp_path / 'none.txt'}: no such file"


def test_eval_missing_model(tmp_path, text, no_load, capsys):
    rc, err = run(evaluation.main, ["--model", str(tmp_path / "no-model"), "--text", text], capsys)
    assert rc == 2
    assert err == (f"stk eval: --model {tmp_path / 'no-model'}: no such file or directory (give a HF model directory "
                   "or a .gguf file)")
    (tmp_path / "empty").mkdir()
    rc, err = run(evaluation.main, ["--model", str(tmp_path / "empty"), "--text", text], capsys)
    assert rc == 2 and err == f"stk eval: --model {tmp_path / 'empty'}: a directory without config.json, not a HF model directory"


def test_eval_binary_text(tmp_path, no_load, capsys):
    b = tmp_path / "image.bin"
    b.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    rc, err = run(evaluation.main, ["--model", str(TINY_LLAMA), "--text", str(b)], capsys)
    assert rc == 2 and err == f"stk eval: --text {b}: a binary file, not UTF-8 text (a NUL byte at offset 8)"
    latin = tmp_path / "latin1.txt"
    latin.write_bytes("café au lait".encode("latin-1"))
    rc, err = run(evaluation.main, ["--model", str(TINY_LLAMA), "--text", str(latin)], capsys)
    assert rc == 2
    assert err == f"stk eval: --text {latin}: not UTF-8 text (byte 0xe9 at offset 3 invalid continuation byte)"


def test_eval_empty_layer_list(text, no_load, capsys):
    rc, err = run(evaluation.main, ["--model", str(TINY_LLAMA), "--text", text, "--swap", "ffn:", "--zero"], capsys)
    assert rc == 2
    assert err == ("stk eval: --swap 'ffn:': no layers after 'ffn:' (give N, A-B or N+M, or ffn without ':' for "
                   "every layer)")


def test_eval_missing_gen_before_the_model(text, no_load, capsys):
    rc, err = run(evaluation.main, ["--model", str(TINY), "--text", text, "--swap", "prf:0"], capsys)
    assert rc == 2
    assert err == "stk eval: stk eval --swap: give --gen ROOT|DIR, the generation of --model whose arrays replace the modules"


def test_eval_ctx_above_the_model_positions(text, capsys):
    """tiny-llama has 256 positions: --ctx 100000 is refused before any forward allocates."""
    rc, err = run(evaluation.main, ["--model", str(TINY_LLAMA), "--text", text, "--ctx", "100000"], capsys)
    assert rc == 2
    assert err == "stk eval: --ctx 100000: the model has 256 positions (max_position_embeddings in its config); give --ctx 256 or less"
    rc, err = run(evaluation.main, ["--model", str(TINY), "--text", text, "--ctx", "33"], capsys)
    assert rc == 2
    assert err == "stk eval: --ctx 33: the model has 32 positions (n_positions in its config); give --ctx 32 or less"


def test_eval_default_ctx_adapts_to_a_short_model(text):
    """tiny-gpt2 has 32 positions: the default --ctx is 32 there, not 512."""
    r = evaluation.evaluate(str(TINY), None, [text], contexts=1)
    assert r["ctx"] == 32 and r["tokens_scored"] == 31


# ---- calibrate ---------------------------------------------------------------------------

def test_calibrate_missing_model_and_binary_text(tmp_path, text, no_load, capsys):
    out = str(tmp_path / "x.stkcal")
    rc, err = run(calibration.main, ["--model", str(tmp_path / "nope"), "--text", text, "--out", out], capsys)
    assert rc == 2 and err.startswith(f"stk calibrate: --model {tmp_path / 'nope'}: no such file or directory")
    b = tmp_path / "b.bin"
    b.write_bytes(b"\x00\x01\x02")
    rc, err = run(calibration.main, ["--model", str(TINY), "--text", str(b), "--out", out], capsys)
    assert rc == 2 and err == f"stk calibrate: --text {b}: a binary file, not UTF-8 text (a NUL byte at offset 0)"
    assert sorted(os.listdir(tmp_path)) == ["b.bin", "prose.txt"]  # nothing written


def test_calibrate_ctx_above_the_model_positions(tmp_path, text, capsys):
    rc, err = run(calibration.main, ["--model", str(TINY), "--text", text, "--out", str(tmp_path / "x.stkcal"),
                                     "--ctx", "512"], capsys)
    assert rc == 2
    assert err == "stk calibrate: --ctx 512: the model has 32 positions (n_positions in its config); give --ctx 32 or less"
    assert not (tmp_path / "x.stkcal").exists()


def test_calibrate_default_ctx_on_a_32_position_model(tmp_path, text):
    r = calibration.calibrate(str(TINY), [text], str(tmp_path / "x.stkcal"), contexts=1, progress=False)
    assert r["ctx"] == 32 and r["tokens"] == 32


@pytest.mark.parametrize("case", ["missing directory", "a directory", "unwritable"])
def test_calibrate_out_checked_before_the_run(tmp_path, text, no_load, capsys, case):
    if case == "missing directory":
        out = tmp_path / "no-such-dir" / "x.stkcal"
        want = f"--out {out}: the directory {tmp_path / 'no-such-dir'} does not exist"
    elif case == "a directory":
        out = tmp_path
        want = f"--out {out}: a directory; give the path of the statistics file to write"
    else:
        if os.geteuid() == 0:  # root writes through any mode bits; sysfs takes no new file from anyone
            if not os.path.isdir("/sys"):
                pytest.skip("running as root without /sys: no unwritable directory to try")
            out = "/sys/stk-calibrate-test.stkcal"
            parent = "/sys"
        else:
            ro = tmp_path / "ro"
            ro.mkdir()
            ro.chmod(0o555)
            out, parent = ro / "x.stkcal", ro
        want = f"--out {out}: cannot create a file in {parent}: Permission denied"
    rc, err = run(calibration.main, ["--model", str(TINY), "--text", text, "--out", str(out)], capsys)
    assert rc == 1 and err == f"stk calibrate: {want}"


# ---- words (item 12) -----------------------------------------------------------------------

def test_eval_help_lists_every_swap():
    p = subprocess.run([sys.executable, "-m", "stk", "eval", "--help"], capture_output=True, text=True, env=dict(os.environ))
    assert p.returncode == 0
    listed = p.stdout.split("--swap modules:\n", 1)[1].splitlines()
    assert [line.split()[0] for line in listed if line.startswith("  ")] == list(evaluation.SWAP_MODULES)
    assert list(evaluation.SWAP_MODULES) == ["ffn", "prf", "overlays", "memory", "window", "window-prf", "ffn-bfloat16",
                                             "ffn-int8", "ffn-int4", "ffn-ternary"]
    # the error names the same modules, from the same list
    with pytest.raises(ValueError) as e:
        evaluation.parse_swap("mlp:1")
    assert str(e.value) == f"--swap 'mlp:1': unknown module 'mlp' (the modules: {evaluation.swap_modules_text()})"
    for m in evaluation.SWAP_MODULES:
        assert m in str(e.value)
    # docs/cli.md names every one
    cli = (SOURCE_ROOT / "docs" / "cli.md").read_text()
    section = cli.split("## `stk eval`", 1)[1].split("\n## ", 1)[0]
    for m in evaluation.SWAP_MODULES:
        assert f"`{m}`" in section, m


def test_readme_eval_sample_is_the_format():
    """The README's sample is what _format prints: the same lines in the same order (the numbers
    are SmolLM2's, regenerated by running the command above it)."""
    readme = (SOURCE_ROOT / "README.md").read_text()
    section = readme.split("## What a converted model keeps: `stk eval`", 1)[1]
    sample = section.split("```\nstk eval: ", 1)[1].split("```", 1)[0]
    lines = ("stk eval: " + sample).rstrip("\n").splitlines()
    r = {"model": "/m/1", "gen": "/g/2", "texts": ["/a/1", "/b/2"], "contexts": 2, "ctx": 512, "swap": "ffn:15", "zero": False,
         "positions": "P", "perplexity_original": 1.0, "perplexity_swapped": 1.0, "tokens_scored": 1022,
         "kl_mean": 0.1, "kl_p99": 0.1, "positions_compared": 1024, "top1_agreement": 0.5, "isolated": False,
         "layers": [{"module": "ffn", "layer": 15, "rel_l2": 1.0}], "seconds": 1.0}
    r["positions"] = (
        "perplexity: the next token at positions 0..510 of each context (511 per context); KL and top-1: every "
        "position 0..511 (512 per context); each context starts at position 0")

    def mask(line):  # every number and path becomes '#': the words and their order must be the command's
        return " ".join("#" if any(c.isdigit() or c == "/" for c in w) else w for w in line.split())
    want = evaluation._format(r).splitlines()
    assert [mask(x) for x in lines] == [mask(x) for x in want]
