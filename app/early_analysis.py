"""The offline audio analysis in a process of its own, started before the renderer's setup.

    analysis = AnalysisProcess(model)     # the child starts importing the analysis, loads the net
    ...                                   # this process: torch, models, stages, decoding
    track = analysis.analyze(clip, fps, seed=seed, lipsync_model=model)
                                          # = audio.analysis.analyze_clip(...)

Why a process: importing torch is seconds of single-threaded Python on a small CPU, and the
analysis (numpy: decoding aside it needs neither librosa nor scipy) is another second for a
long song; a thread would hold the same GIL. In a process of its own the analysis gets ready
and runs on another core while this one imports torch and sets up the render.
The child is a fresh interpreter (`python -m app.early_analysis`, not a fork: it inherits no
torch, CUDA or BLAS thread state, and no main module is imported again); the clip goes in and
the AvatarTrack comes out as pickles over its stdin/stdout. Its BLAS runs on a quarter of the
cores (`pipeline.cpu_threads.analysis_blas_env`: the analysis's threads call it at once). Errors
raised by the analysis are raised again here; a child that dies is a RuntimeError.
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys

from pipeline.cpu_threads import analysis_blas_env


def worth_a_process() -> bool:
    """Only a fresh process gains: one that has imported torch (a test session, a bench) has
    little left to overlap."""
    return "torch" not in sys.modules


class AnalysisProcess:
    def __init__(self, lipsync_model: str = "default") -> None:
        """`lipsync_model`: the net the child loads while it waits (`analyze` may still ask
        for another)."""
        # the child imports what this process can: the same sys.path
        path = os.pathsep.join(p for p in sys.path if p)
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "app.early_analysis", lipsync_model],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env={**os.environ, "PYTHONPATH": path, **analysis_blas_env()},
        )
        self._answered = False

    def analyze(self, clip, fps: int, seed: int = 0, lipsync_model: str = "default"):
        """The clip's AvatarTrack as `analyze_clip(clip, fps, seed=seed, lipsync_model=...)`
        gives it (to a float's last bits: the child's BLAS runs on fewer threads,
        `analysis_blas_env`)."""
        try:
            job = (clip, fps, seed, lipsync_model)
            pickle.dump(job, self._proc.stdin, protocol=pickle.HIGHEST_PROTOCOL)
            self._proc.stdin.close()
            ok, value = pickle.load(self._proc.stdout)
            self._answered = True
        except (EOFError, OSError, pickle.UnpicklingError):
            code = self._proc.wait()
            raise RuntimeError(f"the audio analysis process ended (exit status {code})") from None
        finally:
            self.close()
        if not ok:
            raise value
        return value

    def close(self) -> None:
        """Ends the child: at once unless it has answered (the render stopped before or during
        its analysis: bad input, Ctrl-C)."""
        if not self._answered and self._proc.poll() is None:
            self._proc.kill()
        for pipe in (self._proc.stdin, self._proc.stdout):
            if pipe is not None and not pipe.closed:
                pipe.close()
        try:
            self._proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()


def _serve(lipsync_model: str) -> int:
    import signal

    # Ctrl-C is the parent's to handle (it removes the partial output); a child dying of it
    # would only print a second traceback
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    result = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # anything the analysis prints goes to stderr, not into the pickle
    from audio.analysis import analyze_clip, default_lipsync
    from core.trace import step  # the parent's trace file (KAGURA_TRACE is inherited)

    default_lipsync(lipsync_model)  # imports the engine, loads its net while the parent sets up
    step("analysis process ready")
    try:
        clip, fps, seed, lipsync_model = pickle.load(sys.stdin.buffer)
    except EOFError:  # the parent gave up (bad input, interrupted) before sending
        return 0
    step("analysis process has the clip")
    try:
        answer = (True, analyze_clip(clip, fps, seed=seed, lipsync_model=lipsync_model))
    except Exception as exc:  # raised again in the parent, where the CLI reports it
        answer = (False, exc)
    step("analysis process done")
    pickle.dump(answer, result, protocol=pickle.HIGHEST_PROTOCOL)
    result.close()
    # the answer is out: end now, without the interpreter's teardown (its modules, numba's
    # state), which since the render's stages no longer wait for the analysis would share the
    # cores with its first frames
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    sys.exit(_serve(sys.argv[1] if len(sys.argv) > 1 else "default"))
