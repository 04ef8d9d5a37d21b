"""An avatar drawn by someone else (a PSD the test writes) rendered by Kagura: its mouth opens
with real speech, it blinks, its hair springs, the late mouth and the render worker processes
are bit-exact, and neither a still nor a transparent WebM shows the built-in idol."""

from __future__ import annotations

import dataclasses

import av
import numpy as np
import pytest
import torch
from PIL import Image
from scipy.stats import spearmanr

from app.bench_offline import synthetic_track
from app.cli import main
from core.avatar import AvatarParams
from core.frame import Frame
from core.stage import Context
from pipeline.graph import Graph
from pipeline.sources import TRACK_GIVES, track_frames
from presets.loader import load_preset
from render.avatar_doc import load_avatar
from render.idol import IdolRenderer
from render.layered import LayeredRenderer
from render.pool import PooledRenderStage
from render.process import RenderProcessStage
from render.stage import RenderStage
from tests.avatar_art import BACK_RGB, BODY_RGB, EYE_RGB, HAIR_RGB, MOUTH_RGB, SKIN_RGB, write_psd
from tests.signals import espeak_speech
from tests.sinks import Collect

W, H, FPS = 320, 180, 30


@pytest.fixture(scope="module")
def psd(tmp_path_factory):
    return write_psd(tmp_path_factory.mktemp("avatar") / "mika.psd")


@pytest.fixture(scope="module")
def preset():
    return load_preset("studio")


@pytest.fixture(scope="module")
def speech(tmp_path_factory):
    """~6 s of real speech with pauses (espeak-ng)."""
    path = tmp_path_factory.mktemp("speech") / "speech.wav"
    text = (
        "Hello everyone. [[_:_:_:_:]] Welcome to my stage tonight! [[_:_:_:_:]] "
        "This is my very own avatar. [[_:_:_:]] Are you ready to sing with me?"
    )
    return espeak_speech(path, text)


def _count(rgba: np.ndarray, rgb: tuple[int, int, int], tol: int = 8) -> int:
    close = np.abs(rgba[..., :3].astype(np.int16) - np.array(rgb)).max(axis=-1) <= tol
    return int((close & (rgba[..., 3] > 245)).sum())


def _late(p: AvatarParams, k: int) -> AvatarParams:
    """Another mouth, as the newest audio gives it at the frame's start; pose kept."""
    vowels = np.roll(np.asarray(p.vowels), 1 + k % 5)
    open_ = 0.0 if k % 4 == 0 else 1.0 - p.mouth_open
    return dataclasses.replace(p, mouth_open=open_, vowels=vowels, mouth_form=-p.mouth_form)


def _with_mouth(p: AvatarParams, late: AvatarParams) -> AvatarParams:
    return dataclasses.replace(
        p, mouth_open=late.mouth_open, vowels=late.vowels, mouth_form=late.mouth_form
    )


def test_late_mouth_is_bit_identical_to_a_whole_render(psd):
    doc = load_avatar(psd)
    ahead, whole = LayeredRenderer(doc, W, H), LayeredRenderer(doc, W, H)
    track = synthetic_track(40, FPS, seed=5)
    lock = [layer.name for layer in doc.layers].index("Hair Lock")
    changed = 0
    for i in range(len(track)):
        p = track[i]
        late = _late(p, i)
        base = ahead.render_base(p)
        before = base.rgba.copy()
        x0, y0, x1, y1 = ahead.redraw_mouth(base.rgba, late)
        ref = whole.render(_with_mouth(p, late))
        assert np.array_equal(base.rgba, ref.rgba), f"frame {i}: pixels differ"
        # the motion vectors are the base's: its mouth marked the part-ID map, so they may
        # differ from the whole frame's inside the mouth box (4x4 blocks) only
        _motion_differs_in_box_only(base.motion, ref.motion, (x0, y0, x1, y1))
        outside = before.copy()
        outside[y0:y1, x0:x1] = base.rgba[y0:y1, x0:x1]
        assert np.array_equal(outside, base.rgba)  # only the box changed
        changed += not np.array_equal(before, base.rgba)
        assert lock in ahead._late[4]  # the hair lock in front of the mouth is redrawn too
    assert changed > len(track) // 2


