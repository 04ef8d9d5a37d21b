"""AOTInductor packages of the UNet (pipeline/diffusion/aot.py), on the CPU with the tiny
random-weight architecture: built once, loaded by a later process-like instance, run with that
instance's own weights (none are in the package), keyed by what the compiled code depends on,
and a broken package is one clear error that names it."""

from __future__ import annotations

import copy

import pytest
import torch

pytest.importorskip("diffusers")

from pipeline.diffusion.aot import AotUnet, package_key
from pipeline.diffusion.compile import CompileError
from pipeline.diffusion.models import build_unet


def _unet(seed: int) -> torch.nn.Module:
    torch.manual_seed(seed)
    return build_unet("tiny").eval()


def _inputs(unet, size: int = 8):
    g = torch.Generator().manual_seed(3)
    cfg = unet.config
    x = torch.randn(1, cfg.in_channels, size, size, generator=g)
    t = torch.tensor([499])
    e = torch.randn(1, 77, cfg.cross_attention_dim, generator=g)
    return x, t, e


def _eager(unet, x, t, e) -> torch.Tensor:
    with torch.no_grad():
        return unet(x, t, encoder_hidden_states=e, return_dict=False)[0]


def test_a_package_is_built_once_and_runs_any_weights_of_the_architecture(tmp_path):
    a, b = _unet(0), _unet(1)
    x, t, e = _inputs(a)
    ref_a, ref_b = _eager(a, x, t, e), _eager(b, x, t, e)
    assert not torch.allclose(ref_a, ref_b, atol=1e-3)  # two different models

    first = AotUnet(a, tmp_path)
    with torch.no_grad():
        out = first(x, t, encoder_hidden_states=e, return_dict=False)[0]
        first(x, t, encoder_hidden_states=e, return_dict=False)  # the same shape: no rebuild
    assert (first.built, first.loaded) == (1, 0)
    torch.testing.assert_close(out, ref_a, atol=1e-4, rtol=1e-4)
    assert len(list(tmp_path.glob("unet-*.pt2"))) == 1

    # a restart, with another checkpoint of the same architecture: the package is loaded (no
    # compile) and runs on this UNet's tensors
    again = AotUnet(b, tmp_path)
    with torch.no_grad():
        out_b = again(x, t, encoder_hidden_states=e, return_dict=False)[0]
    assert (again.built, again.loaded) == (0, 1)
    torch.testing.assert_close(out_b, ref_b, atol=1e-4, rtol=1e-4)

    with pytest.raises(TypeError, match="unexpected arguments"):
        again(x, t, encoder_hidden_states=e, added_cond_kwargs={})


def test_the_key_follows_what_the_compiled_code_depends_on():
    a = _unet(0)
    x, t, e = _inputs(a)
    key = package_key(a, (x, t, e))
    assert package_key(_unet(1), (x, t, e)) == key  # weights are not in the package
    assert package_key(a, _inputs(a, 16)) != key  # input shape
    assert package_key(a, (x.contiguous(memory_format=torch.channels_last), t, e)) != key
    assert package_key(copy.deepcopy(a).double(), (x, t, e)) != key  # weight dtype
    cl = copy.deepcopy(a).to(memory_format=torch.channels_last)
    assert package_key(cl, (x, t, e)) != key  # weight layout


def test_a_broken_package_is_one_clear_error(tmp_path):
    a = _unet(0)
    x, t, e = _inputs(a)
    bad = tmp_path / f"unet-{package_key(a, (x, t, e))}.pt2"
    bad.write_bytes(b"not a package")
    run = AotUnet(a, tmp_path)
    with pytest.raises(CompileError, match=f"AOTInductor package .*{bad.name}.* did not load"):
        run(x, t, encoder_hidden_states=e, return_dict=False)
