"""Presets: built-ins load and list; broken files give one-line errors naming file, key and
what was expected; user presets (folder from $KAGURA_PRESETS_DIR) override and never hide
the built-ins."""

from __future__ import annotations

from pathlib import Path

import pytest

from presets.loader import (
    BUILTIN_DIR,
    PresetError,
    list_presets,
    load_preset,
    read_preset,
)
from presets.schema import Preset

BUILTINS = ("studio", "ink-wash", "cyberpunk")


@pytest.fixture(autouse=True)
def user_dir(tmp_path, monkeypatch) -> Path:
    d = tmp_path / "user-presets"
    d.mkdir()
    monkeypatch.setenv("KAGURA_PRESETS_DIR", str(d))
    return d


def studio_text() -> str:
    return (BUILTIN_DIR / "studio.toml").read_text()


@pytest.mark.parametrize("name", BUILTINS)
def test_builtin_loads(name):
    p = load_preset(name)
    assert isinstance(p, Preset) and p.name == name
    assert p.diffusion.prompt and 0 < p.diffusion.strength <= 1
    assert p.post.kind in {"toon", "ink-wash", "cyberpunk"}


def test_list_shows_builtins():
    infos = {i.name: i for i in list_presets()}
    assert set(BUILTINS) <= set(infos)
    assert all(infos[n].source == "built-in" and infos[n].title for n in BUILTINS)


def test_load_by_path():
    p = load_preset(str(BUILTIN_DIR / "ink-wash.toml"))
    assert p.post.kind == "ink-wash"


def _broken(tmp_path: Path, text: str, name: str = "broken") -> Path:
    path = tmp_path / f"{name}.toml"
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    ("old", "new", "key", "expect"),
    [
        ('hair = "#7fb6ff"', 'hair = "pink"', "palette.hair", "a colour as '#rrggbb'"),
        ("vignette = 0.18", "vignette = 1.5", "post.vignette", "a number between 0 and 1"),
        ("vignette = 0.18", "vignete = 0.18", "post.vignete", "unknown key"),
        ("steps = 1", "steps = 20", "diffusion.steps", "a whole number between 1 and 8"),
        (
            'kind = "toon"',
            'kind = "anime"',
            "post.kind",
            "one of 'toon', 'ink-wash' or 'cyberpunk'",
        ),
        ('[line]\nwidth = 2.5\nstyle = "clean"\n', "", "line", "a [line] section"),
        ("blend = 0.4", "blend = 1.5", "temporal.blend", "between 0 and 1 (from 0, below 1)"),
        ("blend = 0.4", "blend = 0.5\nguard = 40", "temporal.guard", "between 0 and 16"),
        ("blend = 0.4", "blend = 0.5\ntolerance = 80", "temporal.tolerance", "between 0 and 64"),
        ("blend = 0.4", 'blend = 0.5\ntolerance = "high"', "temporal.tolerance", "a number"),
    ],
)
def test_malformed(tmp_path, old, new, key, expect):
    text = studio_text()
    assert old in text
    path = _broken(tmp_path, text.replace(old, new).replace('name = "studio"', 'name = "broken"'))
    with pytest.raises(PresetError) as info:
        load_preset(str(path))
    msg = str(info.value)
    assert "\n" not in msg
    assert str(path) in msg and key in msg and expect in msg, msg
    assert info.value.key == key


def test_toml_syntax_error_names_file_and_line(tmp_path):
    text = studio_text()
    line = text.splitlines().index("width = 2.5") + 1
    path = _broken(tmp_path, text.replace("width = 2.5", "width = = 2.5"))
    with pytest.raises(PresetError) as info:
        read_preset(path, require_name=False)
    msg = str(info.value)
    assert "\n" not in msg and str(path) in msg and f"line {line}" in msg, msg


def test_unknown_name_lists_available():
    with pytest.raises(PresetError) as info:
        load_preset("no-such-preset")
    msg = str(info.value)
    assert "\n" not in msg
    for n in BUILTINS:
        assert n in msg


