"""Hostile inputs through the real command line: every bad file ends in one line naming it and
exit status 2, every odd but usable file renders. The corpus is built here, in the test.

The renders are tiny (0.3 s at 160x90) and all cases run in one child process (tests/hostile.py).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import av
import numpy as np
import pytest

from tests.hostile import (
    error_line,
    header_only_wav,
    run_cli_batch,
    tone,
    write_wav_float,
    write_wav_s16,
)

TINY = ["--size", "160x90", "--seconds", "0.3", "--quiet"]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("hostile")
    (d / "zero.wav").write_bytes(b"")
    header_only_wav(d / "header_only.wav")
    good = write_wav_s16(d / "good.wav", 1.0)
    raw = good.read_bytes()
    (d / "truncated.wav").write_bytes(raw[: len(raw) // 2])  # the header promises twice that
    (d / "garbage.wav").write_bytes(bytes(range(256)) * 64)
    (d / "text.mp3").write_text("this is not audio\n" * 100)
    x = tone(0.5, 48000)
    x[1000, 0] = np.nan
    write_wav_float(d / "nan.wav", x, 48000)
    x = tone(0.5, 48000)
    x[2000, 0] = np.inf
    write_wav_float(d / "inf.wav", x, 48000)
    x = tone(0.5, 48000)
    x[3000, 0] = 1e30
    write_wav_float(d / "huge.wav", x, 48000)
    for ch in (3, 6, 8, 12):  # 8 and more segfaulted in av's planar conversion
        write_wav_float(d / f"ch{ch}.wav", tone(0.5, 48000, ch), 48000)
    write_wav_float(d / "rate768k.wav", tone(0.5, 768000), 768000)
    write_wav_float(d / "rate7k.wav", tone(0.5, 7000), 7000)
    write_wav_float(d / "rate1.wav", tone(3.0, 1, hz=0.1), 1)
    os.mkfifo(d / "fifo.wav")
    (d / "folder.wav").mkdir()
    return d


def by_name(results: list[dict]) -> dict[str, dict]:
    return {" ".join(r["argv"]): r for r in results}


@pytest.fixture(scope="module")
def render_results(corpus) -> dict[str, dict]:
    names = [
        "zero", "header_only", "truncated", "garbage", "nan", "inf", "huge",
        "ch3", "ch6", "ch8", "ch12", "rate768k", "rate7k", "rate1", "fifo", "folder",
    ]  # fmt: skip
    cases = []
    for n in names:
        tiny = TINY if n != "rate1" else TINY[:2] + TINY[-1:]  # 3 samples: the whole 3 s
        cases.append(["render", f"{n}.wav", "-o", f"out_{n}.mp4", *tiny])
    cases.append(["render", "text.mp3", "-o", "out_text.mp4", *TINY])
    cases.append(["render", "missing.wav", "-o", "out_missing.mp4", *TINY])
    cases.append(["render", "good.wav", "-o", "out_seed.mp4", "--seed", "-1", *TINY])
    cases.append(["still", "ch8.wav", "--at", "0.2", "-o", "still_ch8.png", "--size", "160x90"])
    cases.append(["still", "nan.wav", "--at", "0.2", "-o", "still_nan.png", "--size", "160x90"])
    cases.append(["lipsync", "ch12.wav", "--json", "ch12.json"])
    cases.append(["lipsync", "nan.wav", "--json", "nan.json"])
    cases.append(["lipsync", "fifo.wav", "--json", "fifo.json"])
    return by_name(run_cli_batch(cases, corpus))


def result(results, argv_start: str) -> dict:
    (hit,) = [r for k, r in results.items() if k.startswith(argv_start + " ")]
    return hit


@pytest.mark.parametrize(
    ("name", "words"),
    [
        ("zero", "empty file (0 bytes)"),
        ("header_only", "holds no samples"),
        ("garbage", "not an audio file"),
        ("nan", "not finite"),
        ("inf", "not finite"),
        ("huge", "far beyond full scale"),
        ("fifo", "FIFO"),
        ("folder", "is a directory"),
    ],
)
def test_bad_audio_is_one_line_exit_2(render_results, corpus, name, words):
    r = result(render_results, f"render {name}.wav")
    line = error_line(r)
    assert r["rc"] == 2, r
    assert f"{name}.wav" in line and words in line, line
    assert not list(corpus.glob(f"out_{name}*")), "nothing is written for a bad input"


def test_text_and_missing_files_named(render_results):
    for src, words in (("text.mp3", "not an audio file"), ("missing.wav", "no such file")):
        r = result(render_results, f"render {src}")
        assert r["rc"] == 2 and src in error_line(r) and words in error_line(r), r


def test_bad_seed_is_one_line(render_results):
    r = result(render_results, "render good.wav -o out_seed.mp4")
    assert r["rc"] == 2 and "--seed -1" in error_line(r), r


def _audio_of(path: Path) -> tuple[int, int, float]:
    with av.open(str(path)) as c:
        s = c.streams.audio[0]
        return s.codec_context.sample_rate, s.codec_context.channels, float(c.duration or 0) / 1e6


@pytest.mark.parametrize("channels", [3, 6, 8, 12])
def test_any_channel_count_is_downmixed(render_results, corpus, channels):
    r = result(render_results, f"render ch{channels}.wav")
    assert r["rc"] == 0, r["stderr"]
    rate, ch, seconds = _audio_of(corpus / f"out_ch{channels}.mp4")
    assert (rate, ch) == (48000, 2)
    assert 0.25 < seconds < 0.5
    assert "\n" not in r["stderr"].strip()  # not even a notice


@pytest.mark.parametrize("name", ["rate768k", "rate7k", "rate1"])
def test_rates_the_encoder_refuses_are_resampled(render_results, corpus, name):
    r = result(render_results, f"render {name}.wav")
    assert r["rc"] == 0, r["stderr"]
    assert "resampled to 48000 Hz" in r["stderr"]
    rate, ch, _ = _audio_of(corpus / f"out_{name}.mp4")
    assert (rate, ch) == (48000, 1)


def test_truncated_wav_renders_what_is_there(render_results, corpus):
    r = result(render_results, "render truncated.wav")
    assert r["rc"] == 0, r["stderr"]
    assert (corpus / "out_truncated.mp4").stat().st_size > 0


def test_still_and_lipsync_take_many_channels_refuse_nan(render_results, corpus):
    assert result(render_results, "still ch8.wav")["rc"] == 0
    assert (corpus / "still_ch8.png").read_bytes()[:4] == b"\x89PNG"
    r = result(render_results, "still nan.wav")
    assert r["rc"] == 2 and "not finite" in error_line(r)
    assert result(render_results, "lipsync ch12.wav")["rc"] == 0
    doc = json.loads((corpus / "ch12.json").read_text())  # strict JSON: no NaN anywhere
    assert len(doc["frames"]) >= 40
    r = result(render_results, "lipsync nan.wav")
    assert r["rc"] == 2 and "not finite" in error_line(r) and not (corpus / "nan.json").exists()
    r = result(render_results, "lipsync fifo.wav")
    assert r["rc"] == 2 and "FIFO" in error_line(r)
