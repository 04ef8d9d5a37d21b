"""`core.atomic_write.replacing`: the file is replaced whole or left as it was."""

from __future__ import annotations

import errno
import stat

import numpy as np
import pytest

from core.atomic_write import replacing


def test_the_block_s_file_replaces_the_old_one_with_the_asked_permissions(tmp_path):
    target = tmp_path / "net.npz"
    target.write_bytes(b"old")
    with replacing(target, mode=0o600) as tmp:
        assert tmp.parent == tmp_path and tmp.suffix == ".npz" and tmp != target
        np.savez_compressed(tmp, x=np.arange(3))  # numpy adds no second suffix
        assert target.read_bytes() == b"old"  # not replaced before the block ends
    with np.load(target) as z:
        np.testing.assert_array_equal(z["x"], np.arange(3))
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == ["net.npz"]


def test_a_block_that_raises_leaves_the_old_file_and_no_temporary_one(tmp_path):
    target = tmp_path / "cache.npy"
    target.write_bytes(b"old")
    with pytest.raises(KeyboardInterrupt), replacing(target) as tmp:
        np.save(tmp, np.zeros(4))
        raise KeyboardInterrupt
    assert target.read_bytes() == b"old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cache.npy"]


def test_an_os_error_names_the_file_asked_for_not_the_temporary_one(tmp_path):
    target = tmp_path / "missing" / "profile.json"
    with pytest.raises(OSError) as e, replacing(target):
        pass
    assert e.value.filename == str(target) and e.value.errno == errno.ENOENT
    full = tmp_path / "full.json"
    with pytest.raises(OSError) as e, replacing(full):
        raise OSError(errno.ENOSPC, "No space left on device")
    assert e.value.filename == str(full) and e.value.errno == errno.ENOSPC
    assert list(tmp_path.iterdir()) == []


def test_two_writers_of_one_entry_each_get_their_own_temporary_file(tmp_path):
    target = tmp_path / "entry.npy"
    with replacing(target) as a, replacing(target) as b:
        assert a != b
        np.save(a, np.ones(2))
        np.save(b, np.full(2, 2.0))
    np.testing.assert_array_equal(np.load(target), np.ones(2))  # the last to finish wins
    assert sorted(p.name for p in tmp_path.iterdir()) == ["entry.npy"]
