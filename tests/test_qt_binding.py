"""The Qt binding must not corrupt the interpreter: PySide6 6.12.0 dropped a reference to True on
every Python-side Signal.emit, and Python 3.11 aborted after a few thousand emits — minutes into
a live show. pyproject pins a version without the bug; this keeps it that way."""

from __future__ import annotations

import subprocess
import sys

SCRIPT = """
import sys
from PySide6.QtCore import QObject, Signal
class Emitter(QObject):
    tick = Signal(int)
e = Emitter()
e.tick.connect(lambda value: None)
before = sys.getrefcount(True)
for i in range(20000):
    e.tick.emit(i)
print(sys.getrefcount(True) - before)
"""


def test_many_emits_leave_the_bool_singletons_alone():
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        capture_output=True,
        text=True,
        env={"QT_QPA_PLATFORM": "offscreen", "PATH": "/usr/bin:/bin"},
        check=False,
    )
    assert done.returncode == 0, done.stderr[-500:]
    assert abs(int(done.stdout.strip())) < 100
