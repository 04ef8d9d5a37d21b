"""Display paths behind one interface (`Presenter`): Vulkan FIFO first, Qt as the fallback.

`create_presenter` tries Vulkan and, on any failure, falls back to the Qt widget, and says which
one runs (and why) in a string for the UI. The jitter buffer is pipeline/presenter.py, fed by
pipeline/display_feed.py; the window (app/ui/main_window.py) ticks it at each refresh.
"""

from __future__ import annotations

from app.present.base import Presenter, PresenterError
from app.present.choose import create_presenter

__all__ = ["Presenter", "PresenterError", "create_presenter"]
