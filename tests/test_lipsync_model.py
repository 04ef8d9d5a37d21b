"""The offline lip-sync model a user picks (`--lipsync-model`, render.toml) reaches every engine
that analyses a song: the render's analysis process, `kagura lipsync`, `kagura serve`'s cache;
the live engine keeps the default. The shipped nets are the real files (audio/profiles)."""

from __future__ import annotations

import shutil
import subprocess
import typing
from pathlib import Path

import numpy as np
import pytest

from app.config import LIPSYNC_MODEL_NAMES
from app.errors import UsageError
from audio.analysis import analyze_clip, default_lipsync
from audio.decode import decode_audio
from audio.vowel_net import LIPSYNC_MODELS, check_lipsync_model, shipped_net
from tests.cli import kagura, probe

pytestmark = pytest.mark.skipif(not shutil.which("espeak-ng"), reason="needs espeak-ng")

# two short Japanese sentences and a pause (espeak-ng's Japanese voice: in both models' training;
# these tests check where the choice goes, docs/BENCHMARKS.md how well each model reads)
SENTENCE = "わたしは かぐらです。 あおい うみを みながら うたいます。"


@pytest.fixture(scope="module")
def japanese(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("ja") / "ja.wav"
    subprocess.run(["espeak-ng", "-v", "ja", "-w", str(path), SENTENCE], check=True)
    return path


def test_the_names_are_the_same_everywhere():
    from app.config import RenderConfig

    assert tuple(LIPSYNC_MODELS) == LIPSYNC_MODEL_NAMES
    field = RenderConfig.model_fields["lipsync_model"].annotation
    assert typing.get_args(field) == LIPSYNC_MODEL_NAMES
    for name in LIPSYNC_MODEL_NAMES:
        check_lipsync_model(name)  # every choice's file is shipped
        assert shipped_net(name) is not None
    assert shipped_net("japanese") is not shipped_net("default")


def test_each_model_hears_with_its_own_net(japanese):
    assert default_lipsync("japanese").net is shipped_net("japanese")
    assert default_lipsync().net is shipped_net("default")
    clip = decode_audio(japanese)
    ja = analyze_clip(clip, 30, lipsync_model="japanese")
    default = analyze_clip(clip, 30)
    np.testing.assert_array_equal(ja.pts_ns, default.pts_ns)
    # the same audio read by two nets: the vowels differ
    assert np.abs(ja.vowels - default.vowels).max() > 0.2


def test_the_render_analysis_process_uses_the_model_asked_for(japanese):
    from app.early_analysis import AnalysisProcess

    clip = decode_audio(japanese)
    want = analyze_clip(clip, 30, seed=1, lipsync_model="japanese")
    got = AnalysisProcess("japanese").analyze(clip, 30, seed=1, lipsync_model="japanese")
    np.testing.assert_allclose(got.vowels, want.vowels, atol=1e-6)
    np.testing.assert_allclose(got.scalars["mouth_open"], want.scalars["mouth_open"], atol=1e-6)
    # a child that preloaded the default still answers with the model the job names
    again = AnalysisProcess().analyze(clip, 30, seed=1, lipsync_model="japanese")
    np.testing.assert_allclose(again.vowels, want.vowels, atol=1e-6)


def test_serve_keeps_one_analysis_per_model(japanese):
    from app.cmd_serve import AnalysisCache

    clip = decode_audio(japanese)
    cache = AnalysisCache()
    ja = cache.analyze(clip, 30, lipsync_model="japanese")
    default = cache.analyze(clip, 30)
    assert np.abs(ja.vowels - default.vowels).max() > 0.2
    assert cache.analyze(clip, 30, lipsync_model="japanese") is ja


def test_the_lipsync_command_takes_the_model(japanese, tmp_path):
    import json

    outs = {}
    for model in LIPSYNC_MODEL_NAMES:
        out = tmp_path / f"{model}.json"
        r = kagura("lipsync", str(japanese), "--json", str(out), "--lipsync-model", model)
        assert r.returncode == 0, r.stderr
        frames = json.loads(out.read_text())["frames"]
        outs[model] = np.array([[f[v] for v in "AIUEO"] for f in frames])
    assert np.abs(outs["japanese"] - outs["default"]).max() > 0.2

    bad = tmp_path / "bad.json"
    r = kagura("lipsync", str(japanese), "--json", str(bad), "--lipsync-model", "klingon")
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "--lipsync-model" in lines[0] and "japanese" in lines[0]
    assert not bad.exists()
    # live keeps the default model: asked for another, one line, nothing written
    r = kagura(
        "lipsync", str(japanese), "--json", str(bad), "--live", "--lipsync-model", "japanese"
    )
    assert r.returncode == 2
    assert r.stderr.strip() == (
        "kagura: error: --lipsync-model japanese: offline only; --live uses the default model"
    )
    assert not bad.exists()


def test_render_settings_and_flags_choose_the_model(tmp_path):
    import argparse

    from app.cli import build_parser
    from app.config import render_config
    from app.render_settings import load

    def config(argv: list[str], toml: str | None):
        path = None
        if toml is not None:
            path = tmp_path / "render.toml"
            path.write_text(toml)
        argv = ["render", "a.wav", "-o", "o.mp4", *argv]
        if path is not None:
            argv += ["--config", str(path)]
        args: argparse.Namespace = build_parser().parse_args(argv)
        notices: list[str] = []
        return render_config(args, settings=load(args.config), notices=notices), notices

    cfg, _ = config([], None)
    assert cfg.lipsync_model == "default" and cfg.request().lipsync_model == "default"
    cfg, notices = config([], 'lipsync_model = "japanese"\n')
    assert cfg.request().lipsync_model == "japanese" and not notices
    cfg, _ = config(["--lipsync-model", "default"], 'lipsync_model = "japanese"\n')
    assert cfg.lipsync_model == "default"  # the flag wins over the file
    cfg, notices = config([], 'lipsync_model = "klingon"\n')
    assert cfg.lipsync_model == "default"
    assert len(notices) == 1 and "lipsync_model" in notices[0]


def test_a_missing_model_file_is_one_line_before_anything_runs(tmp_path, monkeypatch):
    from app.render_job import RenderRequest, check_request

    missing = tmp_path / "vowel_net_ja.npz"
    monkeypatch.setitem(LIPSYNC_MODELS, "japanese", missing)
    req = RenderRequest(tmp_path / "a.wav", tmp_path / "o.mp4", lipsync_model="japanese")
    with pytest.raises(
        UsageError, match=r"--lipsync-model japanese: .*vowel_net_ja\.npz is missing"
    ):
        check_request(req)
    with pytest.raises(ValueError, match=r"vowel_net_ja\.npz is missing"):
        shipped_net("japanese")


def test_a_render_with_the_japanese_model(japanese, tmp_path):
    out = tmp_path / "ja.mp4"
    r = kagura(
        "render", str(japanese), "-o", str(out), "--size", "128x72", "--fps", "12",
        "--seconds", "1.5", "--quiet", "--lipsync-model", "japanese",
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert probe(out, 12)["frames"] == 18
    bad = tmp_path / "bad.mp4"
    r = kagura("render", str(japanese), "-o", str(bad), "--lipsync-model", "klingon")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1
    assert "--lipsync-model" in r.stderr and not bad.exists()


def test_a_farm_job_chooses_the_model(japanese, tmp_path):
    from farm.jobs import load_jobs

    jobs = tmp_path / "jobs.toml"
    jobs.write_text(
        f'[[job]]\naudio = "{japanese}"\noutput = "a.mp4"\nlipsync_model = "japanese"\n'
        f'[[job]]\naudio = "{japanese}"\noutput = "b.mp4"\n'
    )
    a, b = load_jobs(jobs)
    assert a.request.lipsync_model == "japanese" and b.request.lipsync_model == "default"
    jobs.write_text(f'[[job]]\naudio = "{japanese}"\noutput = "a.mp4"\nlipsync_model = "x"\n')
    with pytest.raises(UsageError, match=r"job 1: lipsync_model: invalid choice: 'x'"):
        load_jobs(jobs)


def test_a_still_takes_the_model_from_its_flag_or_the_render_settings(japanese, tmp_path):
    from app.cli import build_parser
    from app.render_settings import load
    from app.still import still_config

    toml = tmp_path / "render.toml"
    toml.write_text('lipsync_model = "japanese"\n')

    def config(*argv: str):
        args = build_parser().parse_args(
            ["still", str(japanese), "--at", "1", "-o", "s.png", *argv]
        )
        return still_config(args, settings=load(args.config), notices=[])

    assert config().lipsync_model == "default"
    assert config("--config", str(toml)).lipsync_model == "japanese"
    assert config("--config", str(toml), "--lipsync-model", "default").lipsync_model == "default"
    out = tmp_path / "s.png"
    r = kagura("still", str(japanese), "--at", "1.2", "-o", str(out), "--size", "160x90",
               "--lipsync-model", "japanese")  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert out.stat().st_size > 0
