"""Kagura's Qt desktop UI (PySide6): the main window and its dialogs/overlays."""
