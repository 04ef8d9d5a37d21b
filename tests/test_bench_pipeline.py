"""`kagura bench pipeline` on the CPU with the tiny random-weight models: the product's chains
(live and offline) run and the section is written (the real numbers come from the GPU machine)."""

from __future__ import annotations

import argparse

import pytest

pytest.importorskip("diffusers")
pytest.importorskip("skia")


def _args(*argv: str) -> argparse.Namespace:
    from app import bench_pipeline

    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="bench")
    bench_pipeline.add_parser(sub)
    return p.parse_args(["pipeline", *argv])


def test_bench_pipeline_cpu_tiny(tmp_path, capsys):
    from app import bench_pipeline

    out = tmp_path / "BENCHMARKS.md"
    args = _args(
        "--device", "cpu", "--random-weights", "tiny", "--frames", "1",
        "--offline", "--batch", "1", "--out", str(out),
    )  # fmt: skip
    assert bench_pipeline.run(args) == 0
    text = out.read_text()
    assert "<!-- bench:pipeline-cpu -->" in text
    assert "RANDOM weights" in text
    assert "Video encoding is NOT included" in text
    assert "128x72" in text and "384x216" in text
    for label in ("diffusion", "temporal", "upscale x3", "readback", "end to end"):
        assert label in text
    # the product's chains: the live session's GpuChain (with the look's stylize, timed by the
    # chain itself) and the render's stages
    assert "GpuChain" in text and "app.render_job.gpu_stages" in text
    live_stylize = next(line for line in text.splitlines() if line.startswith("| stylize"))
    assert float(live_stylize.split("|")[2]) > 0


def test_bench_pipeline_rejects_bad_out_size():
    from app import pipeline_benchmark

    args = _args("--device", "cpu", "--random-weights", "tiny", "--out-size", "500x300")
    with pytest.raises(SystemExit):
        pipeline_benchmark._sizes(args)
