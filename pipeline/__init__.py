"""Kagura's frame graph: frames and clocks, the stage protocol, the runner, stages and sinks."""
