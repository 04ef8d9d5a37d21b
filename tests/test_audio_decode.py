"""Decoding audio files of every common format through av, and the errors for bad inputs."""

from __future__ import annotations

import wave
from pathlib import Path

import av
import numpy as np
import pytest

from audio.decode import AudioClip, AudioError, decode_audio

SECONDS = 1.5


def _signal(rate: int, channels: int, seconds: float = SECONDS) -> np.ndarray:
    t = np.arange(round(rate * seconds)) / rate
    left = 0.5 * np.sin(2 * np.pi * 440 * t)
    right = 0.3 * np.sin(2 * np.pi * 660 * t)
    return np.stack([left, right][:channels]).astype(np.float32)


def _encode(path: Path, codec: str, rate: int, channels: int = 2, fmt: str | None = None, **opts):
    """Encode a synthesized tone with av (the same library that decodes it)."""
    layout = "stereo" if channels == 2 else "mono"
    x = _signal(rate, channels)
    with av.open(str(path), "w", format=fmt) as c:
        s = c.add_stream(codec, rate=rate, layout=layout)
        if opts:
            s.codec_context.options = opts
        frame = av.AudioFrame.from_ndarray(x, format="fltp", layout=layout)
        frame.rate = rate
        rs = av.AudioResampler(format=s.codec_context.format.name, layout=layout, rate=rate)
        size = s.codec_context.frame_size or 1024
        for out in rs.resample(frame):
            # Feed the encoder in its frame size (fixed-size codecs need it).
            arr = out.to_ndarray()
            packed = (
                arr.ndim == 2 and arr.shape[0] == 1 and channels > 1 and not out.format.is_planar
            )
            step = size * (channels if packed else 1)
            for i in range(0, arr.shape[1], step):
                f = av.AudioFrame.from_ndarray(
                    np.ascontiguousarray(arr[:, i : i + step]),
                    format=out.format.name,
                    layout=layout,
                )
                f.rate = rate
                for pkt in s.encode(f):
                    c.mux(pkt)
        for pkt in s.encode(None):
            c.mux(pkt)
    return x


FORMATS = [
    ("wav", "pcm_s16le", 44100, None, {}),
    ("mp3", "libmp3lame", 44100, None, {}),
    ("flac", "flac", 48000, None, {}),
    ("ogg", "vorbis", 44100, "ogg", {"strict": "-2"}),  # FFmpeg's native (experimental) Vorbis
    ("opus", "libopus", 48000, "ogg", {}),
    ("m4a", "aac", 44100, "mp4", {}),
]


@pytest.mark.parametrize(
    ("ext", "codec", "rate", "fmt", "opts"), FORMATS, ids=[f[0] for f in FORMATS]
)
def test_decode_each_format(tmp_path, ext, codec, rate, fmt, opts):
    path = tmp_path / f"tone.{ext}"
    _encode(path, codec, rate, 2, fmt, **opts)
    clip = decode_audio(path)
    assert isinstance(clip, AudioClip)
    assert clip.sample_rate == rate
    assert clip.channels == 2
    assert clip.samples.dtype == np.float32
    assert clip.samples.shape == (2, clip.num_samples)
    # Lossy codecs add priming/padding (up to a couple of codec frames).
    assert SECONDS - 0.01 <= clip.duration_s <= SECONDS + 0.1, clip.duration_s
    assert clip.path == str(path)
    # The content survived: the left channel is the louder 440 Hz tone.
    rms = np.sqrt(np.mean(clip.samples**2, axis=1))
    assert 0.25 < rms[0] < 0.45 and 0.15 < rms[1] < 0.3, rms
    spec = np.abs(np.fft.rfft(clip.samples[0]))
    peak_hz = np.argmax(spec) * clip.sample_rate / clip.num_samples
    assert abs(peak_hz - 440) < 5


def test_lossless_is_exact(tmp_path):
    path = tmp_path / "tone.flac"
    x = _encode(path, "flac", 48000, 2)
    clip = decode_audio(path)
    assert clip.num_samples == x.shape[1]
    np.testing.assert_allclose(clip.samples, x, atol=1.0 / 32768 * 1.01)


def test_stereo_to_mono_and_mono_file(tmp_path):
    path = tmp_path / "st.wav"
    x = _encode(path, "pcm_s16le", 44100, 2)
    clip = decode_audio(path)
    mono = clip.mono()
    assert mono.shape == (clip.num_samples,) and mono.dtype == np.float32
    np.testing.assert_allclose(mono, x.mean(axis=0), atol=1e-4)
    path1 = tmp_path / "mono.wav"
    _encode(path1, "pcm_s16le", 22050, 1)
    clip1 = decode_audio(path1)
    assert clip1.channels == 1 and clip1.sample_rate == 22050
    np.testing.assert_array_equal(clip1.mono(), clip1.samples[0])


