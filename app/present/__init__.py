"""Display paths behind one interface (`Presenter`): Vulkan FIFO first, Qt as the fallback.

`create_presenter` tries Vulkan and, on any failure, falls back to the Qt widget, and says which
one runs (and why) in a string for the UI. The jitter buffer is pipeline/presenter.py; the glue
that ticks it at each refresh is `PresentLoop`.
"""

from __future__ import annotations

from app.present.base import Presenter, PresenterError
from app.present.loop import PresentLoop, create_presenter

__all__ = ["PresentLoop", "Presenter", "PresenterError", "create_presenter"]
