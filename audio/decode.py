"""Decode audio files (anything FFmpeg reads) into float32 sample arrays through `av`.

`decode_audio` is the one entry point. It returns an `AudioClip` at the file's native sample
rate and channel count, as planar float32 ``(channels, n)``. Bad inputs raise `AudioError`
(a `ValueError`) with a one-line message naming the file and what was expected; av's own
exceptions never escape for the cases we know about.

Slicing (`start_s`, `seconds`) is sample-exact with respect to a full decode: the file is
decoded from its beginning and samples before `start_s` are dropped, so a slice is exactly
``full.samples[:, round(start_s*sr) : ...]``. (Decoding is cheap next to everything else; a
seek would make slices depend on each codec's seek accuracy.)
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import av
import numpy as np

from audio.errors import AudioError  # re-exported: callers may import it from here

__all__ = ["AudioClip", "AudioError", "decode_audio"]


@dataclass(frozen=True)
class AudioClip:
    """Decoded audio: ``samples`` float32 (channels, n) at ``sample_rate``."""

    samples: np.ndarray
    sample_rate: int
    path: str = ""

    @property
    def channels(self) -> int:
        return int(self.samples.shape[0])

    @property
    def num_samples(self) -> int:
        return int(self.samples.shape[1])

    @property
    def duration_s(self) -> float:
        return self.num_samples / self.sample_rate

    def mono(self) -> np.ndarray:
        """The channel mean, float32 (n,)."""
        if self.channels == 1:
            return np.ascontiguousarray(self.samples[0], dtype=np.float32)
        return self.samples.mean(axis=0, dtype=np.float64).astype(np.float32)

    def resampled(self, rate: int) -> AudioClip:
        """The clip at `rate` Hz (soxr, very high quality).

        The result has exactly ``round(num_samples * rate / sample_rate)`` samples (half up), so
        durations agree to within half an output sample and an encoder sink can rely on the
        length (e.g. 44.1 kHz -> 48 kHz for Opus).
        """
        rate = int(rate)
        if rate <= 0:
            raise ValueError(f"resample rate must be positive, got {rate}")
        if rate == self.sample_rate:
            return self
        import soxr  # librosa's resampling backend; imported lazily

        n_out = (self.num_samples * rate + self.sample_rate // 2) // self.sample_rate
        out = soxr.resample(self.samples.T, self.sample_rate, rate, quality="VHQ")
        out = np.asarray(out, np.float32).reshape(-1, self.channels).T
        if out.shape[1] > n_out:
            out = out[:, :n_out]
        elif out.shape[1] < n_out:
            out = np.pad(out, ((0, 0), (0, n_out - out.shape[1])))
        return AudioClip(np.ascontiguousarray(out), rate, self.path)


def _fail(path: str, what: str) -> AudioError:
    return AudioError(f"{path}: {what}".replace("\n", " "))


def decode_audio(
    path: str | os.PathLike, start_s: float = 0.0, seconds: float | None = None
) -> AudioClip:
    """Decode the first audio stream of `path` from `start_s` for `seconds` (None: to the end)."""
    p = str(path)
    expected = "expected an audio file FFmpeg can read (WAV, MP3, FLAC, OGG, Opus, M4A/AAC, ...)"
    if start_s < 0 or not np.isfinite(start_s):
        raise _fail(p, f"start_s must be a finite number >= 0, got {start_s}")
    if seconds is not None and (seconds <= 0 or not np.isfinite(seconds)):
        raise _fail(p, f"seconds must be a finite number > 0 or None, got {seconds}")
    fp = Path(p)
    if not fp.exists():
        raise _fail(p, f"no such file; {expected}")
    if fp.is_dir():
        raise _fail(p, f"is a directory; {expected}")
    if fp.stat().st_size == 0:
        raise _fail(p, f"empty file (0 bytes); {expected}")

    try:
        container = av.open(p, mode="r")
    except (av.FFmpegError, OSError, UnicodeDecodeError) as e:
        reason = getattr(e, "strerror", None) or type(e).__name__
        raise _fail(p, f"not an audio file FFmpeg can read ({reason}); {expected}") from None

    with container:
        streams = container.streams.audio
        if not streams:
            kinds = sorted({s.type for s in container.streams})
            found = f"found only {', '.join(kinds)} streams" if kinds else "found no streams"
            raise _fail(p, f"no audio stream ({found}); {expected}")
        stream = streams[0]
        rate = stream.codec_context.sample_rate or stream.sample_rate
        if not rate:
            raise _fail(p, "audio stream has no sample rate; expected a decodable audio stream")
        rate = int(rate)
        first = round(start_s * rate)
        last = None if seconds is None else first + round(seconds * rate)

        chunks: list[np.ndarray] = []
        pos = 0  # samples decoded so far (at the stream's rate)
        resampler: av.AudioResampler | None = None
        try:
            for frame in container.decode(stream):
                if resampler is None:
                    # Same rate and layout: a format conversion to planar float only.
                    resampler = av.AudioResampler(format="fltp", layout=frame.layout, rate=rate)
                for out in resampler.resample(frame):
                    arr = out.to_ndarray()
                    pos = _keep(chunks, arr, pos, first, last)
                if last is not None and pos >= last:
                    break
            else:
                if resampler is not None:
                    for out in resampler.resample(None):
                        pos = _keep(chunks, out.to_ndarray(), pos, first, last)
        except av.FFmpegError as e:
            reason = getattr(e, "strerror", None) or type(e).__name__
            raise _fail(p, f"audio stream could not be decoded ({reason}); {expected}") from None

    if pos == 0:
        raise _fail(p, "audio stream holds no samples (zero-length audio); expected audio content")
    if first >= pos:
        raise _fail(
            p, f"start_s={start_s:g} is beyond the end of the audio ({pos / rate:.3f} s long)"
        )
    samples = np.ascontiguousarray(np.concatenate(chunks, axis=1), dtype=np.float32)
    return AudioClip(samples, rate, p)


def _keep(chunks: list[np.ndarray], arr: np.ndarray, pos: int, first: int, last: int | None) -> int:
    """Append the part of `arr` (channels, k) at samples [pos, pos+k) inside [first, last)."""
    k = arr.shape[1]
    lo = max(first - pos, 0)
    hi = k if last is None else min(k, last - pos)
    if hi > lo:
        chunks.append(arr[:, lo:hi])
    return pos + k
