"""Importing layered avatars: PSDs and PNG folders the tests write, names and aliases, the
manifest, and bad input (one line, exit 2, nothing the user owns touched)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from app.cli import main
from render.avatar_doc import load_avatar
from render.avatar_roles import role_of
from render.layered_rig import LayeredRig
from tests.avatar_art import BACK_RGB, SKIN_RGB, write_png_folder, write_psd


def _digest(path: Path) -> str:
    files = sorted(path.rglob("*")) if path.is_dir() else [path]
    h = hashlib.sha256()
    for f in files:
        if f.is_file():
            h.update(f.name.encode() + f.read_bytes())
    return h.hexdigest()


def _check(capsys, *args: str) -> tuple[int, str, str]:
    rc = main(["avatar", "check", *args])
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_role_names_and_aliases():
    assert role_of("Mouth A") == "mouth_a"
    assert role_of("mouth-N") == "mouth_closed"
    assert role_of("MOUTH_CLOSED") == "mouth_closed"
    assert role_of("a", prefix="mouth_") == "mouth_a"
    assert role_of("closed", prefix="eyes_") == "eyes_closed"
    assert role_of("closed") == "mouth_closed"
    assert role_of("前髪") == "hair_front"
    assert role_of("閉じ目") == "eyes_closed"
    assert role_of("Bangs") == "hair_front"
    assert role_of("Ponytail L") == "hair"
    assert role_of("BG") == "background"
    assert role_of("sparkles") is None


def test_psd_layers_groups_and_aliases(tmp_path):
    psd = write_psd(
        tmp_path / "mika.psd", mouth_group=True, names={"hair_front": "Bangs", "head": "Face"}
    )
    doc = load_avatar(psd)
    roles = [(layer.name, layer.role) for layer in doc.layers]
    assert roles[:3] == [("hair_back", "hair_back"), ("body", "body"), ("Face", "head")]
    assert ("a", "mouth_a") in roles and ("closed", "mouth_closed") in roles  # group "Mouth"
    assert ("Bangs", "hair_front") in roles and ("Hair Lock", "hair") in roles
    assert roles[-1] == ("Hair Lock", "hair")  # PSD order, back to front
    assert (doc.width, doc.height) == (512, 512)
    face = doc.layers[2]
    assert tuple(face.rgba[face.rgba[..., 3] == 255][0, :3]) == SKIN_RGB
    assert face.bounds == (136, 110, 377, 391)  # cropped layers keep their place


def test_png_folder_with_manifest_overrides(tmp_path):
    manifest = """
[avatar]
pivot = [256, 380]
order = ["hair_back", "body", "head", "Eyes Open", "eyes_closed", "mouth_a", "mouth_i",
         "mouth_u", "mouth_e", "mouth_o", "mouth_closed", "brows", "hair_front", "Hair Lock"]

[layers.hair_front]
spring = 1.5
damping = 0.2

