"""What the importer found in a layered avatar and what it lacks, as lines for a person.

One place for `kagura avatar check` and the live app's avatar window, so both name the same
missing layers the same way.
"""

from __future__ import annotations

from render.avatar_roles import EYES, MOUTHS

OPTIONAL = ("brows", "hair_back", "hair_front", "head", "body", "background", "blush")


def found_lines(doc) -> list[str]:
    """The mouths and eyes (each marked `(missing)` when absent) and the optional roles not
    found, one line each."""
    roles = doc.roles()
    lines = [
        "mouths: " + ", ".join(f"{m}{'' if m in roles else ' (missing)'}" for m in MOUTHS),
        "eyes:   " + ", ".join(f"{e}{'' if e in roles else ' (missing)'}" for e in EYES),
    ]
    absent = [o for o in OPTIONAL if o not in roles]
    if absent:
        lines.append("not found (optional): " + ", ".join(absent))
    return lines


def missing(doc) -> list[str]:
    """Every convention role the avatar has no layer for (mouths and eyes first)."""
    roles = doc.roles()
    return [r for r in (*MOUTHS, *EYES, *OPTIONAL) if r not in roles]


def summary(doc) -> str:
    """One line: the file, its canvas and layer count, and what is missing."""
    gone = missing(doc)
    lacks = f"; missing {', '.join(gone)}" if gone else "; nothing missing"
    return f"{doc.path.name}: {doc.width}x{doc.height}, {len(doc.layers)} layers{lacks}"
