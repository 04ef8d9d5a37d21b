"""The stage protocol and the contract a graph checks when it is built.

A stage declares what it needs from incoming frames and what it adds (`needs` / `gives`);
`check_chain` walks a chain and refuses one whose stages do not fit, so a mismatch is found
before frame 1, not at it. Both runtimes call it: the offline `Graph.build()`
(pipeline/graph.py) and the live session's builders (pipeline/live_chain.py `check_live`).

Life cycle: `setup(ctx)` (everything slow: load weights, build engines, warm up), then
`process_batch(frames)` for each batch, then `close()`. Stages that gain nothing from batching
only implement `process(frame)`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from core.frame import Frame


@dataclass(frozen=True)
class Spec:
    """What a frame carries at some point of the chain.

    `fields`: frame attributes that are set ("params", "image", "motion").
    `size`: (width, height) of image/motion, or None where any size is accepted.
    `device`: "cpu", "cuda" or None (any).
    """

    fields: frozenset[str] = frozenset()
    size: tuple[int, int] | None = None
    device: str | None = None

    def merged(self, gives: Spec) -> Spec:
        return Spec(
            fields=self.fields | gives.fields,
            size=gives.size if gives.size is not None else self.size,
            device=gives.device if gives.device is not None else self.device,
        )


def spec(*names: str, size: tuple[int, int] | None = None, device: str | None = None) -> Spec:
    return Spec(frozenset(names), size, device)


@dataclass
class Context:
    """What every stage may read at setup: output geometry and run mode."""

    width: int
    height: int
    fps: int
    sample_rate: int
    mode: str = "offline"  # "offline" | "live"
    extras: dict = field(default_factory=dict)


@runtime_checkable
class Stage(Protocol):
    name: str
    needs: Spec
    gives: Spec
    max_batch: int  # 1 = no batching

    def setup(self, ctx: Context) -> None: ...

    def process_batch(self, frames: list[Frame]) -> list[Frame]: ...

    def close(self) -> None: ...


class BaseStage:
    """Convenience base: one-frame `process`, no-op setup/close, batching by looping."""

    name = "stage"
    needs: Spec = spec()
    gives: Spec = spec()
    max_batch = 1

    def setup(self, ctx: Context) -> None:
        pass

    def process(self, frame: Frame) -> Frame:
        raise NotImplementedError

    def process_batch(self, frames: list[Frame]) -> list[Frame]:
        return [self.process(f) for f in frames]

    def close(self) -> None:
        pass


class Sink(Protocol):
    """End of the chain: consumes frames, produces a file or a display.

    A sink may also have `launch(ctx)`: `Graph.run` calls it before any stage's `setup`, to
    launch slow work that needs nothing from the stages (encoder processes starting up), so
    it runs while the stages set up; `setup` then waits for it."""

    name: str
    needs: Spec

    def setup(self, ctx: Context) -> None: ...

    def write(self, frame: Frame) -> None: ...

    def finish(self) -> None:
        """Normal end: flush and make the output final."""

    def abort(self) -> None:
        """Error or cancel: remove partial output, release resources."""


class GraphError(ValueError):
    """The chain does not fit together (reported when the graph or the live look is built)."""


def check_chain(carried: Spec, parts: Iterable) -> Spec:
    """Walk `parts` (stages, then perhaps a sink) from what the source gives (`carried`): each
    one's `needs` must be met by what reaches it, then its `gives` (a sink has none) is merged
    in. Returns what leaves the last part; a part that does not fit raises GraphError."""
    for part in parts:
        needs = part.needs
        missing = needs.fields - carried.fields
        if missing:
            raise GraphError(
                f"stage '{part.name}' needs {sorted(missing)}, but frames reaching it carry only {sorted(carried.fields)}"
            )
        if needs.size is not None and carried.size is not None and needs.size != carried.size:
            raise GraphError(
                f"stage '{part.name}' needs {needs.size[0]}x{needs.size[1]} images, gets {carried.size[0]}x{carried.size[1]}"
            )
        if (
            needs.device is not None
            and carried.device is not None
            and needs.device != carried.device
        ):
            raise GraphError(
                f"stage '{part.name}' needs frames on {needs.device}, gets them on {carried.device}"
            )
        gives = getattr(part, "gives", None)
        if gives is not None:
            carried = carried.merged(gives)
    return carried