[layers."Hair Lock"]
role = "other"
"""
    folder = write_png_folder(tmp_path / "pngs", manifest=manifest)
    doc = load_avatar(folder)
    assert [layer.name for layer in doc.layers][-2:] == ["hair_front", "Hair Lock"]
    assert doc.layers[-1].role == "other"
    rig = LayeredRig(doc)
    assert rig.neck == (256, 380)
    k = [layer.name for layer in doc.layers].index("hair_front")
    spring = rig.springs[k][0]
    assert spring.w == pytest.approx(2 * np.pi * 1.5) and spring.zeta == 0.2
    assert rig.springs[len(doc.layers) - 1] is None  # role "other": no spring
    back = doc.layers[0]
    assert tuple(back.rgba[back.rgba[..., 3] == 255][0, :3]) == BACK_RGB


def test_cmyk_and_16_bit_are_converted_with_a_notice(tmp_path, capsys):
    for mode, depth, note in (("CMYK", 8, "CMYK document converted"), ("RGB", 16, "16-bit")):
        psd = write_psd(tmp_path / f"{mode}{depth}.psd", size=256, mode=mode, depth=depth)
        rc, out, _ = _check(capsys, str(psd))
        assert rc == 0 and note in out, out
        doc = load_avatar(psd)
        face = next(layer for layer in doc.layers if layer.role == "head")
        rgb = face.rgba[face.rgba[..., 3] == 255][:, :3].astype(int)
        assert np.abs(rgb.mean(axis=0) - SKIN_RGB).max() < 3  # the colours survive


def test_huge_canvas_is_downscaled_with_a_notice(tmp_path, capsys):
    folder = write_png_folder(tmp_path / "big", manifest="[layers.body]\nx = 4600\ny = 10\n")
    rc, out, _ = _check(capsys, str(folder))
    assert rc == 0
    assert "canvas 5112x522 is over 4096 px: downscaled to 4096x418" in out, out


BAD_MANIFESTS = [
    ("[avatar]\ncolour = 1\n", "avatar.colour: unknown key"),
    ('[layers.hair_front]\nspring = "soft"\n', "layers.hair_front.spring: expected a number"),
    ("[avatar]\npivot = [1]\n", "avatar.pivot: expected a pair of numbers"),
    ('[layers.hair_front]\nrole = "hat"\n', "layers.hair_front.role: expected one of"),
    ("[layers.tail]\ndepth = 1.0\n", "layers.tail: no layer named 'tail'"),
    ("[avatar\n", "TOML syntax error"),
]


@pytest.mark.parametrize(("text", "message"), BAD_MANIFESTS)
def test_bad_manifest_is_one_line_exit_2(tmp_path, capsys, text, message):
    folder = write_png_folder(tmp_path / "av", manifest=text)
    before = _digest(folder)
    rc, _, err = _check(capsys, str(folder))
    assert rc == 2
    assert err.count("\n") == 1 and message in err and "avatar.toml" in err, err
    assert _digest(folder) == before


def test_bad_files_are_one_line_exit_2(tmp_path, capsys):
    text = tmp_path / "notes.psd"
    text.write_text("not a picture")
    no_mouth = write_psd(tmp_path / "no_mouth.psd", mouths=("mouth_a",))
    clear = tmp_path / "clear"
    clear.mkdir()
    for name in ("head", "mouth_a", "mouth_closed"):
        Image.new("RGBA", (64, 64), (255, 0, 0, 0)).save(clear / f"{name}.png")
    cases = [
        (text, "not a PSD file"),
        (no_mouth, "missing mouth_i, mouth_u, mouth_e, mouth_o, mouth_closed"),
        (clear, "no layer has any visible pixel"),
        (tmp_path / "missing.psd", "no such file or folder"),
    ]
    for path, message in cases:
        before = _digest(path) if path.exists() else None
        rc, _, err = _check(capsys, str(path))
        assert rc == 2, (path, err)
        assert err.startswith("kagura: error: ") and err.count("\n") == 1, err
        assert message in err and str(path.name) in err, err
        assert (_digest(path) if path.exists() else None) == before


def test_check_prints_roles_and_writes_a_sheet(tmp_path, capsys):
    psd = write_psd(tmp_path / "mika.psd")
    sheet = tmp_path / "sheet.png"
    rc, out, _ = _check(capsys, str(psd), "--sheet", str(sheet))
    assert rc == 0
    assert "mouth_closed" in out and "eyes_half (missing)" in out and "neck pivot" in out
    im = np.asarray(Image.open(sheet).convert("RGB"))
    cell = 256
    assert im.shape[1] == 6 * cell and im.shape[0] >= 3 * cell
    cells = [im[18 : 18 + cell - 1, c * cell : (c + 1) * cell] for c in range(6)]
    # the six mouth cells (closed, A, I, U, E, O) all differ
    for a in range(6):
        for b in range(a + 1, 6):
            assert np.abs(cells[a].astype(int) - cells[b]).sum() > 1000, (a, b)
    # the sheet is never written into the avatar itself
    rc, _, err = _check(capsys, str(psd), "--sheet", str(psd))
    assert rc == 2 and "expected a .png" in err


def test_a_bad_avatar_stops_render_still_and_live_before_any_work(tmp_path, capsys):
    bad = tmp_path / "notes.psd"
    bad.write_text("not a picture")
    audio = tmp_path / "song.wav"
    audio.write_bytes(b"")  # never read: the avatar is checked first
    out = tmp_path / "out.mp4"
    for argv in (
        ["render", str(audio), "-o", str(out), "--avatar", str(bad)],
        ["still", str(audio), "--at", "1", "-o", str(tmp_path / "s.png"), "--avatar", str(bad)],
        ["live", "--avatar", str(bad)],
    ):
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "notes.psd: not a PSD file" in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.psd", "song.wav"]


def test_manifest_beside_a_psd_or_given_itself(tmp_path):
    psd = write_psd(tmp_path / "mika.psd")
    (tmp_path / "mika.toml").write_text('[layers.brows]\nrole = "other"\n', "utf-8")
    assert next(x for x in load_avatar(psd).layers if x.name == "brows").role == "other"
    manifest = tmp_path / "stage.toml"
    manifest.write_text('[avatar]\nsource = "mika.psd"\nturn = 0.5\n', "utf-8")
    doc = load_avatar(manifest)
    assert doc.path == psd and doc.manifest.avatar.turn == 0.5
    manifest.write_text('[avatar]\nsource = "gone.psd"\n', "utf-8")
    with pytest.raises(ValueError, match=r"stage.toml: avatar.source: no such file"):
        load_avatar(manifest)
