"""Output safety through the real command line (pipeline/sinks/output.py): never over an input,
an existing file only with -y, one job per output, a stopped render keeps its frames, and every
OS error (full, read-only, permission, name too long) one line with the path and exit 2."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import av
import pytest

from pipeline.sinks.output import PartialFile
from tests.cli import signal_when
from tests.hostile import cli_env, error_line, run_cli_batch, write_wav_s16

TINY = ["--size", "160x90", "--seconds", "0.3", "--quiet"]


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def video_frames(path: Path) -> int:
    with av.open(str(path)) as c:
        return sum(1 for _ in c.decode(video=0))


def mount_tmpfs(path: Path, options: str, stack: contextlib.ExitStack) -> bool:
    """A tmpfs at `path` (unmounted when `stack` closes); False where mounting is not allowed."""
    path.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path)], capture_output=True
    )
    if done.returncode == 0:
        stack.callback(subprocess.run, ["umount", "-l", str(path)], check=False)
    return done.returncode == 0


def can_mount_tmpfs() -> bool:
    return os.geteuid() == 0 and shutil.which("mount") is not None


@pytest.fixture(scope="module")
def outputs(tmp_path_factory):
    """Every case in one child process (the imports are paid once); see the comments."""
    d = tmp_path_factory.mktemp("outputs")
    write_wav_s16(d / "good.wav", 1.0)
    write_wav_s16(d / "a.wav", 0.5)
    (d / "link.mp4").symlink_to("a.wav")
    os.link(d / "a.wav", d / "hard.mp4")
    (d / "exists.mp4").write_text("an older render")
    (d / "exists.json").write_text("{}")
    (d / "folder.mp4").mkdir()
    (d / "stale.partial.mp4").write_bytes(b"frames of a killed render")
    long_name = "x" * 300 + ".mp4"
    cases = [
        ["render", "good.wav", "-o", "made.mp4", *TINY],  # 0: an MP4 input for case 1
        ["render", "made.mp4", "-o", "made.mp4", "-y", *TINY],  # 1: over its own input
        ["render", "a.wav", "-o", "link.mp4", "-y", *TINY],  # 2: a symlink to the input
        ["render", "a.wav", "-o", "hard.mp4", "-y", *TINY],  # 3: a hard link to it
        ["render", "good.wav", "-o", "exists.mp4", *TINY],  # 4: exists, no -y
        ["render", "good.wav", "-o", "folder.mp4", *TINY],  # 5: a folder
        ["render", "good.wav", "-o", long_name, *TINY],  # 6: ENAMETOOLONG
        ["render", "good.wav", "-o", "locked.mp4", *TINY],  # 7: another job holds it
        ["render", "good.wav", "-o", "stale.mp4", *TINY],  # 8: a killed job's partial
        ["lipsync", "a.wav", "--json", "a.wav", "-y"],  # 9: JSON over the WAV
        ["lipsync", "a.wav", "--json", "exists.json"],  # 10: exists, no -y
        ["lipsync", "a.wav", "--json", "exists.json", "-y"],  # 11: replaced
        ["still", "good.wav", "--at", "0.2", "-o", "good.wav", "-y"],  # 12: not a PNG name
        ["still", "made.mp4", "--at", "0.1", "-o", "s.png", "--size", "160x90"],  # 13
        ["still", "s.png", "--at", "0.1", "-o", "s.png", "-y"],  # 14: PNG over its input
        ["render", "good.wav", "-o", "exists.mp4", "-y", *TINY],  # 15: replaced with -y
    ]
    mounts = contextlib.ExitStack()
    if (
        can_mount_tmpfs()
        and mount_tmpfs(d / "full", "size=24k", mounts)
        and mount_tmpfs(d / "ro", "size=1m,ro", mounts)
    ):  # a full and a read-only file system (cases 16..19)
        cases += [
            ["render", "good.wav", "-o", "full/o.mp4", "--size", "320x180", "--quiet"],
            ["render", "good.wav", "-o", "ro/o.mp4", *TINY],
            ["lipsync", "good.wav", "--json", "ro/o.json"],
            ["still", "good.wav", "--at", "0.5", "-o", "ro/o.png", "--size", "160x90"],
        ]
    before = {n: digest(d / n) for n in ("a.wav", "exists.mp4", "exists.json", "good.wav")}
    claim = PartialFile(d / "locked.mp4")  # this process is "the other job" on locked.mp4
    claim.acquire()
    os.write(os.open(claim.path, os.O_WRONLY), b"another job's frames")
    with mounts:
        try:
            results = run_cli_batch(cases, d)
        finally:
            locked_bytes = claim.path.read_bytes()
            claim.discard()
        full_left = sorted(p.name for p in (d / "full").iterdir()) if len(cases) > 16 else []
    return d, results, before, locked_bytes, full_left


def test_never_over_an_input(outputs):
    d, r, before, _, _ = outputs
    assert r[0]["rc"] == 0, r[0]["stderr"]
    for i in (1, 2, 3):
        assert r[i]["rc"] == 2 and "refusing to write over an input" in error_line(r[i]), r[i]
    assert video_frames(d / "made.mp4") == 9  # still case 0's render
    assert (d / "link.mp4").is_symlink() and (d / "hard.mp4").stat().st_nlink == 2
    assert r[9]["rc"] == 2 and "input file a.wav" in error_line(r[9])
    assert digest(d / "a.wav") == before["a.wav"]
    assert r[14]["rc"] == 2 and "refusing to write over an input" in error_line(r[14])
    assert r[13]["rc"] == 0 and (d / "s.png").read_bytes()[:4] == b"\x89PNG"
    assert r[12]["rc"] == 2 and digest(d / "good.wav") == before["good.wav"]


def test_existing_outputs_need_overwrite(outputs):
    d, r, _, _, _ = outputs
    assert r[4]["rc"] == 2 and "already exists; pass --overwrite (or -y)" in error_line(r[4])
    assert r[10]["rc"] == 2 and "already exists" in error_line(r[10])
    assert r[11]["rc"] == 0 and json.loads((d / "exists.json").read_text())["frames"]
    assert r[15]["rc"] == 0 and video_frames(d / "exists.mp4") == 9


def test_folder_and_long_names_refused_up_front(outputs):
    d, r, _, _, _ = outputs
    assert r[5]["rc"] == 2 and "folder.mp4: is a directory" in error_line(r[5])
    assert list((d / "folder.mp4").iterdir()) == []
    assert r[6]["rc"] == 2 and "too long" in error_line(r[6])
    assert len(error_line(r[6])) < 400  # the 300-character name is not printed in full


def test_one_job_per_output_and_killed_partials_kept(outputs):
    d, r, _, locked_bytes, _ = outputs
    assert r[7]["rc"] == 2 and "another Kagura job is writing" in error_line(r[7])
    assert locked_bytes == b"another job's frames"  # the owner's partial was not touched
    assert not (d / "locked.mp4").exists()
    assert r[8]["rc"] == 0, r[8]["stderr"]
    assert "earlier unfinished render was kept as stale.interrupted.mp4" in r[8]["stderr"]
    assert (d / "stale.interrupted.mp4").read_bytes() == b"frames of a killed render"
    assert video_frames(d / "stale.mp4") == 9
    assert not list(d.glob("*.partial.*"))


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_stopped_render_keeps_its_frames(tmp_path, sig):
    """Ctrl+C / SIGTERM mid-render: the frames written so far stay, as NAME.interrupted.mp4."""
    write_wav_s16(tmp_path / "long.wav", 20.0)
    out = tmp_path / "o.mp4"
    cmd = [sys.executable, "-m", "app.cli", "render", "long.wav", "-o", "o.mp4"]
    cmd += ["--size", "320x180", "--quiet"]
    proc = subprocess.Popen(cmd, cwd=tmp_path, env=cli_env(), stderr=subprocess.PIPE, text=True)
    partial = tmp_path / "o.partial.mp4"
    # a fragment or two written
    stderr = signal_when(proc, lambda: partial.exists() and partial.stat().st_size > 20_000, sig)
    assert proc.returncode == {signal.SIGINT: 130, signal.SIGTERM: 143}[sig], stderr
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    assert lines == [lines[-1]] and "kept in o.interrupted.mp4" in lines[-1], stderr
    assert not out.exists() and not partial.exists()
    assert video_frames(tmp_path / "o.interrupted.mp4") >= 15  # it plays


# ---------------------------------------------------------------------------- OS errors


@pytest.mark.skipif(not can_mount_tmpfs(), reason="mounting a tmpfs needs root")
def test_full_and_read_only_file_systems(outputs):
    _, r, _, _, full_left = outputs
    if len(r) < 20:
        pytest.skip("no tmpfs could be mounted here")
    full, ro, ro_json, ro_png = r[16:20]
    assert full["rc"] == 2 and "no space left on the device" in error_line(full), full
    assert "full/o" in error_line(full)
    assert full_left == [] or full_left == ["o.interrupted.mp4"], full_left
    for case in (ro, ro_json, ro_png):
        assert case["rc"] == 2 and "read-only file system" in error_line(case), case
        assert "ro/o." in error_line(case)


@pytest.mark.skipif(os.geteuid() != 0, reason="running as another user needs root")
def test_permission_denied_names_the_folder():
    # a world-readable folder that only root may write into, used by an unprivileged user
    d = Path(tempfile.mkdtemp(prefix="kagura-eacces-"))
    try:
        os.chmod(d, 0o755)
        write_wav_s16(d / "good.wav", 1.0)
        os.chmod(d / "good.wav", 0o644)
        env = cli_env(HOME=str(d), KAGURA_CONFIG_DIR=str(d / "cfg"), NUMBA_CACHE_DIR="/tmp")
        try:
            (r,) = run_cli_batch(
                [["render", "good.wav", "-o", "o.mp4", *TINY]], d, env=env, user=65534, group=65534
            )
        except (PermissionError, AssertionError) as exc:  # the venv unreadable for nobody
            if "Permission denied" in str(exc) and "app.cli" not in str(exc):
                pytest.skip(f"the Python environment is not usable by nobody: {exc}")
            raise
        assert r["rc"] == 2 and "permission denied" in error_line(r), r
        assert "o.partial.mp4" in error_line(r) or "o.mp4" in error_line(r)
        assert sorted(p.name for p in d.iterdir()) == ["good.wav"]
    finally:
        shutil.rmtree(d, ignore_errors=True)


def test_an_os_error_is_exit_2_and_anything_else_a_bug_exit_1(capsys, monkeypatch):
    """The one error path's two ends: an OS error names its path (exit 2); any other exception
    is one line calling it a bug, where it happened and how to report it (exit 1)."""
    from app.errors import report

    monkeypatch.delenv("KAGURA_DEBUG", raising=False)
    assert report(PermissionError(13, "Permission denied", "/srv/out.mp4")) == 2
    assert capsys.readouterr().err == "kagura: error: /srv/out.mp4: permission denied\n"
    try:
        {}["missing"]
    except KeyError as exc:
        status = report(exc)
    err = capsys.readouterr().err
    assert status == 1 and "Traceback" not in err
    (line,) = err.splitlines()
    assert line.startswith(
        "kagura: internal error: KeyError: 'missing' at test_hostile_outputs.py:"
    )
    assert "bug in Kagura; please report it" in line and "KAGURA_DEBUG=1" in line