def _motion_differs_in_box_only(a: np.ndarray, b: np.ndarray, box) -> None:
    x0, y0, x1, y1 = box
    differ = np.argwhere((a != b).any(axis=2))
    if len(differ):
        assert y0 - 4 <= differ[:, 0].min() and differ[:, 0].max() < y1 + 4
        assert x0 - 4 <= differ[:, 1].min() and differ[:, 1].max() < x1 + 4


def test_mouth_opens_with_the_voice_and_eyes_blink(psd, speech):
    from audio.analysis import analyze_clip
    from audio.decode import decode_audio

    clip = decode_audio(speech)
    track = analyze_clip(clip, FPS)
    r = LayeredRenderer(load_avatar(psd), W, H)
    mouth, eyes = [], []
    for i in range(len(track)):
        rgba = r.render(track[i]).rgba
        mouth.append(_count(rgba, MOUTH_RGB))
        eyes.append(_count(rgba, EYE_RGB))
    pcm = clip.mono()
    hop = clip.sample_rate / FPS
    rms = [
        np.sqrt(np.mean(pcm[int(i * hop) : int((i + 1) * hop)] ** 2) + 1e-12)
        for i in range(len(track))
    ]
    rho = spearmanr(mouth, rms).statistic
    print(f"Spearman rho(mouth open area, RMS) = {rho:.3f} over {len(track)} frames")
    assert max(mouth) > 100 and min(mouth) == 0
    assert rho >= 0.5, rho
    lids = 0.5 * (track.scalars["eye_open_l"] + track.scalars["eye_open_r"])
    shut, open_ = np.nonzero(lids < 0.2)[0], np.nonzero(lids > 0.9)[0]
    assert len(shut) >= 1, "the speech's motion track has no blink to show"
    assert all(eyes[i] == 0 for i in shut)
    assert min(eyes[i] for i in open_) > 40  # two eye whites, ~15x18 px each at this size


def test_hair_springs_behind_a_turning_head(psd):
    """A head that tilts at once: the hair lags (differs from the same pose drawn at rest),
    then settles exactly where a head at rest has it."""
    doc = load_avatar(psd)
    seq = LayeredRenderer(doc, W, H)
    step = 10

    def params(i: int) -> AvatarParams:
        return AvatarParams(pts_ns=i * 33_333_333, head_roll=0.0 if i < step else 15.0)

    hair_lag, back_lag, body_lag = [], [], []
    frames = {}
    for i in range(step + 90):
        frames[i] = seq.render(params(i))
    for i in (step + 3, step + 6, step + 89):
        rest = LayeredRenderer(doc, W, H).render(params(i)).rgba  # no history: springs at rest
        a = frames[i].rgba
        hair_lag.append(abs(_count(a, HAIR_RGB) - _count(rest, HAIR_RGB)) + _xor(a, rest, HAIR_RGB))
        back_lag.append(_xor(a, rest, BACK_RGB))
        body_lag.append(_xor(a, rest, BODY_RGB))
    assert hair_lag[0] > 100 and back_lag[0] > 100, (hair_lag, back_lag)
    assert body_lag[0] == 0  # the body does not lag (nor move: a head tilt)
    assert hair_lag[-1] == 0 and back_lag[-1] == 0  # settled
    # the hair's motion vectors differ from the face's while it lags
    m = frames[step + 3].motion
    hair = _mask(frames[step + 3].rgba, HAIR_RGB)
    eye = _mask(frames[step + 3].rgba, EYE_RGB)
    assert np.abs(m[hair].mean(axis=0) - m[eye].mean(axis=0)).max() > 0.2


