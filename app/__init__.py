"""Command line and desktop app."""
