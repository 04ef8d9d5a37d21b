"""The training losses that judge sharpness, on pictures whose answer is known."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from training.train import detail_energy, multiscale_edge_l1, shift_l1, texture_l1


def grey_texture(seed: int, h: int = 64, w: int = 96) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return (torch.rand((1, 1, h, w), generator=g) * 2 - 1).expand(1, 3, h, w) * 0.5


def test_texture_loss_rewards_texture_in_the_wrong_place_over_no_texture():
    """Texture the input does not place: a same-amount texture elsewhere costs pixel and edge
    L1 more than a blur does, the texture loss much less — the pull the loss exists for."""
    ref, other = grey_texture(0), grey_texture(1)
    blurred = F.avg_pool2d(ref, 5, 1, 2, count_include_pad=False)
    assert F.l1_loss(other, ref) > F.l1_loss(blurred, ref)
    assert multiscale_edge_l1(other, ref) > multiscale_edge_l1(blurred, ref)
    assert texture_l1(other, ref) < 0.5 * texture_l1(blurred, ref)
    assert float(texture_l1(ref, ref)) < 1e-3


def test_texture_loss_does_not_take_colour_noise_for_grey_texture():
    ref = grey_texture(0)
    g = torch.Generator().manual_seed(2)
    colour = (torch.rand(ref.shape, generator=g) * 2 - 1) * 0.5  # each channel its own noise
    assert texture_l1(colour, ref) > 2 * texture_l1(grey_texture(1), ref)


def test_detail_energy_is_local():
    x = torch.zeros(1, 3, 64, 64)
    x[..., :, 32:] = grey_texture(0, 64, 32)
    e = detail_energy(x)  # (1, 3, 8, 8): luma, then the two chroma channels
    assert e.shape == (1, 3, 8, 8)
    assert float(e[0, 0, :, :3].max()) < 1e-2 < float(e[0, 0, :, 5:].min())
    assert float(e[0, 1:].max()) < 1e-2  # grey: no chroma detail anywhere


def test_line_loss_costs_a_softened_line_more_than_the_same_error_on_flat_paper():
    from training.train import line_edge_l1

    ref = torch.zeros(1, 3, 32, 32)
    ref[..., :, 16:18] = 1.0  # a line
    soft = ref.clone()
    soft[..., :, 15:19] = 0.5  # the line, softened
    flat = ref.clone()
    flat[..., :, 4:8] = 0.5  # the same change of values, away from the line
    assert float(line_edge_l1(ref, ref)) == 0.0
    assert line_edge_l1(soft, ref) > 2 * line_edge_l1(flat, ref)


def test_shift_loss_is_zero_for_a_shift_equivariant_painter_only():
    """A 3x3 blur paints a moved picture as the moved painting (0 away from the seam); a painter
    that works on an 8-pixel grid, as a latent does, paints it differently."""
    x = torch.rand((2, 3, 64, 96), generator=torch.Generator().manual_seed(3))
    blur = lambda y: F.avg_pool2d(y, 3, stride=1, padding=1)  # noqa: E731
    grid = lambda y: F.interpolate(F.avg_pool2d(y, 8), scale_factor=8.0)  # noqa: E731
    for dy, dx in ((1, 3), (5, 7)):
        moved = torch.roll(x, (dy, dx), dims=(2, 3))
        assert float(shift_l1(blur(moved), blur(x), dy, dx)) < 1e-6
        assert float(shift_l1(grid(moved), grid(x), dy, dx)) > 0.02
