"""The jobs file of `kagura farm` (farm/jobs.py): checked whole, with render's own checks,
before anything starts. No Ray here: a refused file never gets that far."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.cli import build_parser, main, render_request
from farm.jobs import JobsFileError, load_jobs
from tests.hostile import write_wav_s16


@pytest.fixture()
def song(tmp_path) -> Path:
    return write_wav_s16(tmp_path / "song.wav", 1.0)


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_a_bad_jobs_file_is_refused_whole_one_line_per_problem(tmp_path, song, capsys):
    (tmp_path / "taken.mp4").write_bytes(b"not mine to replace")
    jobs = _write(
        tmp_path / "jobs.toml",
        f"""
[[job]]
audio = "{song}"
output = "new/fine.mp4"

[[job]]
audio = "song.wav"
output = "b.mp4"
size = "1280x"

[[job]]
audio = "missing.wav"
output = "c.mp4"

[[job]]
audio = "song.wav"
output = "d.mp4"
colour = "red"

[[job]]
audio = "song.wav"
output = "taken.mp4"

[[job]]
audio = "song.wav"
output = "e.webm"
segments = 3

[[job]]
audio = "song.wav"
output = "new/fine.mp4"
""",
    )
    assert main(["farm", str(jobs)]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert [line.split(": job ")[1].split(":")[0] for line in lines] == [
        "2",
        "3",
        "4",
        "5",
        "6",
        "7",
    ]
    assert all(line.startswith(f"kagura: error: {jobs}: job ") for line in lines)
    assert "size '1280x': expected WIDTHxHEIGHT" in lines[0] and "--size" not in lines[0]
    assert "missing.wav: no such audio file" in lines[1]
    assert "unknown key 'colour'" in lines[2]
    assert "already exists" in lines[3] and "overwrite" in lines[3]
    assert "is not .mp4" in lines[4]
    assert "job 1's output too" in lines[5]
    # nothing written: no output, no partial, and the folder the checks made is gone again
    assert sorted(p.name for p in tmp_path.iterdir()) == ["jobs.toml", "song.wav", "taken.mp4"]
    assert (tmp_path / "taken.mp4").read_bytes() == b"not mine to replace"


def test_a_job_is_the_request_kagura_render_builds(tmp_path, song):
    jobs = _write(
        tmp_path / "jobs.toml",
        """
[defaults]
size = "160x90"
fps = 24

[[job]]
name = "first"
audio = "song.wav"
output = "out/one.mp4"
preset = "cyberpunk"
seed = 7
transparent = false

[[job]]
audio = "song.wav"
output = "two.webm"
transparent = true
fps = 12
seconds = 0.5
""",
    )
    one, two = load_jobs(jobs)
    argv = ["render", str(song), "-o", str(tmp_path / "out/one.mp4"), "--size", "160x90"]
    argv += ["--fps", "24", "--preset", "cyberpunk", "--seed", "7"]
    args = build_parser().parse_args(argv)
    assert one.request == render_request(args, song)
    assert (one.index, one.name, one.segments, one.needs_gpu) == (1, "first", 1, False)
    assert two.request.transparent and two.request.fps == 12 and two.request.seconds == 0.5
    assert two.request.output == tmp_path / "two.webm" and two.name == "two.webm"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("[[job]\naudio = 1", "not valid TOML"),
        ("[farm]\nx = 1\n", "unknown table or key 'farm'"),
        ("", "no [[job]] tables"),
        ('[[job]]\naudio = "song.wav"\n', "output is missing"),
        ('[[job]]\naudio = "song.wav"\noutput = "a.mp4"\nsegments = 0\n', "segments 0"),
        ('[[job]]\naudio = "song.wav"\noutput = "a.mp4"\nfps = 0\n', "fps 0"),
        ('[[job]]\naudio = "song.wav"\noutput = "a.mp4"\nstart = -1\n', "start -1.0: expected"),
        ('[[job]]\naudio = "song.wav"\noutput = "a.mp4"\nhelp = true\n', "unknown key 'help'"),
        ('[[job]]\naudio = "song.wav"\noutput = "a.mp4"\ndevice = "gpu"\n', "cuda or auto"),
    ],
)
def test_each_kind_of_problem_is_one_line_naming_the_file(tmp_path, song, text, expected):
    jobs = _write(tmp_path / "jobs.toml", text)
    with pytest.raises(JobsFileError) as info:
        load_jobs(jobs)
    assert len(info.value.lines) == 1
    assert str(jobs) in info.value.lines[0] and expected in info.value.lines[0]


def test_an_auto_job_is_checked_as_both_its_cuda_and_its_cpu_render(tmp_path, song):
    jobs = _write(
        tmp_path / "jobs.toml",
        '[[job]]\naudio = "song.wav"\noutput = "a.mp4"\nsize = "160x90"\ndevice = "auto"\n',
    )
    (job,) = load_jobs(jobs)
    argv = ["render", str(song), "-o", str(tmp_path / "a.mp4"), "--size", "160x90"]
    cpu = render_request(build_parser().parse_args([*argv, "--device", "cpu"]), song)
    cuda = render_request(build_parser().parse_args([*argv, "--device", "cuda"]), song)
    assert job.auto and not job.needs_gpu  # never refused for want of a GPU
    assert job.request_on("cpu") == cpu and job.request_on("cuda") == cuda
    assert cuda.diffusion is not None and cpu.diffusion is None  # the two differ in look


def test_an_auto_job_takes_a_free_gpu_else_a_free_cpu_else_waits():
    from farm.schedule import place

    # (free GPUs, free CPUs, GPUs per job, CPUs per job)
    assert place(1, 1, 1, 1) == "cuda"
    assert place(0, 1, 1, 1) == "cpu"  # the GPUs are busy, a CPU is free
    assert place(1, 0, 1, 1) is None  # a GPU task needs a CPU too
    assert place(0.5, 4, 1, 1) == "cpu"  # half a GPU is not a slot
    assert place(0, 1, 1, 2) is None  # waits for a second CPU
