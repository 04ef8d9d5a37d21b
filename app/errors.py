"""Errors the command line reports as one line and exit status 2 (bad input, not a bug)."""


class UsageError(ValueError):
    """A bad argument or input file, described in one line for the user."""


def user_error_types() -> tuple[type[BaseException], ...]:
    """Exception types that mean "the user's input is wrong" rather than "Kagura is broken"."""
    from audio.errors import AudioError
    from pipeline.diffusion.models import ModelError
    from pipeline.graph import GraphError
    from presets.loader import PresetError

    return (UsageError, AudioError, PresetError, GraphError, ModelError)