@pytest.mark.parametrize(("src", "dst"), [(44100, 48000), (48000, 16000), (22050, 44100)])
def test_resample_lengths(src, dst):
    n = src * 2 + 17  # not a whole number of output samples
    t = np.arange(n) / src
    x = np.stack([np.sin(2 * np.pi * 300 * t), np.cos(2 * np.pi * 300 * t)]).astype(np.float32)
    clip = AudioClip(x, src, "mem")
    out = clip.resampled(dst)
    assert out.sample_rate == dst
    assert out.num_samples == (n * dst + src // 2) // src
    assert out.channels == 2 and out.samples.dtype == np.float32
    assert abs(out.duration_s - clip.duration_s) <= 0.5 / dst + 1e-12
    # High quality: a 300 Hz tone comes through with the right level, phase and frequency.
    tt = np.arange(out.num_samples) / dst
    mid = slice(out.num_samples // 4, 3 * out.num_samples // 4)
    np.testing.assert_allclose(out.samples[0, mid], np.sin(2 * np.pi * 300 * tt[mid]), atol=2e-3)
    assert clip.resampled(src) is clip


def test_start_and_seconds_slicing(tmp_path):
    path = tmp_path / "s.wav"
    _encode(path, "pcm_s16le", 44100, 2)
    full = decode_audio(path)
    part = decode_audio(path, start_s=0.25, seconds=0.5)
    a = round(0.25 * 44100)
    assert part.num_samples == round(0.5 * 44100)
    np.testing.assert_array_equal(part.samples, full.samples[:, a : a + part.num_samples])
    tail = decode_audio(path, start_s=1.0)
    np.testing.assert_array_equal(tail.samples, full.samples[:, 44100:])
    # Asking for more than there is gives what there is.
    over = decode_audio(path, start_s=1.0, seconds=10)
    assert over.num_samples == full.num_samples - 44100
    # Lossy formats slice consistently with their own full decode too.
    mp3 = tmp_path / "s.mp3"
    _encode(mp3, "libmp3lame", 44100, 2)
    full3 = decode_audio(mp3)
    part3 = decode_audio(mp3, start_s=0.5, seconds=0.25)
    b = round(0.5 * 44100)
    np.testing.assert_array_equal(part3.samples, full3.samples[:, b : b + part3.num_samples])


def _one_line(err: pytest.ExceptionInfo, name: str) -> str:
    msg = str(err.value)
    assert "\n" not in msg
    assert name in msg
    assert err.value.__cause__ is None or not isinstance(err.value.__cause__, av.FFmpegError)
    return msg


def test_missing_file(tmp_path):
    with pytest.raises(AudioError) as err:
        decode_audio(tmp_path / "missing_song.mp3")
    assert "no such file" in _one_line(err, "missing_song.mp3")


def test_text_file(tmp_path):
    p = tmp_path / "notes.txt"
    p.write_text("these are lyrics, not audio\n" * 20)
    with pytest.raises(AudioError) as err:
        decode_audio(p)
    _one_line(err, "notes.txt")


def test_png_file(tmp_path):
    p = tmp_path / "cover.png"
    with av.open(str(p), "w", format="image2") as c:
        s = c.add_stream("png", rate=1)
        s.width, s.height, s.pix_fmt = 16, 16, "rgb24"
        f = av.VideoFrame.from_ndarray(np.zeros((16, 16, 3), np.uint8), format="rgb24")
        for pkt in [*s.encode(f), *s.encode(None)]:
            c.mux(pkt)
    with pytest.raises(AudioError) as err:
        decode_audio(p)
    assert "audio" in _one_line(err, "cover.png")


def test_video_without_audio(tmp_path):
    p = tmp_path / "silent_video.mp4"
    with av.open(str(p), "w") as c:
        s = c.add_stream("mpeg4", rate=10)
        s.width, s.height, s.pix_fmt = 32, 32, "yuv420p"
        for _ in range(5):
            f = av.VideoFrame.from_ndarray(np.zeros((32, 32, 3), np.uint8), format="rgb24")
            for pkt in s.encode(f):
                c.mux(pkt)
        for pkt in s.encode(None):
            c.mux(pkt)
    with pytest.raises(AudioError) as err:
        decode_audio(p)
    msg = _one_line(err, "silent_video.mp4")
    assert "no audio stream" in msg and "video" in msg


def test_zero_length_audio(tmp_path):
    p = tmp_path / "empty.wav"
    with wave.open(str(p), "wb") as w:  # a valid WAV header with no frames
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(44100)
    assert p.stat().st_size > 0
    with pytest.raises(AudioError) as err:
        decode_audio(p)
    assert "zero-length" in _one_line(err, "empty.wav")
    z = tmp_path / "zero_bytes.wav"
    z.write_bytes(b"")
    with pytest.raises(AudioError) as err:
        decode_audio(z)
    _one_line(err, "zero_bytes.wav")


def test_start_beyond_end(tmp_path):
    p = tmp_path / "short.wav"
    _encode(p, "pcm_s16le", 44100, 1)
    with pytest.raises(AudioError) as err:
        decode_audio(p, start_s=5.0)
    assert "beyond the end" in _one_line(err, "short.wav")


def test_audio_error_is_value_error():
    assert issubclass(AudioError, ValueError)