def _mask(rgba, rgb, tol=8):
    close = np.abs(rgba[..., :3].astype(np.int16) - np.array(rgb)).max(axis=-1) <= tol
    return close & (rgba[..., 3] > 245)


def _xor(a, b, rgb) -> int:
    return int((_mask(a, rgb) ^ _mask(b, rgb)).sum())


def _run(stage, track) -> list[Frame]:
    sink = Collect()
    Graph(track_frames(track), TRACK_GIVES, [stage], sink).run(Context(W, H, FPS, 48000))
    return sink.frames


def test_render_workers_are_bit_identical(psd, preset):
    """The offline pool (2 workers, the rig stepped in the main process) and the live render
    process (drawn ahead, the mouth late) give exactly the in-process frames."""
    track = synthetic_track(24, FPS, seed=3)
    single = _run(RenderStage(W, H, preset.palette, preset.line, avatar=psd), track)
    pool = PooledRenderStage(
        track, W, H, preset.palette, preset.line, workers=2, in_flight=3, avatar=psd
    )
    pooled = _run(pool, track)
    for a, b in zip(single, pooled, strict=True):
        assert torch.equal(a.image, b.image), f"frame {a.index}: pixels differ"
        assert torch.equal(a.motion, b.motion), f"frame {a.index}: motion differs"
    assert sum(f.motion.abs().max() > 0.5 for f in single) > len(track) // 2
    assert _count(single[5].image.numpy(), SKIN_RGB) > 1000  # the avatar, not the idol

    ctx = Context(W, H, FPS, 48000, mode="live")
    there = RenderProcessStage(W, H, preset.palette, preset.line, avatar=psd)
    here = RenderStage(W, H, preset.palette, preset.line, avatar=psd)
    whole = RenderStage(W, H, preset.palette, preset.line, avatar=psd)
    for stage in (there, here, whole):
        stage.setup(ctx)
    try:
        for f in track_frames(track):
            late = f.with_(params=_late(f.params, f.index))
            there.prepare(f)
            here.prepare(f)
            got, mine = there.finish(late), here.finish(late)
            ref = whole.process(f.with_(params=_with_mouth(f.params, late.params)))
            assert torch.equal(got.image, mine.image), f"live frame {f.index}: pixels differ"
            assert torch.equal(got.motion, mine.motion), f"live frame {f.index}: motion differs"
            assert torch.equal(got.image, ref.image), f"live frame {f.index}: not the whole frame"
    finally:
        there.close()


def _iou(a: np.ndarray, b: np.ndarray) -> float:
    return float((a & b).sum() / max(1, (a | b).sum()))


