"""`SegmentedVideoSink`: an MP4 (H.264 + AAC) encoded by N libx264 processes at once, joined
losslessly.

Why: one libx264 encoder tops out near 144 fps for 1080p at `ultrafast` even with 16 cores
(its frame threads stop scaling), below what the GPU chain delivers offline. N encoders on
independent segments of the video scale with the cores; the segments are then joined by packet
copy, without re-encoding.

How the video is cut. Frames arrive in order, as fast as the graph makes them. Cutting the
video into N contiguous pieces (frames 0..n/N to encoder 0, …) would leave encoder k idle until
the graph reaches piece k — in effect one encoder at a time — unless every frame in between
were held in memory. Instead the frames are dealt in **chunks of G frames, round-robin**:
chunk c (frames cG … cG+G-1) goes to encoder c mod N. While the graph fills chunk c, the other
N-1 encoders work through the chunks they were dealt before, so all N stay busy once N chunks
have gone out, and the frames held at any time are bounded by about N·G. Each encoder keeps a
backlog of up to G frames (in yuv420p, already converted) so that the graph never waits while
its chunk is delivered to one encoder faster than that encoder can encode it. G defaults to
one second of video: a keyframe per second costs a little bitrate (the file-size column of
`kagura bench offline` shows how much), longer chunks cost memory (N·G frames) and a longer
tail at the end of the render (the last chunk is encoded by one encoder alone).

Each encoder runs one continuous libx264 stream over its chunks, with every chunk starting on a
forced IDR frame (x264 `forced-idr`, closed GOPs — x264's default), so no frame refers to a
frame of another chunk and each chunk decodes on its own. All encoders use identical settings
(preset, CRF, size, colour tags, threads), so their SPS/PPS are identical; they are carried in
band in every IDR (no global header), checked to be equal across chunks, and the MP4 muxer
takes its `avcC` from the first one. The joiner (a thread of the main process) copies each
chunk's packets into the file in chunk order, with their time stamps shifted from the encoder's
own frame count to the frame's place in the video, and checks that decode times only grow.

Frames reach the workers through shared memory (`core.workers.SharedArena`): each
encoder has a ring of `slots` RGBA-sized slots; `write()` copies the frame into the next free
slot (one memcpy, GIL released) and sends the slot number over a pipe. The worker converts RGBA
→ yuv420p (BT.709, limited range, like `VideoFileSink`) straight from the slot — or, for a
frame whose I420 planes the GPU already made (`Frame.i420`), just copies them out — frees the
slot, and queues the frame for its encoder thread.

The guarantees of `VideoFileSink` hold: audio (AAC) is muxed once, sample-exactly, interleaved
with the video as chunks are joined; the file is written to `NAME.partial.mp4` as a fragmented
MP4 (a killed render leaves a file that plays up to its last joined fragment) and renamed onto
`NAME.mp4` only by `finish()`, under the partial file's exclusive lock
(`pipeline.sinks.output`); `abort()` (and any failure, including a worker that dies) stops the
workers and keeps the chunks joined so far as `NAME.interrupted.mp4` (none: the partial is
deleted). A failure is raised as a `WorkerProcessError` with a
one-line message.
"""

from __future__ import annotations

import contextlib
import os
import queue
import threading
import time
import traceback
from dataclasses import dataclass, field
from fractions import Fraction
from multiprocessing.connection import Connection
from pathlib import Path

import av
import numpy as np

from core.frame import Frame
from core.stage import Context, spec
from core.workers import (
    SharedArena,
    WorkerProcessError,
    exit_text,
    ignore_sigint,
    one_line,
    page_round,
    ready_workers,
    spawn_context,
    start_worker,
    stop_processes,
    usable_cores,
    wait_started,
)
from pipeline.sinks.video_file import (
    EncodedFileSink,
    add_audio_stream,
    check_audio,
    check_output_path,
    check_size_and_fps,
    open_fragmented_mp4,
    partial_path,
)

_AVCOL_BT709 = 1
_AVCOL_RANGE_MPEG = 1
MAX_ENCODERS = 64


class EncoderWorkerError(WorkerProcessError):
    """An encoder process failed or died."""


def auto_encoders(width: int, height: int, cores: int | None = None) -> int:
    """How many encoder processes `--encoders auto` uses.

    Fewer than 8 cores: 1 (the plain `VideoFileSink`, whose x264 threads use the cores as well
    as several encoders would, and which needs less memory). Otherwise a quarter of the cores
    for 1080p, scaled by the frame area (an x264 frame costs about its pixel count), at least
    1 and at most 8: 16 cores → 4 at 1080p, 2 at 720p, 1 at 640x360.
    """
    cores = usable_cores() if cores is None else cores
    if cores < 8:
        return 1
    share = min(1.0, (width * height) / (1920 * 1080))
    return max(1, min(8, round(cores / 4 * share)))


