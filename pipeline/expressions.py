"""Triggered expressions (happy, sad, surprised, wink) on the audio clock: blended in, held,
blended out over the avatar's parameters."""

from __future__ import annotations

import dataclasses
import threading
from typing import Any

from core.avatar import AvatarParams
from core.clock import NS_PER_S

EXPRESSIONS: tuple[str, ...] = ("happy", "sad", "surprised", "wink")
FADE_S = 0.15  # expression blend in / out


def _ramp(x: float) -> float:
    return 0.0 if x <= 0 else 1.0 if x >= 1 else x


class Expressions:
    """Triggered expressions on the audio clock: ~150 ms blend in, hold, ~150 ms blend out."""

    def __init__(self, fade_s: float = FADE_S) -> None:
        self.fade_ns = int(fade_s * NS_PER_S)
        self._on: dict[str, tuple[int, int | None]] = {}  # name -> (start, end or None=held)
        self._lock = threading.Lock()

    def weight(self, name: str, t: int) -> float:
        with self._lock:
            entry = self._on.get(name)
        return self._weight(entry, t)

    def _weight(self, entry: tuple[int, int | None] | None, t: int) -> float:
        if entry is None:
            return 0.0
        start, end = entry
        w = _ramp((t - start) / self.fade_ns)
        if end is not None:
            w *= _ramp(1.0 - (t - end) / self.fade_ns)
        return w

    def press(self, name: str, t: int, hold_ns: int | None) -> None:
        with self._lock:
            w = self._weight(self._on.get(name), t)
            start = t - int(w * self.fade_ns)  # retrigger continues from the current weight
            self._on[name] = (start, None if hold_ns is None else t + hold_ns)

    def release(self, name: str, t: int) -> None:
        with self._lock:
            entry = self._on.get(name)
            if entry is not None and entry[1] is None:
                self._on[name] = (entry[0], max(t, entry[0] + self.fade_ns))

    def apply(self, params: AvatarParams, t: int) -> AvatarParams:
        with self._lock:
            entries = dict(self._on)
            for name, (_, end) in list(self._on.items()):  # forget finished ones
                if end is not None and t - end > self.fade_ns:
                    del self._on[name]
        weights = {n: self._weight(e, t) for n, e in entries.items()}
        weights = {n: w for n, w in weights.items() if w > 0}
        if not weights:
            return params
        expr = dict(params.expressions)
        for name in ("happy", "sad", "surprised", "wink"):  # wink: for a layered avatar's layer
            if name in weights:
                expr[name] = max(expr.get(name, 0.0), weights[name])
        changes: dict[str, Any] = {"expressions": expr}
        wink = weights.get("wink", 0.0)
        if wink:
            changes["eye_open_r"] = params.eye_open_r * (1.0 - wink)
            changes["eye_smile"] = max(params.eye_smile, 0.6 * wink)
            changes["mouth_form"] = params.mouth_form + 0.4 * wink
        return dataclasses.replace(params, **changes).clamped()
