"""The jobs file of `kagura farm`: TOML with one `[[job]]` table per render.

    [defaults]              # optional: keys every job gets unless it sets them itself
    preset = "toon"
    size = "1920x1080"

    [[job]]
    audio = "songs/one.wav"
    output = "out/one.mp4"

    [[job]]
    audio = "songs/long.wav"
    output = "out/long.mp4"
    segments = 4            # cut by time into 4 segment renders (farm/segments.py)

A job's keys are `kagura render`'s options with `_` for `-` (`audio`, `output`, `preset`,
`size`, `fps`, `start`, `seconds`, `transparent`, `seed`, `avatar`, `device`, `diffusion`,
`upscale`, `temporal`, `x264_preset`, `overwrite`, …; `true`/`false` for switches), plus the
farm's own `name` (the label in the progress view) and `segments`. `device` may also be
`"auto"` (farm only): the job takes a GPU when the cluster has one free when it starts, else
it renders on the CPU exactly as `kagura render --device cpu` would (farm/schedule.py places
it; the progress view and the report say which device it used). Each job is turned into the
argument list of `kagura render` and checked by the same parser and the same checks
(`app.cli.render_request`, `app.render_job.check_output_safety` / `check_request`), so a job
is accepted exactly when the same `kagura render` command would start. Relative paths are
taken from the jobs file's folder.

Every job is checked before anything starts; all problems are collected, one line each naming
the file and the job (1-based, as in the file), and the whole file is refused (exit 2).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

from app.errors import UsageError, one_line

FARM_KEYS = ("name", "segments")
PATH_KEYS = ("audio", "output", "avatar")
MAX_SEGMENTS = 256


class JobsFileError(UsageError):
    """A refused jobs file: `lines` holds one line per problem."""

    def __init__(self, lines: list[str]):
        self.lines = lines
        super().__init__(lines[0] if len(lines) == 1 else f"{len(lines)} problems in the jobs file")


@dataclass(frozen=True)
class FarmJob:
    index: int  # 1-based, as in the file
    name: str
    request: object  # app.render_job.RenderRequest
    segments: int = 1
    needs_gpu: bool = False
    # device = "auto": `request` is the cuda render, `cpu_request` the same job on the CPU
    cpu_request: object = None

    @property
    def output(self) -> Path:
        return self.request.output

    @property
    def auto(self) -> bool:
        return self.cpu_request is not None

    def request_on(self, device: str):
        """The request this job renders on `device` ("cuda" or "cpu")."""
        if device == "cpu" and self.cpu_request is not None:
            return self.cpu_request
        return self.request


def load_jobs(path: Path) -> list[FarmJob]:
    """Every job of the file at `path`, checked; JobsFileError lists every problem."""
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise JobsFileError([f"{path}: no such jobs file"]) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise JobsFileError([f"{path}: cannot read the jobs file ({one_line(exc)})"]) from None
    except tomllib.TOMLDecodeError as exc:
        raise JobsFileError([f"{path}: not valid TOML: {one_line(exc)}"]) from None
    problems = [
        f"{path}: unknown table or key {key!r} (expected [[job]] tables and [defaults])"
        for key in data
        if key not in ("job", "defaults")
    ]
    defaults = data.get("defaults", {})
    if not isinstance(defaults, dict):
        problems.append(f"{path}: defaults: expected a table ([defaults])")
        defaults = {}
    tables = data.get("job", [])
    if not isinstance(tables, list) or not all(isinstance(t, dict) for t in tables):
        problems.append(f"{path}: job: expected [[job]] tables")
        tables = []
    if not tables and not problems:
        problems.append(f"{path}: no [[job]] tables; nothing to render")
    jobs: list[FarmJob] = []
    base = path.parent
    made: list[Path] = []  # output folders the checks created: removed again on refusal
    for i, table in enumerate(tables, start=1):
        try:
            jobs.append(_check_job(i, {**defaults, **table}, base, made))
        except UsageError as exc:
            problems.append(f"{path}: job {i}: {_key_words(one_line(exc))}")
        except Exception as exc:  # the render's other one-line input errors (preset, avatar, …)
            from app.errors import is_user_error

            if not is_user_error(exc):
                raise
            problems.append(f"{path}: job {i}: {_key_words(one_line(exc))}")
    problems += _clashes(path, jobs)
    problems.sort(key=_job_number)  # in file order (a clash is found after the jobs)
    if problems:
        for folder in reversed(made):
            with contextlib.suppress(OSError):
                folder.rmdir()  # only if still empty
        raise JobsFileError(problems)
    return jobs


def _check_job(index: int, table: dict, base: Path, made: list[Path]) -> FarmJob:
    from app import render_job

    table = dict(table)
    name = table.pop("name", None)
    segments = table.pop("segments", 1)
    if not isinstance(segments, int) or isinstance(segments, bool):
        raise UsageError(f"segments {segments!r}: expected a whole number from 1 to {MAX_SEGMENTS}")
    if not 1 <= segments <= MAX_SEGMENTS:
        raise UsageError(f"segments {segments}: expected a whole number from 1 to {MAX_SEGMENTS}")
    for key in ("audio", "output"):
        if key not in table:
            raise UsageError(f"{key} is missing (every job needs audio and output)")
    for key in PATH_KEYS:
        if isinstance(table.get(key), str):
            table[key] = str((base / table[key]).resolve())
    preset = table.get("preset")
    if isinstance(preset, str) and preset.endswith(".toml"):
        table["preset"] = str((base / preset).resolve())
    device = table.get("device", "cpu")
    if device not in ("cpu", "cuda", "auto"):
        raise UsageError(
            f"device {device!r}: expected cpu, cuda or auto (a GPU when one is free, else the CPU)"
        )
    auto = device == "auto"
    if auto:  # checked twice: the job as a cuda render and as a CPU render
        table["device"] = "cuda"
        cpu_req = _request({**table, "device": "cpu"})
    req = _request(table)
    render_job.check_output_safety(req)
    from presets.loader import load_preset

    load_preset(req.preset)  # render loads it after its checks; a farm job must not wait
    if segments > 1 and req.output.suffix.lower() != ".mp4":
        raise UsageError(
            f"segments {segments}: a video cut into segments is joined as MP4 "
            f"(H.264 + AAC); {req.output.name} is not .mp4"
        )
    folder = _first_missing(req.output.parent)
    needs_gpu = req.device == "cuda" and not auto
    # the GPU may be on another host of the cluster: torch's own check is the worker's, and
    # farm/schedule.py refuses cuda jobs on a cluster without GPUs
    render_job.check_request(
        dataclasses.replace(req, device="cpu") if req.device == "cuda" else req
    )
    if auto:
        render_job.check_request(cpu_req)
    if folder is not None and folder.is_dir():
        made.append(folder)
    label = str(name) if name is not None else req.output.name
    return FarmJob(index, label, req, segments, needs_gpu, cpu_req if auto else None)


def _request(table: dict):
    """The RenderRequest `kagura render` builds from the job's keys (`table` is not changed)."""
    from app.cli import render_request

    args = _render_parser().parse_args(_argv(dict(table)))
    audio = Path(args.audio)
    if not audio.is_file():
        what = "is a folder, not an audio file" if audio.is_dir() else "no such audio file"
        raise UsageError(f"audio {audio}: {what}")
    return render_request(args, audio)