def test_user_preset_loads_and_overrides(user_dir):
    (user_dir / "mine.toml").write_text(studio_text().replace('name = "studio"', 'name = "mine"'))
    (user_dir / "studio.toml").write_text(
        studio_text().replace('title = "Studio"', 'title = "My Studio"')
    )
    assert load_preset("mine").name == "mine"
    assert load_preset("studio").title == "My Studio"  # the user's file wins
    infos = {i.name: i for i in list_presets()}
    assert infos["mine"].source == "user" and infos["studio"].title == "My Studio"


def test_broken_user_preset_does_not_hide_builtins(user_dir):
    (user_dir / "bad.toml").write_text("this is = = not toml")
    (user_dir / "studio.toml").write_text(studio_text().replace('"#7fb6ff"', '"blue"'))
    errors: list[PresetError] = []
    infos = {i.name: i for i in list_presets(errors)}
    # the other built-ins stay; the broken override is reported, not listed as a working studio
    assert set(infos) == {"ink-wash", "cyberpunk"}
    assert len(errors) == 2 and any("bad.toml" in str(e) for e in errors)
    with pytest.warns(UserWarning) as caught:
        list_presets()
    assert sorted(Path(str(w.message).split(":")[0]).name for w in caught) == [
        "bad.toml",
        "studio.toml",
    ]
    # loading it refuses too: one line, the file, the key, what was expected, the way back
    with pytest.raises(PresetError) as info:
        load_preset("studio")
    msg = str(info.value)
    assert "\n" not in msg and str(user_dir / "studio.toml") in msg
    assert "palette.hair: expected a colour as '#rrggbb', got 'blue'" in msg
    assert "replaces the built-in 'studio'" in msg and str(user_dir) in msg
    # a broken user preset that shadows nothing says nothing about built-ins
    with pytest.raises(PresetError) as info:
        load_preset("bad")
    assert "built-in" not in str(info.value)


def test_a_huge_value_is_cut_in_the_message(user_dir):
    (user_dir / "studio.toml").write_text(
        studio_text().replace('"#7fb6ff"', '"' + "x" * 1_000_000 + '"')
    )
    with pytest.raises(PresetError) as info:
        load_preset("studio")
    assert len(str(info.value)) < 400 and "palette.hair" in str(info.value)


def test_name_must_match_file_in_folder(user_dir):
    (user_dir / "other.toml").write_text(studio_text())
    with pytest.raises(PresetError, match=r"other\.toml: name: expected 'other'"):
        load_preset("other")


def test_cli_reports_a_broken_override_and_refuses_it(user_dir, tmp_path):
    import os
    import subprocess
    import sys

    (user_dir / "studio.toml").write_text(studio_text().replace("width = ", "width = 'x' #"))
    env = {**os.environ, "KAGURA_PRESETS_DIR": str(user_dir), "KAGURA_CONFIG_DIR": str(tmp_path)}
    repo = Path(__file__).resolve().parents[1]

    def kagura(*args):
        cmd = [sys.executable, "-m", "app.cli", *args]
        return subprocess.run(cmd, cwd=repo, env=env, capture_output=True, text=True, timeout=120)

    listed = kagura("presets")
    assert listed.returncode == 0, listed.stderr
    assert [ln.split()[0] for ln in listed.stdout.splitlines()] == ["cyberpunk", "ink-wash"]
    lines = listed.stderr.splitlines()
    assert len(lines) == 1 and "studio.toml: line.width: expected a number" in lines[0]
    # the live app starts with the remembered preset (studio by default): refused the same way
    live = kagura("live", "--quit-after", "1")
    assert live.returncode == 2
    lines = live.stderr.splitlines()
    assert len(lines) == 1 and "studio.toml: line.width" in lines[0], live.stderr
    assert "replaces the built-in 'studio'" in lines[0]
