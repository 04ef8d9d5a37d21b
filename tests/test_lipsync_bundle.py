"""scripts/lipsync_bundle.py: the corpus cache packed for the GPU machine comes back exactly."""

import importlib.util
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent


def _bundle():
    spec = importlib.util.spec_from_file_location(
        "lipsync_bundle", ROOT / "scripts/lipsync_bundle.py"
    )
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _entry(folder: Path, name: str, rng: np.random.Generator) -> None:
    # the corpus's own format (audio.speech_corpus.synthesize): int16 audio, phones as strings
    audio = np.round(rng.uniform(-1, 1, 4000) * 20000).astype(np.int16)
    phones = np.array([("0.0", "0.12", "-"), ("0.12", "0.25", "a")], dtype=str)
    np.savez_compressed(folder / f"{name}.npz", audio=audio, phones=phones)


def test_pack_then_unpack_gives_the_same_samples_and_phones(tmp_path):
    bundle = _bundle()
    src, dst = tmp_path / "src", tmp_path / "dst"
    src.mkdir()
    rng = np.random.default_rng(0)
    for name in ("festival-0123456789abcdef", "espeak-ng-fedcba9876543210"):
        _entry(src, name, rng)
    assert bundle.pack_corpus(src, tmp_path / "corpus.tar.xz") == 2
    assert bundle.unpack_corpus(tmp_path / "corpus.tar.xz", dst) == 2
    for f in src.glob("*.npz"):
        with np.load(f) as a, np.load(dst / f.name) as b:
            assert b["audio"].dtype == np.int16
            np.testing.assert_array_equal(a["audio"], b["audio"])
            np.testing.assert_array_equal(a["phones"], b["phones"])


def test_sustained_vowels_travel_and_are_not_synthesized_again(tmp_path, monkeypatch):
    """espeak-ng's vowels packed here come back as the same samples, and `synth_vowel` reads
    them without espeak-ng (the GPU machine has none: here it is taken off the PATH)."""
    from audio import calibration

    bundle = _bundle()
    keys = {("en-us+f2", 55, "A"), ("ja+m5", 35, "U")}
    want = {k: calibration.synth_vowel(*k) for k in keys}
    assert bundle.save_vowels(tmp_path / "vowels.npz", keys) == 2
    monkeypatch.setattr(calibration, "ESPEAK_VOWELS", {})
    monkeypatch.setenv("PATH", str(tmp_path))
    assert bundle.load_vowels(tmp_path / "vowels.npz") == 2
    assert set(calibration.ESPEAK_VOWELS) == keys
    for k, x in want.items():
        np.testing.assert_array_equal(calibration.synth_vowel(*k), x)
    with pytest.raises(FileNotFoundError):  # one not handed over: espeak-ng asked for, absent
        calibration.synth_vowel("en-us+f2", 55, "I")


def test_a_bad_command_is_one_line_and_exit_2():
    run = subprocess.run(
        [sys.executable, str(ROOT / "scripts/lipsync_bundle.py"), "repack"],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert run.returncode == 2
    assert run.stderr.strip().startswith("usage: lipsync_bundle.py")
    assert len(run.stderr.strip().splitlines()) == 1