def encoder_threads(encoders: int, cores: int | None = None) -> int:
    """x264 threads per encoder: the cores shared out (frame threads; ≥ 1)."""
    cores = usable_cores() if cores is None else cores
    return max(1, cores // max(1, encoders))


@dataclass
class _Config:
    index: int
    width: int
    height: int
    fps_num: int
    fps_den: int
    x264_preset: str
    crf: int
    threads: int
    gop: int
    slots: int
    backlog: int
    slot_bytes: int
    offset: int  # this worker's first slot in the arena


# ---------------------------------------------------------------------------- worker process


@dataclass
class _Chunk:
    global_start: int
    local_start: int
    frames: int = 0
    packets: list = field(default_factory=list)
    closed: bool = False


def _encoder_main(cfg: _Config, mapping, free_slots, frames_in: Connection, out: Connection):
    """Entry point of an encoder process (spawned)."""
    ignore_sigint()
    try:
        _encode_loop(cfg, mapping, free_slots, frames_in, out)
    except BaseException as exc:  # report, then die; the main process cleans up
        with contextlib.suppress(Exception):
            where = traceback.extract_tb(exc.__traceback__)[-1:]
            at = f" (at {where[0].name}:{where[0].lineno})" if where else ""
            out.send(("error", cfg.index, one_line(exc) + at))
        os._exit(1)
    os._exit(0)


def open_chunk_encoder(
    width: int, height: int, fps: Fraction, x264_preset: str, crf: int, threads: int, gop: int
):
    """An H.264 encoder with exactly the settings the chunk workers use, so what it encodes
    joins with their chunks (the farm's time segments are encoded by it)."""
    cfg = _Config(
        index=0, width=width, height=height, fps_num=fps.numerator, fps_den=fps.denominator,
        x264_preset=x264_preset, crf=crf, threads=threads, gop=gop,
        slots=1, backlog=1, slot_bytes=0, offset=0,
    )  # fmt: skip
    return _open_encoder(cfg)


def _open_encoder(cfg: _Config):
    cc = av.CodecContext.create("libx264", "w")
    cc.width, cc.height = cfg.width, cfg.height
    cc.pix_fmt = "yuv420p"
    rate = Fraction(cfg.fps_num, cfg.fps_den)
    cc.time_base = 1 / rate
    cc.framerate = rate
    cc.gop_size = cfg.gop
    cc.thread_count = cfg.threads
    cc.colorspace = cc.color_primaries = cc.color_trc = _AVCOL_BT709
    cc.color_range = _AVCOL_RANGE_MPEG
    cc.options = {"preset": cfg.x264_preset, "crf": str(cfg.crf), "forced-idr": "1"}
    cc.open()
    return cc


def _encode_loop(cfg: _Config, mapping, free_slots, frames_in: Connection, out: Connection):
    from av.video.frame import PictureType, VideoFrame
    from av.video.reformatter import ColorRange, Colorspace

    shape = (cfg.height, cfg.width, 4)
    slots = [
        mapping.array(cfg.offset + s * cfg.slot_bytes, shape, np.uint8) for s in range(cfg.slots)
    ]
    rows = cfg.height * 3 // 2

    def i420_view(slot: np.ndarray) -> np.ndarray:
        return slot.reshape(-1)[: rows * cfg.width].reshape(rows, cfg.width)

    cc = _open_encoder(cfg)
    out.send(("ready", cfg.index))
    cpu0 = time.process_time()  # this process, all threads (x264's too), from here on

    backlog: queue.Queue = queue.Queue(maxsize=max(1, cfg.backlog))
    times = {"convert_s": 0.0, "encode_s": 0.0, "idle_s": 0.0}
    end, lost = object(), object()

    def receive() -> None:
        try:
            while True:
                msg = frames_in.recv()
                if msg[0] == "end":
                    backlog.put(end)
                    return
                _, slot, chunk, global_index, kind = msg
                t0 = time.perf_counter()
                if kind == "i420":  # converted on the GPU: copy the planes out of the slot
                    vf = VideoFrame.from_ndarray(i420_view(slots[slot]), format="yuv420p")
                else:
                    src = VideoFrame.from_numpy_buffer(slots[slot], format="rgba")
                    vf = src.reformat(
                        format="yuv420p",
                        dst_colorspace=Colorspace.ITU709,
                        dst_color_range=ColorRange.MPEG,
                        threads=1,
                    )
                    del src
                times["convert_s"] += time.perf_counter() - t0
                free_slots.release()
                backlog.put((vf, chunk, global_index))
        except EOFError:  # the main process went away without saying "end"
            backlog.put(lost)
        except BaseException as exc:
            backlog.put(exc)

    receiver = threading.Thread(target=receive, name=f"encoder-{cfg.index}-in", daemon=True)
    receiver.start()

    chunks: dict[int, _Chunk] = {}
    chunk_of_pts: dict[int, int] = {}
    current: int | None = None
    local = 0

    def route(packets) -> None:
        for p in packets:
            cid = chunk_of_pts.pop(p.pts)
            ch = chunks[cid]
            shift = ch.global_start - ch.local_start
            if not ch.packets and not p.is_keyframe:
                raise RuntimeError(f"chunk {cid} does not start with a keyframe")
            ch.packets.append((p.pts + shift, p.dts + shift, bool(p.is_keyframe), bytes(p)))
            maybe_send(cid)

    def maybe_send(cid: int) -> None:
        ch = chunks[cid]
        if ch.closed and len(ch.packets) == ch.frames:
            out.send(("chunk", cid, ch.packets))
            del chunks[cid]

    while True:
        t0 = time.perf_counter()
        item = backlog.get()
        times["idle_s"] += time.perf_counter() - t0
        if item is lost:
            os._exit(1)
        if isinstance(item, BaseException):
            raise item
        if item is end:
            break
        vf, cid, global_index = item
        if cid != current:
            if current is not None:
                chunks[current].closed = True
                maybe_send(current)
            chunks[cid] = _Chunk(global_start=global_index, local_start=local)
            current = cid
            vf.pict_type = PictureType.I  # forced IDR: the chunk starts a closed GOP
        vf.pts = local
        vf.time_base = cc.time_base
        chunk_of_pts[local] = cid
        chunks[cid].frames += 1
        local += 1
        t0 = time.perf_counter()
        packets = cc.encode(vf)
        times["encode_s"] += time.perf_counter() - t0
        route(packets)

    if current is not None:
        chunks[current].closed = True
        maybe_send(current)
    t0 = time.perf_counter()
    route(cc.encode(None))
    times["encode_s"] += time.perf_counter() - t0
    if chunks:
        raise RuntimeError(f"chunks {sorted(chunks)} incomplete after the encoder was flushed")
    times["cpu_s"] = time.process_time() - cpu0
    out.send(("done", cfg.index, {**times, "frames": local}))


# ---------------------------------------------------------------------------- main process


def _parameter_sets(data: bytes) -> bytes:
    """SPS + PPS NAL units at the head of an Annex-B access unit (up to the first slice)."""
    found = []
    i, n = 0, len(data)
    starts = []
    while True:
        j = data.find(b"\x00\x00\x01", i)
        if j < 0:
            break
        starts.append(j + 3)
        nal_type = data[j + 3] & 0x1F if j + 3 < n else 0
        if nal_type in (1, 5):  # a slice: the parameter sets come before it
            break
        i = j + 3
    for k, s in enumerate(starts):
        if s >= n:
            continue
        nal_type = data[s] & 0x1F
        if nal_type in (7, 8):
            e = starts[k + 1] - 3 if k + 1 < len(starts) else n
            found.append(data[s:e].rstrip(b"\x00"))
    return b"".join(found)


class SegmentedVideoSink(EncodedFileSink):
    """MP4 (H.264 + AAC) from `encoders` libx264 processes; see the module notes.

    `audio`: float32 (channels, n) in [-1, 1] — 1 or 2 channels — or None for a silent video.
    `gop_frames`: frames per chunk (each starts with an IDR); default one second.
    `threads`: x264 threads per encoder (default: the cores shared out among the encoders).
    `slots`: RGBA slots in shared memory per encoder; `backlog`: converted frames an encoder
    may queue (default `gop_frames`).
    """

    name = "video_file"

    def __init__(
        self,
        path: str | os.PathLike,
        width: int,
        height: int,
        fps: int | Fraction,
        audio: np.ndarray | None,
        sample_rate: int,
        *,
        encoders: int = 2,
        x264_preset: str = "veryfast",
        crf: int = 20,
        gop_frames: int | None = None,
        threads: int | None = None,
        slots: int = 3,
        backlog: int | None = None,
        fragment_seconds: float = 1.0,
        start_timeout_s: float = 120.0,
    ):
        self.path = Path(path)
        suffix = check_output_path(self.path, False)
        if suffix != ".mp4":
            raise ValueError(
                f"{self.path}: parallel encoding writes MP4 (H.264 + AAC) only; "
                "use one encoder for WebM"
            )
        fps = check_size_and_fps(self.path, width, height, fps)
        if not 1 <= int(encoders) <= MAX_ENCODERS:
            raise ValueError(f"{self.path}: encoders must be 1..{MAX_ENCODERS}, got {encoders}")
        audio = check_audio(self.path, audio, sample_rate)
        self.width, self.height, self.fps = int(width), int(height), fps
        self.audio, self.sample_rate = audio, sample_rate
        self.encoders = int(encoders)
        self.x264_preset, self.crf = x264_preset, int(crf)
        self.gop = int(gop_frames) if gop_frames else max(1, round(fps))
        self.threads = int(threads) if threads else encoder_threads(self.encoders)
        self.slots = max(1, int(slots))
        self.backlog = int(backlog) if backlog is not None else self.gop
        self.fragment_seconds = fragment_seconds
        self.start_timeout_s = start_timeout_s
        self.partial = partial_path(self.path)
        self.needs = spec("image", size=(self.width, self.height))

        self.frames_written = 0
        self.frames_joined = 0
        self.chunks_joined = 0
        self.audio_samples_in = 0
        # seconds spent by the caller in write(): copying into shared memory / waiting for a slot
        self.copy_seconds = 0.0
        self.wait_seconds = 0.0
        self.join_seconds = 0.0  # joiner thread: packet copy + audio encode + mux
        self.finish_seconds = 0.0  # finish(): last chunks, flush, close, rename
        self.worker_stats: dict[int, dict] = {}
        self._arena: SharedArena | None = None
        self._views: list[list[np.ndarray]] = []
        self._procs: list = []
        self._send: list[Connection] = []
        self._recv: list[Connection] = []
        self._free: list = []
        self._next_slot: list[int] = []
        self._container = None
        self._vstream = None
        self._astream = None
        self._joiner: threading.Thread | None = None
        self._stop = threading.Event()
        self._error: str | None = None
        self._os_error: OSError | None = None
        self._params: bytes | None = None
        self._last_dts: int | None = None
        self._state = "new"  # new → launched → open → done | aborted

    # ------------------------------------------------------------------ life cycle

    def launch(self, ctx: Context) -> None:
        """Claim the output and launch the encoder processes, without waiting for them (see
        core.stage.Sink); `setup` waits. Called by `setup` when nobody called it."""
        if self._state != "new":
            raise RuntimeError(f"{self.path}: launch() on a sink that is {self._state}")
        self._check_setup(ctx)
        self._claim()
        try:
            self._spawn_workers()
        except BaseException:
            self._teardown()
            self._release_partial(0)
            raise
        self._state = "launched"

    def setup(self, ctx: Context) -> None:
        if self._state == "new":
            self.launch(ctx)
        try:
            self._wait_workers()
            self._open_container()
        except BaseException:
            self._teardown()
            self._release_partial(0)
            raise
        self._state = "open"
        self._joiner = threading.Thread(target=self._join_loop, name="segment-joiner", daemon=True)
        self._joiner.start()

    def write(self, frame: Frame) -> None:
        image = self._check_image(frame)
        self._raise_error()
        i = self.frames_written
        chunk = i // self.gop
        w = chunk % self.encoders
        t0 = time.perf_counter()
        while not self._free[w].acquire(timeout=0.1):  # never wait forever on a dead worker
            self._raise_error()
        t1 = time.perf_counter()
        slot = self._next_slot[w]
        self._next_slot[w] = (slot + 1) % self.slots
        dst = self._views[w][slot]
        if not isinstance(image, np.ndarray):  # a CPU torch tensor: its memory, no copy
            image = image.detach().numpy()
        kind = "i420" if image.ndim == 2 else "rgba"  # see EncodedFileSink._check_image
        if kind == "i420":  # the slot's first bytes, as (H * 3 // 2, W)
            dst = dst.reshape(-1)[: image.size].reshape(image.shape)
        np.copyto(dst, image, casting="unsafe")
        self._send_to(w, ("frame", slot, chunk, i, kind))
        self.frames_written += 1
        t2 = time.perf_counter()
        self.wait_seconds += t1 - t0
        self.copy_seconds += t2 - t1

    def finish(self) -> None:
        if self._state != "open":
            raise RuntimeError(f"{self.path}: finish() on a sink that is {self._state}")
        t0 = time.perf_counter()
        self._raise_error()
        if self.frames_written == 0:
            raise RuntimeError(f"{self.path}: no frames were written; not creating the file")
        for w in range(len(self._send)):
            self._send_to(w, ("end",))
        while self._joiner.is_alive():
            self._joiner.join(0.1)
        self._raise_error()
        if self.frames_joined != self.frames_written:
            raise EncoderWorkerError(
                f"{self.path}: {self.frames_joined} of {self.frames_written} frames came back "
                "from the encoders"
            )
        if self._astream is not None:
            self._encode_audio_until(self.audio.shape[1])
            self._mux(self._astream.encode(None))
        self._publish()
        stop_processes(self._procs, grace_s=5.0)
        self._teardown()
        self.finish_seconds = time.perf_counter() - t0

    def abort(self) -> None:
        if self._state in ("done", "aborted"):
            return
        self._state = "aborted"
        self._stop.set()
        for p in self._procs:
            with contextlib.suppress(Exception):
                p.kill()
        if self._joiner is not None:
            self._joiner.join(5.0)
        self._teardown()
        self._release_partial(self.frames_joined)

    @property
    def worker_pids(self) -> list[int]:
        return [p.pid for p in self._procs]

    def join_encoded(self, chunks: list[list]) -> None:
        """Write the file from chunks encoded elsewhere (each `open_chunk_encoder`'s packets, in
        video order) instead of by this sink's own workers: the joiner's checks, the audio muxed
        once, the partial-file rules (on failure the partial is kept as NAME.interrupted.mp4 or
        removed). Call it instead of setup/write/finish; farm/segments.py joins with it."""
        self._claim()
        try:
            self._open_container()
            self._state = "open"
            for cid, packets in enumerate(chunks):
                self._join_chunk(cid, packets)
            if self._astream is not None:
                self._encode_audio_until(self.audio.shape[1])
                self._mux(self._astream.encode(None))
            self._publish()
        except BaseException:
            self._close_container()
            self._release_partial(self.frames_joined)
            raise

    # ------------------------------------------------------------------ workers

    def _spawn_workers(self) -> None:
        ctx = spawn_context()
        slot_bytes = page_round(self.width * self.height * 4)
        self._arena = SharedArena(slot_bytes * self.slots * self.encoders, "kagura-encode")
        shape = (self.height, self.width, 4)
        for w in range(self.encoders):
            offset = w * self.slots * slot_bytes
            self._views.append(
                [
                    self._arena.array(offset + s * slot_bytes, shape, np.uint8)
                    for s in range(self.slots)
                ]
            )
            cfg = _Config(
                index=w,
                width=self.width,
                height=self.height,
                fps_num=self.fps.numerator,
                fps_den=self.fps.denominator,
                x264_preset=self.x264_preset,
                crf=self.crf,
                threads=self.threads,
                gop=self.gop,
                slots=self.slots,
                backlog=self.backlog,
                slot_bytes=slot_bytes,
                offset=offset,
            )
            free = ctx.Semaphore(self.slots)
            proc, frames_w, out_r = start_worker(
                ctx, _encoder_main, (cfg, self._arena.handle, free), f"kagura-encoder-{w}"
            )
            self._procs.append(proc)
            self._send.append(frames_w)
            self._recv.append(out_r)
            self._free.append(free)
            self._next_slot.append(0)

    def _wait_workers(self) -> None:
        # wait until every encoder has opened libx264: bad settings fail here, not at frame 1
        late = EncoderWorkerError(f"{self.path}: encoders did not start in time")
        wait_started(set(range(self.encoders)), self.start_timeout_s, self._collect_ready, late)

    def _collect_ready(self, waiting: set[int]) -> None:
        for w, conn in ready_workers(self._procs, self._recv, waiting, timeout=1.0):
            if conn is None:
                raise self._dead(w, " at start")
            msg = self._recv_msg(w)
            if msg[0] == "ready":
                waiting.discard(w)
            elif msg[0] == "error":
                raise EncoderWorkerError(f"{self.path}: encoder {w} failed: {msg[2]}")

    def _dead(self, w: int, suffix: str = "") -> EncoderWorkerError:
        """The error for encoder `w`, which has exited (or is about to: it is given 2 s)."""
        self._procs[w].join(2.0)
        return EncoderWorkerError(f"{self.path}: encoder {w} {exit_text(self._procs[w])}{suffix}")

    def _send_to(self, w: int, msg: tuple) -> None:
        try:
            self._send[w].send(msg)
        except OSError:
            self._raise_error()
            raise self._dead(w) from None

    def _recv_msg(self, w: int):
        try:
            return self._recv[w].recv()
        except (EOFError, OSError):
            raise self._dead(w) from None

    def _teardown(self) -> None:
        stop_processes(self._procs, self._send + self._recv, grace_s=0.0)
        self._send, self._recv = [], []
        self._close_container()
        self._views = []
        if self._arena is not None:
            self._arena.close()
            self._arena = None

    # ------------------------------------------------------------------ the file

    def _open_container(self) -> None:
        container = open_fragmented_mp4(self.partial, self.fragment_seconds)
        self._container = container
        vs = container.add_mux_stream("h264", rate=self.fps, width=self.width, height=self.height)
        vs.time_base = 1 / self.fps
        self._vstream = vs
        if self.audio is not None:
            layout = "mono" if self.audio.shape[0] == 1 else "stereo"
            self._astream = add_audio_stream(container, "aac", self.sample_rate, layout, "fltp")
            self._audio_layout = layout

    # ------------------------------------------------------------------ joiner thread

    def _join_loop(self) -> None:
        pending: dict[int, list] = {}
        done: set[int] = set()
        try:
            while not self._stop.is_set():
                live = [w for w in range(self.encoders) if w not in done]
                if not live and not pending:
                    return
                if not live:
                    raise EncoderWorkerError(
                        f"{self.path}: chunks {sorted(pending)} cannot be joined: chunk "
                        f"{self.chunks_joined} never came back"
                    )
                # an encoder that exited with messages unread: they are read first
                ready = ready_workers(self._procs, self._recv, live, 0.2, read_exited=False)
                for w, conn in ready:
                    if conn is None:
                        if w in done:
                            continue
                        raise self._dead(w)
                    msg = self._recv_msg(w)
                    if msg[0] == "chunk":
                        pending[msg[1]] = msg[2]
                        t0 = time.perf_counter()
                        while self.chunks_joined in pending:
                            self._join_chunk(self.chunks_joined, pending.pop(self.chunks_joined))
                        self.join_seconds += time.perf_counter() - t0
                    elif msg[0] == "done":
                        self.worker_stats[w] = msg[2]
                        done.add(w)
                    elif msg[0] == "error":
                        raise EncoderWorkerError(f"{self.path}: encoder {w} failed: {msg[2]}")
        except BaseException as exc:
            if isinstance(exc, OSError) and self._os_error is None:
                self._os_error = exc  # disk full, read-only, ...: the one-line OS error path
            if self._error is None:
                self._error = (
                    str(exc)
                    if isinstance(exc, WorkerProcessError)
                    else f"{self.path}: joining the encoded segments failed: {one_line(exc)}"
                )
            self._stop.set()

    def _join_chunk(self, cid: int, packets: list) -> None:
        if not packets or not packets[0][2]:
            raise EncoderWorkerError(f"{self.path}: chunk {cid} does not start with a keyframe")
        params = _parameter_sets(packets[0][3])
        if self._params is None:
            self._params = params
        elif params != self._params:
            raise EncoderWorkerError(
                f"{self.path}: chunk {cid} was encoded with other parameter sets (SPS/PPS) "
                "than chunk 0; the encoders' settings differ"
            )
        tb = 1 / self.fps  # the packets' time base (the muxer's stream time base differs)
        for pts, dts, key, data in packets:
            if self._last_dts is not None and dts <= self._last_dts:
                raise EncoderWorkerError(
                    f"{self.path}: chunk {cid}: decode time {dts} after {self._last_dts}"
                )
            self._last_dts = dts
            pk = av.Packet(data)
            pk.pts, pk.dts = pts, dts
            pk.time_base = tb
            pk.is_keyframe = key
            pk.stream = self._vstream
            self._container.mux(pk)
        self.frames_joined += len(packets)
        self.chunks_joined += 1
        if self._astream is not None:
            self._encode_audio_until(self._audio_due(self.frames_joined))

    def _encode_audio_until(self, end: int) -> None:
        af = self._audio_frame_until(end)
        if af is not None:
            self._mux(self._astream.encode(af))

    def _raise_error(self) -> None:
        if self._os_error is not None:
            raise self._os_error
        if self._error is not None:
            raise EncoderWorkerError(self._error)
