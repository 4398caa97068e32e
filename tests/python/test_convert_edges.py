"""stk.convert and export_lwt at their edges (issue 32 items 7 and 9): a GGUF file given in a folder
that holds other GGUFs, and Ctrl-C at several points of a conversion, each judged by what the root
holds afterwards (CURRENT, generations/, a root the call created)."""
import os
import shutil
import sys
import signal
import threading
import time
import warnings

import pytest

import stk
from conftest import SOURCE_ROOT

GGUF = SOURCE_ROOT / "tests" / "data" / "gguf"


@pytest.fixture()
def two_ggufs(tmp_path):
    d = tmp_path / "models"
    d.mkdir()
    shutil.copy(GGUF / "tiny-llama-f32.gguf", d / "llama.gguf")
    shutil.copy(GGUF / "tiny-gpt2-f32.gguf", d / "gpt2.gguf")
    return d


def test_a_gguf_file_beside_another_is_the_model(two_ggufs, tmp_path):
    # the folder alone is refused, naming both (the library's message)
    with pytest.raises(stk.StkError) as e:
        stk.convert(two_ggufs, tmp_path / "r0")
    assert "gpt2.gguf" in e.value.message and "llama.gguf" in e.value.message
    # each file converts as itself: the architecture and tensor count are its own
    for name, arch in (("llama.gguf", "llama"), ("gpt2.gguf", "gpt2")):
        s = stk.convert(two_ggufs / name, tmp_path / ("root-" + arch), threads=2)
        assert s["in"] == str(two_ggufs / name) and s["published"]
        alone = tmp_path / ("alone-" + arch)
        alone.mkdir()
        shutil.copy(two_ggufs / name, alone / name)
        ref = stk.convert(alone / name, tmp_path / ("ref-" + arch), threads=2)
        assert s["generation"] == ref["generation"]  # the same model, the same generation hash
        assert [x["sha256_low64"] for x in s["stages"]] == [x["sha256_low64"] for x in ref["stages"]]
        rep = stk.export_lwt(two_ggufs / name, tmp_path / (arch + ".lwt"))
        ref_rep = stk.export_lwt(alone / name, tmp_path / (arch + "-alone.lwt"))
        assert rep["data_crc32"] == ref_rep["data_crc32"] and rep["tensors"] == ref_rep["tensors"] > 0
        assert (stk.inspect(two_ggufs / name)["model_type"], stk.inspect(alone / name)["n_params"]) == \
            (arch, stk.inspect(two_ggufs / name)["n_params"])


def _current(root):
    p = root / "CURRENT"
    return p.read_text().split()[0] if p.exists() else None  # CURRENT: NAME HASH


def _generations(root):
    g = root / "generations"
    return sorted(x.name for x in g.iterdir()) if g.exists() else []


@pytest.mark.parametrize("at", [1, 5, 9, 10])
def test_sigint_before_a_stage_publishes_nothing(tmp_path, tiny, at):
    """SIGINT as stage AT starts (10 = the check stage, which publishes): KeyboardInterrupt, the
    existing root as it was, no staging left."""
    root = tmp_path / "root"
    first = stk.convert(tiny, root, threads=2)
    before = (_current(root), _generations(root), sorted(os.listdir(root)))

    def progress(name, index, total):
        if index == at:
            os.kill(os.getpid(), signal.SIGINT)

    with pytest.raises(KeyboardInterrupt):
        stk.convert(tiny, root, r=256, progress=progress)
    assert (_current(root), _generations(root), sorted(os.listdir(root))) == before
    assert _current(root) == first["generation_name"]


def test_sigint_into_a_new_root_removes_it(tmp_path, tiny):
    root = tmp_path / "new-root"

    def progress(name, index, total):
        if index == 3:
            os.kill(os.getpid(), signal.SIGINT)

    with pytest.raises(KeyboardInterrupt):
        stk.convert(tiny, root, progress=progress)
    assert not root.exists()
    assert sorted(os.listdir(tmp_path)) == []


def test_a_failed_convert_into_a_new_root_removes_it(tmp_path):
    root = tmp_path / "new-root"
    bad = tmp_path / "bad.gguf"
    data = (GGUF / "tiny-llama-f32.gguf").read_bytes()
    bad.write_bytes(data[: len(data) // 2])  # truncated: a stage refuses it
    with pytest.raises(stk.StkError):
        stk.convert(bad, root)
    assert not root.exists()


def test_sigint_after_publication_returns_the_summary(tmp_path, tiny, monkeypatch):
    """SIGINT once the check stage has published (here: as the summary is read): no
    KeyboardInterrupt, the summary of the generation that CURRENT now names, and a warning."""
    root = tmp_path / "root"
    first = stk.convert(tiny, root, threads=2)
    convert_module = sys.modules["stk.convert"]  # (stk.convert is the function)
    real_inspect = convert_module.inspect

    def inspect_then_sigint(path):
        os.kill(os.getpid(), signal.SIGINT)
        return real_inspect(path)

    monkeypatch.setattr(convert_module, "inspect", inspect_then_sigint)
    with pytest.warns(RuntimeWarning, match="interrupted after .* was published"):
        s = stk.convert(tiny, root, r=256, threads=2)
    assert s["published"] and s["previous"] == first["generation"]
    assert _current(root) == s["generation_name"] != first["generation_name"]
    assert _generations(root) == sorted([first["generation_name"], s["generation_name"]])


def test_sigint_at_random_points_is_reported_truthfully(tmp_path, tiny):
    """SIGINT from another thread at 12 points spread over a conversion: each run either raises
    KeyboardInterrupt with CURRENT unchanged, or returns the summary of the generation CURRENT names."""
    root = tmp_path / "root"
    t0 = time.perf_counter()
    prev = stk.convert(tiny, root, threads=2)
    span = time.perf_counter() - t0
    outcomes = []
    for k in range(12):
        delay = span * (k + 0.5) / 6  # up to twice a conversion: the last ones may fall after it returns
        before = _current(root)
        timer = threading.Timer(delay, os.kill, (os.getpid(), signal.SIGINT))
        timer.start()
        # The signal may land anywhere: inside convert (KeyboardInterrupt from it), or after it
        # returned (then in this function: caught here, outside the conversion, never in the
        # checks below, which run only once the timer has fired).
        s = None
        outcome = ""
        try:
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", RuntimeWarning)
                    s = stk.convert(tiny, root, r=128 + 8 * k, threads=2)
                outcome = "published"
            except KeyboardInterrupt:
                outcome = "published+late" if s is not None else "interrupted"
            timer.join()
            time.sleep(0.05)
        except KeyboardInterrupt:
            outcome += "+late"
        timer.join()
        if outcome.startswith("interrupted"):
            assert _current(root) == before, k
        else:
            assert _current(root) == s["generation_name"] and s["previous"] == prev["generation"], k
            prev = s
        outcomes.append(outcome)
        assert not [x for x in os.listdir(root) if x.startswith(".staging-")], k
    print("outcomes:", outcomes)
    assert len(outcomes) == 12 and outcomes[0] == "interrupted"  # 5 % into a conversion: inside it
