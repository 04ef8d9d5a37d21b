"""`kagura avatar`: check a layered avatar, or export the built-in idol as one.

    kagura avatar check FILE [--sheet OUT.png] [--size WxH]
        what the importer found in FILE (a .psd, a PNG folder, an avatar.toml): each layer and
        its role, what is missing, what the automatic rig guessed; --sheet writes a preview
        sheet PNG (every mouth shape, the blink, head turns left and right, F1-F4)
    kagura avatar export-builtin OUT.psd [--preset NAME] [--height PX] [--force]
        the built-in idol as a layered PSD in the avatar convention (a template for artists)

Bad input is one line and exit 2; an existing OUT.psd is not overwritten without --force, and
the sheet is never written over the avatar itself.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from app.errors import UsageError

SHEET_CELL = 256


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = subparsers.add_parser("avatar", help="check a layered avatar or export the idol as a PSD")
    sub = p.add_subparsers(dest="avatar_command", required=True, parser_class=type(p))
    c = sub.add_parser("check", help="what a layered avatar (PSD, PNG folder) has and lacks")
    c.add_argument("file", type=Path, help="a .psd, a folder of PNGs, or an avatar.toml")
    c.add_argument("--sheet", type=Path, default=None, help="write a preview sheet PNG here")
    c.add_argument("--size", default="640x360", help="frame size of the sheet's cells' render")
    e = sub.add_parser("export-builtin", help="the built-in idol as a layered PSD template")
    e.add_argument("output", type=Path, help="the .psd to write")
    e.add_argument("--preset", default="studio", help="colours and lines of this preset")
    e.add_argument(
        "--height", type=int, default=None, help="canvas height in pixels (default 1160)"
    )
    e.add_argument("--force", action="store_true", help="overwrite an existing file")
    return p


def run(args: argparse.Namespace) -> int:
    if args.avatar_command == "export-builtin":
        return _export(args)
    return _check(args)


def _export(args: argparse.Namespace) -> int:
    from presets.loader import load_preset
    from render.psd_export import export_builtin

    out: Path = args.output
    if out.suffix.lower() != ".psd":
        raise UsageError(f"output {out}: expected a .psd file name")
    if out.exists() and not args.force:
        raise UsageError(f"output {out}: already exists (use --force to overwrite it)")
    if not out.parent.is_dir():
        raise UsageError(f"output {out}: no such folder {out.parent}")
    if args.height is not None and not 64 <= args.height <= 8192:
        raise UsageError(f"--height {args.height}: expected 64 to 8192 pixels")
    preset = load_preset(args.preset)
    n = export_builtin(out, preset.palette, preset.line, args.height)
    print(f"kagura: wrote {out} ({n} layers; docs/AVATARS.md says what each is)", file=sys.stderr)
    return 0


def _check(args: argparse.Namespace) -> int:
    from app.config import parse_size
    from render.avatar_doc import load_avatar
    from render.avatar_report import found_lines
    from render.layered_rig import LayeredRig

    sheet: Path | None = args.sheet
    if sheet is not None:
        if sheet.suffix.lower() != ".png":
            raise UsageError(f"--sheet {sheet}: expected a .png file name")
        if sheet.resolve() == args.file.resolve() or (
            args.file.is_dir() and args.file.resolve() in sheet.resolve().parents
        ):
            raise UsageError(f"--sheet {sheet}: would write inside the avatar {args.file}")
    size = parse_size(args.size)
    doc = load_avatar(args.file)
    rig = LayeredRig(doc)
    print(f"avatar: {doc.path}")
    print(f"canvas: {doc.width}x{doc.height}, {len(doc.layers)} layers (back to front)")
    for i, layer in enumerate(doc.layers):
        l_, t, r, b = layer.bounds
        extra = f", spring {rig.springs[i][0].w / 6.2832:.1f} Hz" if rig.springs[i] else ""
        depth = f"depth {rig.depth[i]:+.2f}" if rig.part[i] == "head" else " " * 11
        print(
            f"  {layer.name!r:<24} {layer.role:<13} {rig.part[i]:<6} {depth}"
            f"  at {l_},{t} {r - l_}x{b - t}{extra}"
        )
    for line in found_lines(doc):
        print(line)
    print(
        f"rig: neck pivot {rig.neck[0]:.0f},{rig.neck[1]:.0f}; head radius {rig.radius:.0f}; "
        f"hip {rig.hip[0]:.0f},{rig.hip[1]:.0f}"
    )
    for text in doc.notices:
        print(f"note: {text}")
    if sheet is not None:
        from render.avatar_sheet import preview_sheet

        sheet.parent.mkdir(parents=True, exist_ok=True)
        preview_sheet(doc, size, SHEET_CELL).save(sheet)
        print(f"kagura: wrote {sheet}", file=sys.stderr)
    return 0
