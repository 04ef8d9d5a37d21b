"""`kagura bench farm` (placeholder, filled below)."""
