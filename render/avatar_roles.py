"""Layer roles of a layered avatar, found by name (case-insensitive), with the aliases in use.

A role says what the rig does with a layer: which mouth or eye state shows it, whether it turns
with the head, lags on a spring (hair) or stays put (background). docs/AVATARS.md lists the
names; a manifest can give any layer any role.

Names are normalised before the lookup: lower case, spaces, dots and hyphens as "_", repeated
"_" collapsed. Inside a group named like a mouth ("mouth", "口") or eyes ("eyes", "目") a
child's name is looked up with that prefix too, so a "mouth" group of "a", "i", "closed" works.
"""

from __future__ import annotations

import re

MOUTHS = ("mouth_a", "mouth_i", "mouth_u", "mouth_e", "mouth_o", "mouth_closed")
EYES = ("eyes_open", "eyes_half", "eyes_closed")
# F1-F4 offline (the motion track); the live app's F4 is a wink (pipeline/live.py)
EXPRESSION_ROLES = ("expr_happy", "expr_sad", "expr_surprised", "expr_angry", "expr_wink")
# roles the rig knows, back to front in the order a PNG folder without `order` is drawn
ROLES = (
    "background",
    "hair_back",
    "body",
    "head",
    "blush",
    *EYES,
    *MOUTHS,
    "brows",
    "hair_front",
    "hair",  # any other hair: springs like hair_front, drawn where it lies
    *EXPRESSION_ROLES,
    "other",
)
HEAD_ROLES = frozenset(
    {"head", "blush", *EYES, *MOUTHS, "brows", "hair_front", "hair_back", "hair", *EXPRESSION_ROLES}
)
HAIR_ROLES = frozenset({"hair_back", "hair_front", "hair"})

_ALIASES: dict[str, tuple[str, ...]] = {
    # PNGTuber tools and Preston Blair / Rhubarb mouth charts; Japanese PSD names (あいうえお)
    "mouth_a": ("a", "mouth_aa", "mouth_ai", "mouth_open", "口_あ", "口あ", "あ"),
    "mouth_i": ("i", "mouth_ii", "mouth_ee", "口_い", "口い", "い"),
    "mouth_u": ("u", "mouth_uu", "mouth_wq", "mouth_w", "口_う", "口う", "う"),
    "mouth_e": ("e", "mouth_eh", "mouth_etc", "口_え", "口え", "え"),
    "mouth_o": ("o", "mouth_oh", "口_お", "口お", "お"),
    "mouth_closed": (
        "closed",
        "n",
        "mouth_n",
        "mouth_m",
        "mouth_mbp",
        "mouth_rest",
        "mouth_close",
        "mouth_shut",
        "口_ん",
        "口ん",
        "ん",
        "口_閉じ",
        "閉じ口",
    ),
    "eyes_open": ("eyes", "eye_open", "eyes_opened", "open", "目", "目_開き", "開き目"),
    "eyes_half": ("eye_half", "eyes_halfopen", "eyes_half_open", "half", "半目", "目_半"),
    "eyes_closed": (
        "eye_closed",
        "eyes_close",
        "eye_close",
        "blink",
        "closed_eyes",
        "目_閉じ",
        "閉じ目",
    ),
    "brows": ("brow", "eyebrow", "eyebrows", "眉", "眉毛"),
    "hair_back": ("back_hair", "hair_behind", "後ろ髪", "後髪"),
    "hair_front": ("front_hair", "bangs", "fringe", "前髪"),
    "head": ("face", "顔", "頭", "輪郭"),
    "body": ("torso", "体", "胴体", "身体"),
    "background": ("bg", "back_ground", "背景"),
    "blush": ("cheek_blush", "頬染め", "照れ"),
    "expr_happy": ("happy", "f1", "expression_happy", "joy", "喜"),
    "expr_sad": ("sad", "f2", "expression_sad", "哀"),
    "expr_surprised": ("surprised", "f3", "expression_surprised", "surprise", "驚"),
    "expr_angry": ("angry", "f4", "expression_angry", "anger", "怒"),
    "expr_wink": ("wink", "eyes_wink", "expression_wink", "ウインク", "ウィンク"),
}
_LOOKUP = {role: role for role in ROLES}
for _role, _names in _ALIASES.items():
    for _name in _names:
        _LOOKUP[_name] = _role

# the group names whose children are named without the prefix ("mouth" group of "a", "i", …)
_GROUP_PREFIX = {"mouth": "mouth_", "口": "mouth_", "eyes": "eyes_", "eye": "eyes_", "目": "eyes_"}


def normalise(name: str) -> str:
    """'Mouth A.png' → 'mouth_a'."""
    text = re.sub(r"[\s.\-]+", "_", name.strip().lower())
    return re.sub(r"_+", "_", text).strip("_")


def group_prefix(group_name: str) -> str | None:
    """'mouth_' for a group that holds mouth shapes by their short names, else None."""
    return _GROUP_PREFIX.get(normalise(group_name))


def role_of(name: str, prefix: str | None = None) -> str | None:
    """The role a layer name means (None: an ordinary layer). `prefix`: the enclosing group's
    (group_prefix), tried first."""
    key = normalise(name)
    found = _LOOKUP.get(prefix + key) if prefix else None
    if found is None:
        found = _LOOKUP.get(key)
    if found is None and re.fullmatch(r"(hair|ahoge|tail|ponytail|twintail|pigtail)\w*", key):
        return "hair"
    return found


def aliases() -> dict[str, tuple[str, ...]]:
    """Role → its aliases (for docs/AVATARS.md and `kagura avatar check`)."""
    return dict(_ALIASES)