def test_still_and_transparent_webm_show_the_avatar_not_the_idol(psd, preset, speech, tmp_path):
    mine = tmp_path / "mine.png"
    rc = main([
        "still", str(speech), "--at", "0.2", "-o", str(mine), "--size", f"{W}x{H}",
        "--transparent", "--avatar", str(psd),
    ])  # fmt: skip
    assert rc == 0
    a = np.asarray(Image.open(mine).convert("RGBA"))
    b = IdolRenderer(W, H, preset.palette, preset.line).render(AvatarParams()).rgba
    # the avatar's own colours are there, the idol's are not (and the check can tell)
    assert _count(a, HAIR_RGB, 24) > 500 and _count(b, HAIR_RGB, 24) == 0
    assert _count(a, BACK_RGB, 24) > 500 and _count(b, BACK_RGB, 24) == 0
    for name in ("hair", "skin", "accent"):  # (not "outfit": white, like the eyes here)
        colour = tuple(bytes.fromhex(getattr(preset.palette, name).lstrip("#")))
        # (a stray anti-aliased pixel may pass for one by chance; the idol has hundreds)
        assert _count(a, colour, 8) <= 3, name
        assert _count(b, colour, 8) > 100, name

    webm = tmp_path / "mine.webm"
    rc = main([
        "render", str(speech), "-o", str(webm), "--size", f"{W}x{H}", "--fps", str(FPS),
        "--seconds", "1", "--transparent", "--avatar", str(psd), "--quiet",
    ])  # fmt: skip
    assert rc == 0
    with av.open(str(webm)) as c:
        codec = av.CodecContext.create("libvpx-vp9", "r")
        alphas = [
            frame.to_ndarray(format="rgba")[..., 3]
            for packet in c.demux(video=0)
            for frame in codec.decode(packet)
        ]
    assert len(alphas) == pytest.approx(FPS, abs=1)
    alpha = alphas[len(alphas) // 2]
    assert alpha[:8, :8].max() < 16, "corners should be transparent"
    drawn = LayeredRenderer(load_avatar(psd), W, H).render(AvatarParams()).rgba
    assert _iou(alpha > 128, drawn[..., 3] > 128) > 0.75  # the avatar's silhouette


def test_live_look_draws_the_avatar_kagura_live_sets(psd):
    """`kagura live --avatar` sets the default avatar; the live look's render stage (built
    without one, as the app's sessions build it) then draws it."""
    from pipeline.look import build_look
    from render.avatar_source import BUILTIN, avatar_spec, set_default_avatar

    set_default_avatar(avatar_spec(psd))
    try:
        look = build_look("studio", (W, H), FPS, False)
        try:
            frame = look.render.process(Frame(0, 0, AvatarParams()))
        finally:
            look.close()
    finally:
        set_default_avatar(BUILTIN)
    assert _count(frame.image.numpy(), HAIR_RGB) > 500
    assert _count(frame.image.numpy(), BACK_RGB) > 500


def test_rig_parallax_bounce_and_sway(psd):
    """Head turns slide front layers further than the face and back hair the other way; a beat
    nod bounces the body down; body roll sways it, the head riding on it."""
    from render.layered_rig import LayeredRig

    doc = load_avatar(psd)
    names = [layer.name for layer in doc.layers]

    def moved(p: AvatarParams) -> dict[str, np.ndarray]:
        mats = LayeredRig(doc).matrices(p)
        out = {}
        for i, layer in enumerate(doc.layers):
            x0, y0, x1, y1 = layer.bounds
            c = np.array([(x0 + x1) / 2, (y0 + y1) / 2, 1.0])
            out[names[i]] = (mats[i] @ c)[:2] - c[:2]
        return out

    turn = moved(AvatarParams(head_yaw=25.0))
    assert turn["hair_front"][0] > turn["Eyes Open"][0] > turn["head"][0] > 0
    assert turn["hair_back"][0] < 0 and np.allclose(turn["body"], 0)
    nod = moved(AvatarParams(head_pitch=-5.0))
    assert nod["body"][1] > 3.0  # ~1 % of the canvas height on a full nod
    sway = moved(AvatarParams(body_roll=8.0))
    assert abs(sway["body"][0]) > 5.0 and abs(sway["head"][0]) > abs(sway["body"][0])


def test_the_live_apps_wink_swaps_in_a_wink_layer(tmp_path):
    """The live app's F4 is a wink: an `expr_wink` layer replaces the eyes while it lasts."""
    from pipeline.expressions import Expressions
    from tests.avatar_art import write_png_folder

    folder = write_png_folder(tmp_path / "pngs")
    wink_rgb = (250, 0, 250)
    wink = Image.new("RGBA", (512, 512), (0, 0, 0, 0))
    wink.paste((*wink_rgb, 255), (180, 225, 332, 245))
    wink.save(folder / "Wink.png")
    r = LayeredRenderer(load_avatar(folder), W, H)
    plain = r.render(AvatarParams()).rgba
    live = Expressions(0.15)
    live.press("wink", 0, hold_ns=None)
    r.reset()
    winking = r.render(live.apply(AvatarParams(), 300_000_000)).rgba
    assert _count(plain, wink_rgb) == 0 and _count(plain, EYE_RGB) > 50
    assert _count(winking, wink_rgb) > 50 and _count(winking, EYE_RGB) == 0
