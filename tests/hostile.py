"""Helpers of the hostile-input suite: a corpus of bad files built in the test, and the real
command line run for many cases in one child process.

`run_cli_batch` starts ONE `python` child that calls `app.cli.main(argv)` — the entry point of
`python -m app.cli` — for each case in turn, with that case's stderr captured, and reports exit
status and stderr per case as JSON. The imports (torch, av, librosa) are paid once instead of
once per case; a crash of the native code (a segfault) still fails the whole batch, never the
test process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import wave
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]

_BATCH = r"""
import contextlib, io, json, sys, time, warnings
warnings.simplefilter("ignore")  # library warnings are not Kagura's one line
from app.cli import main
results = []
for argv in json.loads(sys.argv[1]):
    err = io.StringIO()
    t0 = time.perf_counter()
    with contextlib.redirect_stderr(err):
        try:
            rc = main(argv)
        except SystemExit as exc:
            rc = exc.code if isinstance(exc.code, int) else 2
    seconds = round(time.perf_counter() - t0, 2)
    results.append({"argv": argv, "rc": rc, "stderr": err.getvalue(), "seconds": seconds})
print("@@RESULTS@@" + json.dumps(results))
"""


def cli_env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    env.setdefault("QT_QPA_PLATFORM", "offscreen")
    env.update(extra)
    return env


def run_cli_batch(cases: list[list[str]], cwd: Path, timeout: float = 300, **popen) -> list[dict]:
    """[{argv, rc, stderr}] for each argv, run in order by one child process in `cwd`."""
    proc = subprocess.run(
        [sys.executable, "-c", _BATCH, json.dumps(cases)],
        cwd=cwd,
        env=popen.pop("env", None) or cli_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
        **popen,
    )
    assert proc.returncode == 0, f"the batch died (rc {proc.returncode}): {proc.stderr[-2000:]}"
    marker = proc.stdout.rindex("@@RESULTS@@")
    return json.loads(proc.stdout[marker + len("@@RESULTS@@") :])


def error_line(result: dict) -> str:
    """The one `kagura: error:` line of a failed case, checked to be the only error output."""
    text = result["stderr"]
    assert "Traceback" not in text, text
    errors = [ln for ln in text.splitlines() if ln.startswith("kagura")]
    assert len(errors) == 1, text
    return errors[0]


# ---------------------------------------------------------------------------- the corpus


def write_wav_float(path: Path, samples: np.ndarray, rate: int) -> Path:
    """(n, channels) float32 → a WAVE_FORMAT_IEEE_FLOAT file, written by hand so that any rate,
    channel count or sample value (NaN, inf) can go in."""
    samples = np.asarray(samples, np.float32)
    if samples.ndim == 1:
        samples = samples[:, None]
    ch = samples.shape[1]
    data = samples.astype("<f4").tobytes()
    fmt = (3).to_bytes(2, "little") + ch.to_bytes(2, "little") + rate.to_bytes(4, "little")
    fmt += (rate * ch * 4).to_bytes(4, "little") + (ch * 4).to_bytes(2, "little")
    fmt += (32).to_bytes(2, "little")
    body = b"WAVE" + b"fmt " + len(fmt).to_bytes(4, "little") + fmt
    body += b"data" + len(data).to_bytes(4, "little") + data
    path.write_bytes(b"RIFF" + len(body).to_bytes(4, "little") + body)
    return path


def tone(seconds: float, rate: int, channels: int = 1, hz: float = 220.0) -> np.ndarray:
    t = np.arange(round(seconds * rate)) / rate
    wave_ = 0.3 * np.sin(2 * np.pi * hz * t) * (1 + 0.5 * np.sin(2 * np.pi * 3 * t))
    return np.repeat(wave_[:, None], channels, axis=1).astype(np.float32)


def write_wav_s16(path: Path, seconds: float, rate: int = 16000) -> Path:
    pcm = (tone(seconds, rate)[:, 0] * 32767).astype("<i2")
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(pcm.tobytes())
    return path


def header_only_wav(path: Path) -> Path:
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(16000)
    return path
