"""pipeline/sinks/output.py on its own: same-file checks, the partial file's lock and who may
remove it, the interrupted names, atomic small files; and the decoder's downmix."""

from __future__ import annotations

import errno
import os
import stat

import numpy as np
import pytest

from audio.decode import decode_audio, downmix
from core.atomic_write import atomic_write_text
from pipeline.sinks.output import (
    OutputError,
    PartialFile,
    check_output,
    interrupted_path,
    same_file,
)
from tests.hostile import tone, write_wav_float


def test_same_file_by_path_symlink_and_inode(tmp_path):
    a = tmp_path / "a.wav"
    a.write_bytes(b"x")
    (tmp_path / "sub").mkdir()
    (tmp_path / "ln.wav").symlink_to(a)
    os.link(a, tmp_path / "hard.wav")
    (tmp_path / "other.wav").write_bytes(b"x")
    assert same_file(a, tmp_path / "sub" / ".." / "a.wav")
    assert same_file(a, tmp_path / "ln.wav") and same_file(a, tmp_path / "hard.wav")
    assert not same_file(a, tmp_path / "other.wav")  # equal bytes are not the same file
    assert not same_file(a, tmp_path / "missing.wav")


def test_check_output_rules(tmp_path):
    src = tmp_path / "song.wav"
    src.write_bytes(b"x")
    with pytest.raises(OutputError, match="input file"):
        check_output(tmp_path / "song.wav", [src], overwrite=True)
    # the partial sibling of the output must not be the input either
    with pytest.raises(OutputError, match="input file"):
        check_output(tmp_path / "song.mp4", [tmp_path / "song.partial.mp4"], overwrite=True)
    (tmp_path / "song.partial.mp4").write_bytes(b"")
    with pytest.raises(OutputError, match="input file"):
        check_output(tmp_path / "song.mp4", [tmp_path / "song.partial.mp4"])
    with pytest.raises(OutputError, match="already exists"):
        check_output(src, [])
    assert check_output(src, [], overwrite=True) == src
    os.mkfifo(tmp_path / "pipe.mp4")
    with pytest.raises(OutputError, match="not a regular file"):
        check_output(tmp_path / "pipe.mp4", [], overwrite=True)
    with pytest.raises(OutputError, match="is a directory"):
        check_output(tmp_path, [], overwrite=True)
    with pytest.raises(OutputError, match="not a folder"):
        check_output(src / "x.mp4", [])


def test_partial_lock_excludes_a_second_job_and_only_the_owner_removes(tmp_path):
    out = tmp_path / "o.mp4"
    first = PartialFile(out)
    first.acquire()
    first.path.write_bytes(b"frames")
    second = PartialFile(out)  # another open file description: flock conflicts with it
    with pytest.raises(OutputError, match="another Kagura job"):
        second.acquire()
    second.discard()  # not held: removes nothing
    assert first.path.read_bytes() == b"frames"
    assert first.keep() == tmp_path / "o.interrupted.mp4"
    assert (tmp_path / "o.interrupted.mp4").read_bytes() == b"frames"
    assert not first.path.exists() and not first.held
    # a later job gets a free name for its own interrupted frames, and an empty one is deleted
    assert interrupted_path(out) == tmp_path / "o.interrupted-2.mp4"
    third = PartialFile(out)
    third.acquire()
    assert third.keep() is None and not third.path.exists()


def test_a_stale_partial_is_kept_and_publish_replaces(tmp_path):
    out = tmp_path / "o.mp4"
    out.write_bytes(b"old")
    (tmp_path / "o.partial.mp4").write_bytes(b"killed job")
    notices = []
    claim = PartialFile(out, on_notice=notices.append)
    claim.acquire()
    assert (tmp_path / "o.interrupted.mp4").read_bytes() == b"killed job"
    assert notices and "o.interrupted.mp4" in notices[0]
    claim.path.write_bytes(b"new")
    assert claim.publish() == out and out.read_bytes() == b"new" and not claim.path.exists()


def test_atomic_write_names_the_target_and_keeps_mode(tmp_path):
    target = tmp_path / "secret"
    atomic_write_text(target, "pw", mode=0o600)
    assert target.read_text() == "pw" and stat.S_IMODE(target.stat().st_mode) == 0o600
    with pytest.raises(OSError) as info:
        atomic_write_text(tmp_path / "missing" / "x.json", "{}")
    assert info.value.errno == errno.ENOENT
    assert info.value.filename == str(tmp_path / "missing" / "x.json")
    assert [p.name for p in tmp_path.iterdir()] == ["secret"]  # no temp file left


def test_downmix_keeps_front_pair_and_full_scale(tmp_path):
    n = 4800
    x = np.zeros((n, 6), np.float32)
    x[:, 0] = 0.5  # front left only
    x[:, 2] = 0.4  # centre: into both sides
    write_wav_float(tmp_path / "51.wav", x, 48000)
    clip = decode_audio(tmp_path / "51.wav", max_channels=2)
    assert clip.samples.shape == (2, n)
    scale = 1 / (1 + 4 / 2)
    assert np.allclose(clip.samples[0], (0.5 + 0.2) * scale, atol=1e-6)
    assert np.allclose(clip.samples[1], 0.2 * scale, atol=1e-6)
    full = np.ones((6, 10), np.float32)
    assert np.allclose(downmix(full, 2), 1.0) and np.allclose(downmix(full, 1), 1.0)


def test_many_channels_decode_bit_exact(tmp_path):
    x = tone(0.2, 48000, 10) * np.linspace(0.1, 1.0, 10, dtype=np.float32)  # distinct channels
    write_wav_float(tmp_path / "ten.wav", x, 48000)
    clip = decode_audio(tmp_path / "ten.wav")
    assert clip.samples.shape == (10, x.shape[0])
    assert np.array_equal(clip.samples, x.T)
