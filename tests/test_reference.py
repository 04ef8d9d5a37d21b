"""Offline reference painters (pipeline/reference) on real idol renders at small sizes.

CPU tests run with one torch thread (a module fixture): the painters are hundreds of small
passes, and on a shared two-core machine intra-op threads only add synchronisation. The GPU
test (CUDA matches CPU, deterministic on CUDA) runs on the GPU machine: pytest -m gpu.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from core.avatar import AvatarParams
from pipeline.reference import KINDS, ReferencePainter, make_reference
from pipeline.stylize import make_effect
from presets.loader import load_preset
from render.idol import IdolRenderer

W, H = 160, 96
WIDE = 256  # frames with room beside the idol, for the far-background test
BUILTINS = ("studio", "ink-wash", "cyberpunk")
SING = np.array([1.0, 0, 0, 0, 0, 0], np.float32)  # "A"
POSES = (
    AvatarParams(mouth_open=0.0),
    AvatarParams(mouth_open=1.0, vowels=SING),
    AvatarParams(
        mouth_open=0.4, vowels=SING, head_yaw=20.0, head_roll=-10.0, body_yaw=6.0, body_roll=5.0
    ),
)


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


@functools.cache
def frames(name: str, w: int = W, h: int = H) -> torch.Tensor:
    """uint8 (3, h, w, 4): mouth closed, mouth open, turned and tilted."""
    preset = load_preset(name)
    r = IdolRenderer(w, h, preset.palette, preset.line)
    out = []
    for p in POSES:
        r.reset()
        out.append(torch.from_numpy(r.render(p).rgba.copy()))
    return torch.stack(out)


@functools.cache
def painter(name: str, w: int = W, h: int = H) -> ReferencePainter:
    return make_reference(load_preset(name), w, h)


@functools.cache
def painted(name: str, w: int = W, h: int = H) -> torch.Tensor:
    return painter(name, w, h)(frames(name, w, h), torch.arange(3))


@pytest.mark.parametrize("name", BUILTINS)
def test_output_is_opaque_uint8(name):
    out = painted(name)
    assert out.dtype == torch.uint8 and out.shape == (3, H, W, 4)
    assert bool((out[..., 3] == 255).all())
    assert isinstance(painter(name), torch.nn.Module)
    assert KINDS[load_preset(name).post.kind] is type(painter(name))


@pytest.mark.parametrize("name", BUILTINS)
def test_deterministic(name):
    x = frames(name)
    again = make_reference(load_preset(name), W, H)(x, torch.tensor([7, 8, 9]))  # idx ignored
    assert torch.equal(again, painted(name))


@pytest.mark.parametrize("name", BUILTINS)
def test_batch_equals_single_frames(name):
    x, batch = frames(name), painted(name)
    for i in range(x.shape[0]):
        single = painter(name)(x[i : i + 1], torch.tensor([i]))[0]
        assert int((single.int() - batch[i].int()).abs().max()) <= 1


@pytest.mark.parametrize("name", BUILTINS)
def test_differs_from_procedural_look(name):
    preset = load_preset(name)
    x = frames(name)
    with torch.inference_mode():
        proc = make_effect(preset, W, H)(x, torch.arange(3))
    d = (painted(name)[..., :3].float() - proc[..., :3].float()).abs()
    idol = x[..., 3] > 0
    assert float(d.mean()) > 8.0
    assert float(d[idol].mean()) > 12.0


def test_presets_paint_differently():
    x = frames("studio")[:1]  # the same render through every painter
    outs = {n: painter(n)(x).float() for n in BUILTINS}
    for a in BUILTINS:
        for b in BUILTINS:
            if a < b:
                assert float((outs[a] - outs[b]).abs().mean()) > 10.0


@pytest.mark.parametrize("name", BUILTINS)
def test_idol_changes_background_far_from_her_does_not(name):
    x = frames(name, WIDE, H)
    out = painted(name, WIDE, H).int()
    # the mouth: the render changes there, and so does the painting
    mouth = (x[0].int() - x[1].int()).abs().amax(-1) > 0
    assert int(mouth.sum()) > 10
    assert float((out[0] - out[1]).abs()[mouth].float().mean()) > 5.0
    # beyond the painter's reach from the idol (in any of the frames) nothing changes,
    # even between different poses
    k = painter(name, WIDE, H).reach
    near = F.max_pool2d((x[..., 3] > 0).any(0)[None, None].float(), 2 * k + 1, 1, k)[0, 0] > 0
    far = ~near
    assert int(far.sum()) > 200
    for i in (1, 2):
        assert torch.equal(out[0][far], out[i][far])


def test_ink_wash_is_ink_and_vermilion():
    x, out = frames("ink-wash"), painted("ink-wash").float()
    u = x[..., :3].float() / x[..., 3:].float().clamp(min=1)
    red = (u[..., 0] - u[..., 1:].amax(-1)) > 0.4  # clearly red in the render
    idol = x[..., 3] == 255
    chroma = out[..., :3].amax(-1) - out[..., :3].amin(-1)
    assert float(chroma[idol & ~red].quantile(0.9)) < 40  # ink on paper: near-grey
    rc = out[red][:, :3]
    assert float((rc[:, 0] - rc[:, 1:].amax(-1)).mean()) > 60  # vermilion stays red


def test_unknown_kind():
    preset = load_preset("studio")
    odd = preset.model_copy(update={"post": preset.post.model_copy(update={"kind": "sketch"})})
    with pytest.raises(ValueError, match="sketch") as err:
        make_reference(odd, W, H)
    for known in ("toon", "ink-wash", "cyberpunk"):
        assert known in str(err.value)


def test_rejects_wrong_input():
    p = painter("studio")
    with pytest.raises(ValueError, match="expected uint8"):
        p(torch.zeros(1, H, W + 1, 4, dtype=torch.uint8))
    with pytest.raises(ValueError, match="expected uint8"):
        p(torch.zeros(1, H, W, 4, dtype=torch.float32))


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("name", BUILTINS)
def test_cuda_matches_cpu(name):
    w, h = 640, 360
    x = frames(name, w, h)
    p = make_reference(load_preset(name), w, h)
    cpu = p(x)
    p = p.to("cuda")
    gpu = p(x.cuda())
    assert gpu.device.type == "cuda" and gpu.dtype == torch.uint8
    assert torch.equal(gpu, p(x.cuda()))  # deterministic on the GPU too
    d = (gpu.cpu().float() - cpu.float()).abs()
    assert float(d.mean()) < 0.5 and float(d.quantile(0.999)) <= 8.0


def test_straight_streaks_are_the_dry_brush_on_a_featureless_field():
    """The procedural ink look borrows the painter's streaks as one vertical filter: it must be
    what the painter's own line-integral convolution gives where strands run straight down."""
    from pipeline.reference.ink_wash import straight_streaks

    p = painter("ink-wash", W, H)
    vert = torch.tensor([-1.0, 0.0]).view(1, 2, 1, 1).expand(1, 2, H, W)
    lic = p._lic(vert) + (p.valley - 0.5) * 0.6
    mine = straight_streaks(W, H)
    inner = (slice(None), slice(None), slice(30, -30), slice(None))  # borders reflect differently
    assert float((lic - mine)[inner].abs().max()) < 0.02
    assert float(mine.std()) > 0.9  # and it is a texture, not a flat field
