"""Sinks: the ends of the frame graph (video files, stills, later the virtual camera).

Import the sink you need from its module (`pipeline.sinks.video_file`, …); this package
imports nothing itself so that one sink's dependencies never load with another's.
`pipeline.sinks.segmented` is the MP4 sink that encodes with several libx264 processes at once
(offline renders on many cores); `core.workers` holds the shared memory and process
helpers it shares with the multi-process idol render (`render.pool`).
"""
