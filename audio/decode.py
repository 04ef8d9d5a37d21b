"""Decode audio files (anything FFmpeg reads) into float32 sample arrays through `av`.

`decode_audio` is the one entry point. It returns an `AudioClip` at the file's native sample
rate and channel count (or at most `max_channels`, downmixed), as planar float32
``(channels, n)``. Any channel count FFmpeg decodes works: the decoder output is converted to
*packed* float and split into channels with numpy, because av's planar conversion of a frame
with 8 or more channels reads past the frame's data pointers and crashes the process (SIGSEGV).
Samples that are not finite (NaN, ±Inf) are refused with one line naming the file. Bad inputs raise `AudioError`
(a `ValueError`) with a one-line message naming the file and what was expected; av's own
exceptions never escape for the cases we know about.

Slicing (`start_s`, `seconds`) is sample-exact with respect to a full decode: the file is
decoded from its beginning and samples before `start_s` are dropped, so a slice is exactly
``full.samples[:, round(start_s*sr) : ...]``. (Decoding is cheap next to everything else; a
seek would make slices depend on each codec's seek accuracy.)
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

import av
import numpy as np

from audio.errors import AudioError  # re-exported: callers may import it from here

__all__ = ["AudioClip", "AudioError", "decode_audio", "downmix"]

# Float files may go a little over full scale (±1) and are clipped by the encoders; values 60 dB
# above it are no longer sound but damage, and overflow the analysis' spectra.
MAX_PEAK = 1000.0


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
    path: str | os.PathLike,
    start_s: float = 0.0,
    seconds: float | None = None,
    max_channels: int | None = None,
) -> AudioClip:
    """Decode the first audio stream of `path` from `start_s` for `seconds` (None: to the end);
    with `max_channels`, more channels than that are downmixed (see `downmix`)."""
    p = str(path)
    expected = "expected an audio file FFmpeg can read (WAV, MP3, FLAC, OGG, Opus, M4A/AAC, ...)"
    if start_s < 0 or not np.isfinite(start_s):
        raise _fail(p, f"start_s must be a finite number >= 0, got {start_s}")
    if seconds is not None and (seconds <= 0 or not np.isfinite(seconds)):
        raise _fail(p, f"seconds must be a finite number > 0 or None, got {seconds}")
    fp = Path(p)
    try:
        st = fp.stat()
    except FileNotFoundError:
        raise _fail(p, f"no such file; {expected}") from None
    except OSError as exc:
        raise _fail(p, f"cannot be read ({exc.strerror}); {expected}") from None
    if stat.S_ISDIR(st.st_mode):
        raise _fail(p, f"is a directory; {expected}")
    if not stat.S_ISREG(st.st_mode):
        kind = "a FIFO (named pipe)" if stat.S_ISFIFO(st.st_mode) else "not a regular file"
        raise _fail(p, f"is {kind}; {expected}")
    if st.st_size == 0:
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
        # codecs that decode frames on threads (FLAC among them) do: a long file's decode is
        # part of what a render's first frame waits for; the samples are the same
        stream.codec_context.thread_type = "AUTO"
        first = round(start_s * rate)
        last = None if seconds is None else first + round(seconds * rate)

        chunks: list[np.ndarray] = []
        pos = 0  # samples decoded so far (at the stream's rate)
        resampler: av.AudioResampler | None = None
        channels = 0
        try:
            for frame in container.decode(stream):
                if resampler is None:
                    # Same rate and layout: a conversion to packed float only (see the notes).
                    channels = len(frame.layout.channels)
                    resampler = av.AudioResampler(format="flt", layout=frame.layout, rate=rate)
                for out in resampler.resample(frame):
                    pos = _keep(chunks, _planar(out, channels), pos, first, last)
                if last is not None and pos >= last:
                    break
            else:
                if resampler is not None:
                    for out in resampler.resample(None):
                        pos = _keep(chunks, _planar(out, channels), pos, first, last)
        except (av.FFmpegError, ValueError) as e:
            reason = getattr(e, "strerror", None) or type(e).__name__
            raise _fail(p, f"audio stream could not be decoded ({reason}); {expected}") from None

    if pos == 0:
        raise _fail(p, "audio stream holds no samples (zero-length audio); expected audio content")
    if first >= pos:
        raise _fail(
            p, f"start_s={start_s:g} is beyond the end of the audio ({pos / rate:.3f} s long)"
        )
    if not chunks:
        raise _fail(
            p,
            f"the range from {start_s:g} s for {seconds:g} s holds no samples at {rate} Hz; "
            "expected a longer range",
        )
    samples = np.ascontiguousarray(np.concatenate(chunks, axis=1), dtype=np.float32)
    bad = int(samples.size - np.count_nonzero(np.isfinite(samples)))
    if bad:
        raise _fail(
            p,
            f"{bad} audio samples are not finite numbers (NaN or infinity); expected "
            "sample values (a damaged or wrongly exported float file)",
        )
    peak = float(np.abs(samples).max())
    if peak > MAX_PEAK:
        raise _fail(
            p,
            f"sample values reach {peak:.3g}, far beyond full scale (±1; at most {MAX_PEAK:g} "
            "is accepted); expected audio (a damaged or wrongly exported float file)",
        )
    if max_channels is not None and samples.shape[0] > max_channels:
        samples = downmix(samples, max_channels)
    return AudioClip(samples, rate, p)


def downmix(samples: np.ndarray, channels: int) -> np.ndarray:
    """(c, n) → (channels, n) for channels 1 or 2: mono is the mean of all channels; stereo
    keeps the first two (front left / right in every common layout) and spreads the rest
    equally into both (centre, LFE and surrounds), scaled so that a full-scale signal in every
    channel stays full scale."""
    if channels == 1:
        return samples.mean(axis=0, dtype=np.float64, keepdims=True).astype(np.float32)
    if channels != 2:
        raise ValueError(f"downmix to {channels} channels: expected 1 or 2")
    rest = samples[2:].sum(axis=0, dtype=np.float64) / 2.0
    scale = 1.0 / (1.0 + (samples.shape[0] - 2) / 2.0)
    out = np.stack([samples[0] + rest, samples[1] + rest]) * scale
    return np.ascontiguousarray(out, dtype=np.float32)


def _planar(frame: av.AudioFrame, channels: int) -> np.ndarray:
    """A packed float frame as (channels, k): av hands packed audio as (1, k * channels)."""
    flat = frame.to_ndarray().reshape(-1)
    return flat.reshape(-1, channels).T


def _keep(chunks: list[np.ndarray], arr: np.ndarray, pos: int, first: int, last: int | None) -> int:
    """Append the part of `arr` (channels, k) at samples [pos, pos+k) inside [first, last)."""
    k = arr.shape[1]
    lo = max(first - pos, 0)
    hi = k if last is None else min(k, last - pos)
    if hi > lo:
        chunks.append(arr[:, lo:hi])
    return pos + k
