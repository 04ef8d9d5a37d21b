"""Comparing recipes over draws: means, differences and the rule, from the split bench's lines."""

import json

import pytest

from app.bench_lipsync_compare import main


def _log(tmp_path, rows):
    p = tmp_path / "split.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(p)


def _row(recipe, clean, keys_shut, far):
    return {"recipe": recipe, "train_s": 1, "valid clean offline": f"{clean}% / 100%",
            "valid keys 0 dB offline": f"50.0% / {keys_shut}%",
            "valid-far clean offline": f"{far}% / 100%"}  # fmt: skip


ROWS = [
    _row("nets/base-seed0.npz", 70.0, 90, 60.0),
    _row("nets/base-seed1.npz", 72.0, 94, 61.0),
    _row("nets/lifter-seed0.npz", 74.0, 88, 63.0),
    _row("nets/lifter-seed1.npz", 73.0, 90, 62.0),
]


def test_means_and_differences_over_draws(tmp_path, capsys):
    log = _log(tmp_path, ROWS)
    rules = ["--rule", "valid clean offline>=+2", "--rule", "valid keys 0 dB offline#1>=-3"]
    rc = main([log, "--group", "base=base-seed", "--group", "lifter=lifter-seed", *rules])
    out = capsys.readouterr().out
    assert rc == 0
    assert (
        "| valid clean offline | 70.0 / 72.0 (71.00) | 74.0 / 73.0 (+2.50) | >= +2: pass |" in out
    )
    # the second figure: pauses shut, 92 -> 89
    assert (
        "| valid keys 0 dB offline#1 | 90.0 / 94.0 (92.00) | 88.0 / 90.0 (-3.00) | >= -3: pass |"
        in out
    )
    assert "| valid-far clean offline | 60.0 / 61.0 (60.50) | 63.0 / 62.0 (+2.00) |  |" in out
    assert out.strip().endswith("every rule holds")


def test_a_rule_fails_when_the_mean_difference_is_under_it(tmp_path, capsys):
    log = _log(tmp_path, ROWS)
    assert main([log, "--group", "base=base-seed", "--group", "lifter=lifter",
                 "--rule", "valid-far clean offline>=2.5"]) == 0  # fmt: skip
    out = capsys.readouterr().out
    assert ">= +2.5: FAIL" in out and out.strip().endswith("a rule fails")


def test_a_later_line_of_the_same_net_replaces_the_earlier(tmp_path, capsys):
    log = _log(tmp_path, [*ROWS, _row("nets/base-seed0.npz", 80.0, 90, 60.0)])
    main(
        [
            log,
            "--group",
            "base=base-seed",
            "--group",
            "lifter=lifter",
            "--part",
            "valid clean offline",
        ]
    )
    assert "| valid clean offline | 80.0 / 72.0 (76.00) |" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (
            ["--group", "a=base", "--group", "b=nothing-like-it"],
            "--group b: 'nothing-like-it' matches no",
        ),
        (
            ["--group", "a=base", "--group", "b=lifter", "--rule", "clean > 2"],
            "--rule: expected 'PART>=TOL'",
        ),
        (
            ["--group", "a=base", "--group", "b=lifter", "--part", "test clean offline"],
            "has no 'test clean offline'",
        ),
        (["--group", "a=base", "--group", "b=("], "--group b: not a regular expression"),
        (["--group", "a=base"], "--group: expected at least two"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys, args, says):
    assert main([_log(tmp_path, ROWS), *args]) == 2
    err = capsys.readouterr().err
    assert says in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_a_missing_or_malformed_log_is_named(tmp_path, capsys):
    assert main([str(tmp_path / "none.jsonl"), "--group", "a=x", "--group", "b=y"]) == 2
    assert "none.jsonl: no such file" in capsys.readouterr().err
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"recipe": "a"}\nnot json\n')
    assert main([str(bad), "--group", "a=x", "--group", "b=y"]) == 2
    assert "bad.jsonl:2: expected a JSON line" in capsys.readouterr().err
