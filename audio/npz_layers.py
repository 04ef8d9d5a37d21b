"""Numbered dense layers in a net file: ``{prefix}_w0, {prefix}_b0, {prefix}_w1, ...``, float16
on disk, float32 in use. The vowel net's MLPs, the mel-convolution net's head and the voice
mask share the names, so one writer and one reader serve them."""

from __future__ import annotations

import numpy as np

__all__ = ["dense_arrays", "read_dense"]


def dense_arrays(prefix: str, layers: list[tuple[np.ndarray, np.ndarray]]) -> dict:
    out = {}
    for i, (w, b) in enumerate(layers):
        out[f"{prefix}_w{i}"] = w.astype(np.float16)
        out[f"{prefix}_b{i}"] = b.astype(np.float16)
    return out


def read_dense(z, prefix: str, path) -> list[tuple[np.ndarray, np.ndarray]]:
    """The layers under `prefix` in the open npz `z` (the file `path`), in order (none: an
    empty list); a weight without its bias is a ValueError naming the file and the key."""
    layers = []
    while f"{prefix}_w{len(layers)}" in z:
        i = len(layers)
        if f"{prefix}_b{i}" not in z:
            raise ValueError(f"{path}: {prefix}_b{i}: missing (the bias of {prefix}_w{i})")
        layers.append(
            (z[f"{prefix}_w{i}"].astype(np.float32), z[f"{prefix}_b{i}"].astype(np.float32))
        )
    return layers
