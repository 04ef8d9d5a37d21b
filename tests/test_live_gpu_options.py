"""`kagura live`'s GPU options → a LiveGpu (app/live_gpu.py): checked by the same rules as
`kagura render`'s (app/render_job.py), with no render request made up for them."""

from __future__ import annotations

import argparse

import pytest

from app.errors import UsageError


def _build(*argv: str, size=None):
    from app.config import live_gpu_config
    from app.live_gpu import add_gpu_options, build_live_gpu

    parser = argparse.ArgumentParser()
    add_gpu_options(parser)
    args = parser.parse_args(list(argv))
    return build_live_gpu(live_gpu_config(args), size)


def test_no_gpu_option_is_the_cpu_chain():
    assert _build("--device", "cpu") is None


def test_upscale_alone_sizes_the_chain_and_leaves_temporal_and_graphs_off():
    gpu = _build("--device", "cpu", "--upscale", "2", size=(320, 180))
    assert gpu.render_size == (160, 90) and gpu.upscale == 2
    assert gpu.sizes((320, 180)) == ((160, 90), (320, 180))
    assert gpu.temporal is False  # no diffusion: temporal only when asked
    assert gpu.cuda_graphs is False and gpu.models is None
    assert gpu.make_upscaler is not None and gpu.label == "no diffusion"


def test_temporal_alone_keeps_the_output_size():
    gpu = _build("--device", "cpu", "--temporal", size=(320, 180))
    assert gpu.render_size == (320, 180) and gpu.temporal is True and gpu.make_upscaler is None


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (("--temporal", "--diffusion-size", "64x64"), "--diffusion-size needs --diffusion"),
        (("--upscale", "4"), "render size 240x135"),  # 540 / 4 is odd
        (("--budget-ms", "-1", "--temporal"), "--budget-ms -1"),
        (("--no-ladder",), "need a GPU option"),
    ],
)
def test_bad_options_are_one_usage_error(argv, says):
    with pytest.raises(UsageError, match=says):
        _build("--device", "cpu", *argv, size=(960, 540))


def test_a_missing_checkpoint_folder_is_named():
    from pipeline.diffusion import ModelError

    with pytest.raises(ModelError, match="no-such-model"):
        _build("--device", "cpu", "--diffusion", "/tmp/no-such-model")


def test_two_steps_run_one_after_another_unless_stream_batch_is_asked():
    assert _build("--device", "cpu", "--temporal").stream_batch is False
    assert _build("--device", "cpu", "--temporal", "--stream-batch").stream_batch is True
