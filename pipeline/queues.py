"""Bounded queues between threads, each with a stated policy.

offline: BLOCK  - a full queue makes the producer wait (nothing is lost, memory is bounded).
live:    LATEST - a full queue drops its oldest item (a late video frame is worthless), and
                  counts the drop so lateness can be reported upstream.
"""

from __future__ import annotations

import collections
import enum
import threading
from typing import Generic, TypeVar

T = TypeVar("T")


class Policy(enum.Enum):
    BLOCK = "block"
    LATEST = "latest"


class Closed(Exception):
    """Raised by `get` once the queue is closed and empty, and by `put` after `close`."""


class BoundedQueue(Generic[T]):
    def __init__(self, capacity: int, policy: Policy = Policy.BLOCK):
        if capacity < 1:
            raise ValueError("queue capacity must be at least 1")
        self.capacity = capacity
        self.policy = policy
        self.dropped = 0
        self._items: collections.deque[T] = collections.deque()
        self._closed = False
        self._cond = threading.Condition()

    def put(self, item: T) -> None:
        with self._cond:
            if self.policy is Policy.BLOCK:
                while len(self._items) >= self.capacity and not self._closed:
                    self._cond.wait()
            elif len(self._items) >= self.capacity:
                self._items.popleft()
                self.dropped += 1
            if self._closed:
                raise Closed
            self._items.append(item)
            self._cond.notify_all()

    def get(self) -> T:
        with self._cond:
            while not self._items:
                if self._closed:
                    raise Closed
                self._cond.wait()
            item = self._items.popleft()
            self._cond.notify_all()
            return item

    def get_batch(self, max_items: int) -> list[T]:
        """At least one item (blocking), then whatever else is already waiting, up to max_items."""
        batch = [self.get()]
        with self._cond:
            while self._items and len(batch) < max_items:
                batch.append(self._items.popleft())
            self._cond.notify_all()
        return batch

    def close(self) -> None:
        """No more puts; getters drain what is left, then see `Closed`."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    @property
    def closed(self) -> bool:
        return self._closed

    def __len__(self) -> int:
        with self._cond:
            return len(self._items)