def _argv(table: dict) -> list[str]:
    """The `kagura render` arguments a job table stands for."""
    known = set(_render_parser()._option_string_actions)
    argv = [str(table.pop("audio"))]
    for key, value in table.items():
        flag = "--" + key.replace("_", "-")
        if flag not in known or key in ("help", "quiet", "config"):
            raise UsageError(f"unknown key {key!r} (keys are `kagura render` options, e.g. size)")
        if isinstance(value, bool):
            if value:
                argv.append(flag)
            elif "--no-" + flag[2:] in known:
                argv.append("--no-" + flag[2:])
            continue
        if not isinstance(value, (str, int, float)):
            raise UsageError(f"{key} = {value!r}: expected a string, number or true/false")
        argv.append(f"{flag}={value}")  # one word: a value may start with "-"
    return argv


@functools.cache
def _render_parser():
    """`kagura render`'s own parser (made once), errors as one-line UsageErrors."""
    from app.cli import render_parser

    return render_parser()


def _key_words(text: str) -> str:
    """The render's messages name options (`--size`); a jobs file has keys (`size`)."""
    text = re.sub(r"argument (-o/)?--output", "output", text)
    text = re.sub(r"(?<![\w-])-o/--output", "output", text)
    text = text.replace("argument ", "")
    return re.sub(r"(?<![\w-])--([a-z][a-z0-9-]*)", lambda m: m.group(1).replace("-", "_"), text)


def _job_number(line: str) -> int:
    m = re.search(r": job (\d+): ", line)
    return int(m.group(1)) if m else 0


def _first_missing(folder: Path) -> Path | None:
    """The outermost folder of `folder`'s chain that does not exist yet (None: all exist)."""
    missing = None
    for p in [folder, *folder.parents]:
        if p.exists():
            break
        missing = p
    return missing


def _clashes(path: Path, jobs: list[FarmJob]) -> list[str]:
    """Two jobs on one output, or one job's output another job's input."""
    from pipeline.sinks.output import same_file

    lines = []
    for k, job in enumerate(jobs):
        for other in jobs[:k]:
            if job.output == other.output:
                lines.append(
                    f"{path}: job {job.index}: output {job.output} is job {other.index}'s "
                    "output too; give each job its own file"
                )
            for a, b in ((job, other), (other, job)):
                if same_file(a.output, b.request.audio) or a.output == Path(b.request.audio):
                    lines.append(
                        f"{path}: job {a.index}: output {a.output} is job {b.index}'s audio "
                        "input; refusing to write over an input"
                    )
    return lines
