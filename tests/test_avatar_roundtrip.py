"""`kagura avatar export-builtin`: the built-in idol as a layered PSD, read back by the
importer, renders close to the idol itself — and its mouth shapes still lip-sync."""

from __future__ import annotations

import numpy as np
import pytest

from app.cli import main
from core.avatar import VOWELS, AvatarParams
from presets.loader import load_preset
from render.avatar_doc import load_avatar
from render.idol import IdolRenderer
from render.layered import LayeredRenderer

W, H = 640, 360


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    out = tmp_path_factory.mktemp("export") / "idol.psd"
    assert main(["avatar", "export-builtin", str(out)]) == 0
    return out


def test_export_is_a_psd_in_the_convention(exported):
    from psd_tools import PSDImage

    psd = PSDImage.open(exported)
    names = [layer.name for layer in psd]
    for role in ("mouth_a", "mouth_i", "mouth_u", "mouth_e", "mouth_o", "mouth_closed"):
        assert role in names
    for role in ("eyes_open", "eyes_half", "eyes_closed", "brows", "hair_back", "hair_front"):
        assert role in names
    assert names.index("hair_back") < names.index("head") < names.index("hair_front")
    hidden = {layer.name for layer in psd if not layer.visible}
    assert {"mouth_a", "eyes_closed"} <= hidden and "mouth_closed" not in hidden


def test_round_trip_renders_close_to_the_idol(exported):
    preset = load_preset("studio")
    doc = load_avatar(exported)
    assert not doc.notices, doc.notices
    mine = LayeredRenderer(doc, W, H)
    idol = IdolRenderer(W, H, preset.palette, preset.line)
    for p in (AvatarParams(), AvatarParams(eye_open_l=0.0, eye_open_r=0.0)):
        a, b = mine.render(p).rgba, idol.render(p).rgba
        ma, mb = a[..., 3] > 127, b[..., 3] > 127
        iou = (ma & mb).sum() / (ma | mb).sum()
        diff = np.abs(a.astype(np.int16) - b.astype(np.int16))
        print(f"round trip: silhouette IoU {iou:.4f}, mean |diff| {diff.mean():.2f} levels")
        assert iou > 0.98
        assert diff.mean() < 3.0
        assert np.percentile(diff, 95) < 8  # differences are at the resampled line edges
    # an open vowel shows the exported open mouth: the mouth box changes, nothing else does
    v = np.zeros(len(VOWELS), np.float32)
    v[VOWELS.index("A")] = 1.0
    mine.reset()
    closed = mine.render(AvatarParams()).rgba
    mine.reset()
    open_a = mine.render(AvatarParams(mouth_open=0.8, vowels=v)).rgba
    changed = np.argwhere((closed != open_a).any(axis=2))
    assert len(changed) > 50
    height = changed[:, 0].max() - changed[:, 0].min()
    assert height < 0.1 * H  # only the mouth


def test_export_never_overwrites(exported, capsys):
    before = exported.read_bytes()
    assert main(["avatar", "export-builtin", str(exported)]) == 2
    assert "already exists" in capsys.readouterr().err
    assert exported.read_bytes() == before
    assert main(["avatar", "export-builtin", str(exported.with_suffix(".png"))]) == 2
