"""The live session's look switching: the next preset's stages built off the frame thread.

    looks = LookSwitcher(build, "studio", False, timings, on_error, thread_name="kagura-live-look")
    looks.current                      # the Look every frame reads once, at its start
    looks.set_preset("cyberpunk")      # any thread; returns at once
    looks.wait(30)                     # until no build is pending

A helper thread (`thread_name`) builds the requested look (pipeline/look.py: its render and
stylize stages set up and warmed) while the current one keeps rendering, then swaps it in
with one attribute store: the frame thread never waits for a build and never shows a
half-built look. When several requests arrive during one build, the latest wins.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from core.stats import Timings
from pipeline.look import Look

log = logging.getLogger(__name__)


class LookSwitcher:
    """`build(preset, transparent) -> Look` makes a look (called on the helper thread, and
    once here for the first one); `on_error(message)` hears of a look that could not be
    built (the current one stays)."""

    def __init__(
        self,
        build: Callable[[Any, bool], Look],
        first: Any,
        transparent: bool,
        timings: Timings,
        on_error: Callable[[str], None],
        *,
        thread_name: str,
    ) -> None:
        self._build = build
        self._timings = timings
        self._on_error = on_error
        self._thread_name = thread_name
        self.current: Look = build(first, transparent)
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._pending: tuple[Any, bool] | None = None
        self.switches = 0
        self.errors: list[str] = []

    def set_preset(self, preset: Any, transparent: bool | None = None) -> None:
        """Build `preset` (a name or Preset) off-thread and swap it in between two frames."""
        want_t = self.current.transparent if transparent is None else bool(transparent)
        with self._lock:
            self._pending = (preset, want_t)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(
                    target=self._build_loop, name=self._thread_name, daemon=True
                )
                self._thread.start()

    def set_transparent(self, on: bool) -> None:
        """The same preset (or the one pending) with or without its background."""
        pending = self._pending
        self.set_preset(pending[0] if pending else self.current.preset, transparent=on)

    def wait(self, timeout: float = 30.0) -> bool:
        """Block until no look build is pending. True if idle."""
        t = self._thread
        if t is not None:
            t.join(timeout)
            return not t.is_alive()
        return True

    def _build_loop(self) -> None:
        while True:
            with self._lock:
                req, self._pending = self._pending, None
                if req is None:
                    return
            preset, transparent = req
            cur = self.current
            same = preset is cur.preset or (isinstance(preset, str) and preset == cur.name)
            if same and cur.transparent == transparent:
                continue
            try:
                look = self._build(preset, transparent)
            except Exception as exc:
                msg = f"cannot switch to preset {preset!r}: {exc}"
                self.errors.append(msg)
                log.warning("live: %s", msg)
                self._on_error(msg)
                continue
            self.current = look  # the atomic swap
            self.switches += 1
            self._timings.add("look_build", look.build_ms)
            log.info("live: preset %s ready in %.0f ms", look.name, look.build_ms)
            # the frame thread may still be inside old.render/old.stylize; they need no close
