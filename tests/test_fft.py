"""audio.fft: the analysis's batched FFTs give numpy's numbers, on several cores or one."""

import numpy as np
import pytest

from audio import fft


@pytest.mark.parametrize("rows", [4, 4000])  # under and over the size that starts the workers
def test_float64_rows_are_numpys_exactly(rows):
    x = np.random.default_rng(1).standard_normal((rows, 400))
    spec = fft.rfft(x, 512, axis=1)
    assert np.array_equal(spec, np.fft.rfft(x, 512, axis=1))
    assert np.array_equal(fft.irfft(spec, 512, axis=1), np.fft.irfft(spec, 512, axis=1))


def test_float32_rows_keep_their_precision():
    x = np.random.default_rng(2).standard_normal((4000, 400)).astype(np.float32)
    spec = fft.rfft(x, axis=1)
    ref = np.fft.rfft(x.astype(np.float64), axis=1)
    assert spec.dtype == np.complex64
    assert np.abs(spec - ref).max() <= 1e-5 * np.abs(ref).max()
    back = fft.irfft(spec, 400, axis=1)
    assert back.dtype == np.float32
    np.testing.assert_allclose(back, x, atol=1e-5)
