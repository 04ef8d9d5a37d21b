"""`kagura devices` — list the microphones (input devices) live capture can use.

    kagura devices

Prints one row per input device: the index and name to pass as a capture device (a name
substring works too), host API, input channels, default sample rate; `*` marks the default.
No input devices is not an error: it prints a hint and exits 0.
"""

from __future__ import annotations

import argparse
import sys

HINT = (
    "no input devices found; connect a microphone, or start a sound server "
    "(PulseAudio/PipeWire) and check that PortAudio can reach it"
)


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = subparsers.add_parser("devices", help="list input devices (microphones) for live capture")
    p.set_defaults(func=run)
    return p


def format_table(devices: list) -> str:
    rows = [("", "index", "name", "host API", "ch", "rate")]
    rows += [
        (
            "*" if d.is_default else "",
            str(d.index),
            d.name,
            d.host_api,
            str(d.channels),
            str(d.default_rate),
        )
        for d in devices
    ]
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    right = {1, 4, 5}  # numbers
    lines = [
        " ".join(
            c.rjust(w) if i in right else c.ljust(w)
            for i, (c, w) in enumerate(zip(r, widths, strict=True))
        ).rstrip()
        for r in rows
    ]
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    from audio.capture import list_input_devices

    devices = list_input_devices()
    if not devices:
        print(HINT)
        return 0
    print(format_table(devices))
    print("* default input; use an index or part of a name as the capture device")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="kagura")
    add_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["devices", *(sys.argv[1:] if argv is None else argv)])
    from audio.errors import AudioError

    try:
        return args.func(args)
    except AudioError as exc:  # e.g. PortAudio missing: one line, like the kagura CLI
        print(f"kagura: error: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
