"""What runs on a Ray worker: a whole job (the `kagura render` path, its sink and output rules
unchanged) or one segment of a long video (farm/segments.py). Plain functions; farm/schedule.py
makes them Ray tasks."""

from __future__ import annotations

import os
import socket
import time


def _where() -> dict:
    return {"host": socket.gethostname(), "pid": os.getpid()}


def run_job(req, key, board, attempt: int) -> dict:
    """Render `req` as `kagura render` does: the same checks (again, here: a cuda job's GPU is
    this worker's), the same graph, the same sink writing NAME.partial.EXT and renaming it."""
    from app import render_job
    from farm.progress import Ticker

    t_start = time.time()
    if board is not None:
        board.update.remote(
            key, {"state": "starting", "attempt": attempt, "device": req.device, **_where()}
        )
    render_job.check_output_safety(req)
    render_job.check_request(req)
    graph, ctx, total = render_job.build_graph(req)
    tick = Ticker(board, key, total, attempt)
    try:
        graph.run(ctx, on_frame=tick)
    except BaseException as exc:
        render_job.note_kept(exc, graph)  # the driver's failure line names the kept file
        raise
    tick.send(state="done")
    return {
        "frames": total,
        "t_start": t_start,
        "render_s": time.time() - t_start,
        "device": req.device,
        **_where(),
    }


def analyse_job(req, key, board, attempt: int):
    """The AvatarTrack of a split job, analysed once for all its segments, and what the driver
    needs of it (two Ray returns: the track stays in the object store for the segments)."""
    from farm.segments import analyse

    t_start = time.time()
    if board is not None:
        board.update.remote(
            key, {"state": "analysing", "attempt": attempt, "device": req.device, **_where()}
        )
    track = analyse(req)
    if board is not None:
        board.update.remote(key, {"state": "done"})
    return track, {"frames": len(track), "t_start": t_start, **_where()}


def run_segment(req, track, start: int, stop: int, key, board, attempt: int, crf: int) -> dict:
    """Frames [start, stop) of `req`'s video as H.264 packets (joined on the driver)."""
    from core.workers import usable_cores
    from farm.progress import Ticker
    from farm.segments import render_segment

    t_start = time.time()
    if board is not None:
        board.update.remote(
            key,
            {
                "state": "starting",
                "attempt": attempt,
                "total": stop - start,
                "device": req.device,
                **_where(),
            },
        )
    tick = Ticker(board, key, stop - start, attempt)
    lead = {"n": 0}

    def on_frame(frame) -> None:
        if frame.index >= start:
            tick(frame)
        else:
            lead["n"] += 1

    threads = int(os.environ.get("OMP_NUM_THREADS", "0") or 0) or usable_cores()
    packets = render_segment(req, track, start, stop, crf=crf, threads=threads, on_frame=on_frame)
    tick.send(state="done")
    return {
        "packets": packets,
        "frames": stop - start,
        "t_start": t_start,
        "render_s": time.time() - t_start,
        "device": req.device,
        **_where(),
    }
