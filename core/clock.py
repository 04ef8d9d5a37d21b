"""The master clock: audio samples.

Every time stamp in Kagura is an integer number of nanoseconds on the audio-sample clock
(offline: samples of the decoded file; live: samples delivered by the input device).
Integer arithmetic keeps video frames and audio samples exactly aligned over hours.
"""

NS_PER_S = 1_000_000_000


def samples_to_ns(samples: int, sample_rate: int) -> int:
    """Time stamp of sample `samples` (floor to the nanosecond)."""
    return samples * NS_PER_S // sample_rate


def ns_to_samples(pts_ns: int, sample_rate: int) -> int:
    """Index of the sample nearest to `pts_ns`.

    Rounding (not flooring) makes samples -> ns -> samples and frame -> ns -> samples exact:
    time stamps are floored to whole nanoseconds, far below one sample period.
    """
    return (pts_ns * sample_rate + NS_PER_S // 2) // NS_PER_S


def frame_pts_ns(index: int, fps: int) -> int:
    """Presentation time of video frame `index` at a constant `fps`."""
    return index * NS_PER_S // fps


def frame_count(num_samples: int, sample_rate: int, fps: int) -> int:
    """Video frames needed to cover `num_samples` of audio (the last partial frame included)."""
    return -(-num_samples * fps // sample_rate)
