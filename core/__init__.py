"""Kagura's leaf package: small types and helpers every other package builds on.

Nothing here imports from `app/`, `audio/`, `pipeline/`, `render/` or `training/`.
"""
