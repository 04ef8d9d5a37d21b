"""Errors of audio/ that callers catch without importing the decoder (and FFmpeg) itself."""


class AudioError(ValueError):
    """An audio file could not be used; the message is one line and names the file."""
