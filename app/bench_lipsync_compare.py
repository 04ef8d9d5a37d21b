"""Comparing recipes over several draws from the split bench's JSON lines, against a rule.

    PYTHONPATH=$PWD python -m app.bench_lipsync_compare LOG [LOG ...]
        --group NAME=REGEX --group NAME=REGEX [...] [--rule 'PART>=TOL' ...] [--part PART ...]

`app.bench_lipsync_split --log FILE` writes one JSON line per scored net; its "recipe" field
names the net (a recipe and seed, or a file). Each `--group` gathers the lines whose recipe
matches its regular expression (one draw each: seeds, or files of one recipe); the first group
is the reference. The table gives every part's value per draw, the group's mean, and each
other group's mean minus the reference's. A rule part passes where that difference is at least
TOL for every other group. One draw of a full build can move a set by several points (issue 15,
twenty-seventh and twenty-eighth rounds): compare means over draws, not one file.

A PART is a key of the bench's lines ("valid-far clean offline"); "#1" after it takes the
line's second figure ("valid keys 0 dB offline#1": the pauses shut). Exit 2 with one line for a
missing file, a malformed rule or group, a group that matches nothing, or a part a line lacks.
"""

from __future__ import annotations

import argparse
import json
import re
from dataclasses import dataclass
from pathlib import Path

from app.errors import UsageError, report

# the parts shown when none are named: the split bench's validation sets first (where recipes
# are chosen), then the test rows (printed, never chosen on)
DEFAULT_PARTS = (
    "valid clean offline",
    "valid band 0 dB offline",
    "valid keys 0 dB offline",
    "valid keys 0 dB offline#1",
    "valid-held clean offline",
    "valid-held-alone clean offline",
    "valid-held-alone band 0 dB offline",
    "valid-sung clean offline",
    "valid-far clean offline",
    "valid-far band 0 dB offline",
    "valid-far-sung clean offline",
    "test clean offline",
    "test band 0 dB offline",
    "test-kokoro clean offline",
    "test-jtalk clean offline",
)


@dataclass(frozen=True)
class Rule:
    part: str
    tolerance: float  # the least (other group's mean - reference's mean) that passes


def parse_rule(text: str) -> Rule:
    m = re.fullmatch(r"\s*(.+?)\s*>=\s*([+-]?\d+(?:\.\d+)?)\s*", text)
    if not m:
        raise UsageError(
            f"--rule: expected 'PART>=TOL' (e.g. 'valid clean offline>=-1'), got {text!r}"
        )
    return Rule(m.group(1), float(m.group(2)))


def parse_group(text: str) -> tuple[str, re.Pattern]:
    name, sep, pattern = text.partition("=")
    if not sep or not name or not pattern:
        raise UsageError(f"--group: expected NAME=REGEX, got {text!r}")
    try:
        return name, re.compile(pattern)
    except re.error as e:
        raise UsageError(f"--group {name}: not a regular expression ({e}): {pattern!r}") from None


def read_lines(paths: list[str]) -> list[dict]:
    rows = []
    for p in paths:
        path = Path(p)
        if not path.is_file():
            raise UsageError(f"{p}: no such file (expected the split bench's --log JSON lines)")
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                raise UsageError(f"{p}:{n}: expected a JSON line of the split bench") from None
            if not isinstance(row, dict) or "recipe" not in row:
                raise UsageError(f"{p}:{n}: expected a JSON object with a 'recipe' key")
            rows.append(row)
    return rows


def value(row: dict, part: str) -> float:
    key, _, index = part.partition("#")
    if key not in row:
        raise UsageError(f"{row['recipe']}: has no {key!r} (expected a key of the bench's lines)")
    figures = re.findall(r"\d+(?:\.\d+)?", str(row[key]))
    i = int(index or 0)
    if i >= len(figures):
        raise UsageError(f"{row['recipe']}: {key!r} has no figure #{i}: {row[key]!r}")
    return float(figures[i])


def gather(rows: list[dict], groups: list[tuple[str, re.Pattern]]) -> dict[str, list[dict]]:
    """Each group's lines (later lines of the same recipe replace earlier ones)."""
    out = {}
    for name, pattern in groups:
        by_recipe = {r["recipe"]: r for r in rows if pattern.search(r["recipe"])}
        if not by_recipe:
            raise UsageError(f"--group {name}: {pattern.pattern!r} matches no line's recipe")
        out[name] = [by_recipe[k] for k in sorted(by_recipe)]
    return out


def compare(
    members: dict[str, list[dict]], parts: list[str], rules: list[Rule]
) -> tuple[list[str], bool]:
    """The table's lines and whether every rule holds."""
    names = list(members)
    ref = names[0]
    means = {p: {n: sum(value(r, p) for r in members[n]) / len(members[n]) for n in names}
             for p in parts}  # fmt: skip
    tol = {r.part: r.tolerance for r in rules}
    head = ["part", *(f"{n} ({len(members[n])})" for n in names)]
    lines = ["| " + " | ".join(head) + (" | rule |" if rules else " |"),
             "|" + "---|" * (len(head) + bool(rules))]  # fmt: skip
    ok = True
    for p in parts:
        cells = [p]
        for n in names:
            draws = " / ".join(f"{value(r, p):.1f}" for r in members[n])
            m = means[p][n]
            cells.append(
                f"{draws} ({m:.2f})" if n == ref else f"{draws} ({m - means[p][ref]:+.2f})"
            )
        if rules:
            if p in tol:
                holds = all(means[p][n] - means[p][ref] >= tol[p] for n in names[1:])
                ok &= holds
                cells.append(f">= {tol[p]:+g}: {'pass' if holds else 'FAIL'}")
            else:
                cells.append("")
        lines.append("| " + " | ".join(cells) + " |")
    return lines, ok


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("logs", nargs="+", help="the split bench's --log files")
    ap.add_argument("--group", action="append", required=True, help="NAME=REGEX (first: reference)")
    ap.add_argument(
        "--rule", action="append", default=[], help="'PART>=TOL' on the mean difference"
    )
    ap.add_argument(
        "--part", action="append", default=[], help="a part to show (default: the main ones)"
    )
    args = ap.parse_args(argv)
    try:
        if len(args.group) < 2:
            raise UsageError("--group: expected at least two (a reference and one to compare)")
        rules = [parse_rule(t) for t in args.rule]
        groups = [parse_group(t) for t in args.group]
        members = gather(read_lines(args.logs), groups)
        present = [r for rows in members.values() for r in rows]
        parts = list(args.part) or [p for p in DEFAULT_PARTS  # those every line has
                                    if all(p.partition("#")[0] in r for r in present)]  # fmt: skip
        parts += [r.part for r in rules if r.part not in parts]
        lines, ok = compare(members, parts, rules)
    except UsageError as e:
        return report(e, "bench_lipsync_compare")
    print("\n".join(lines))
    if rules:
        print("every rule holds" if ok else "a rule fails")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
