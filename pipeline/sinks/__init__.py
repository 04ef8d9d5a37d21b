"""Sinks: the ends of the frame graph (video files, stills, later the virtual camera).

Import the sink you need from its module (`pipeline.sinks.video_file`, …); this package
imports nothing itself so that one sink's dependencies never load with another's.
"""
