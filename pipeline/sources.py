"""Sources: where frames enter the graph."""

from __future__ import annotations

from collections.abc import Iterator

from core.avatar import AvatarTrack
from core.frame import Frame
from core.stage import Spec, spec

TRACK_GIVES: Spec = spec("params")


def track_frames(track: AvatarTrack, first_index: int = 0) -> Iterator[Frame]:
    """One params-only frame per entry of an offline AvatarTrack, in order."""
    for i in range(len(track)):
        yield Frame(pts_ns=int(track.pts_ns[i]), index=first_index + i, params=track[i])
