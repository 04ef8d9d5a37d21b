"""Acceleration helpers for GPU stages. Every import here is CPU-safe (torch only; CUDA is
touched only when a function that needs it is called).

    pipeline.accel.priority        request_realtime_priority(), high_priority_stream(device)
    pipeline.accel.graphs          GraphCache, GraphCaptureError, warm_up()
    pipeline.accel.transfer        pinned_empty(), Uploader, Readback (pinned host buffers +
                                   async copies)
    pipeline.accel.onnx_export     export_onnx(), check_onnx()  (imports onnx lazily)
    pipeline.accel.tensorrt_backend  tensorrt_status(), engine_cache_key(), build_engine(),
                                   TrtModule  (imports tensorrt lazily)
    pipeline.accel.timing          cuda_times(fn, n)  (CUDA events, read after the loop)
"""

from pipeline.accel.graphs import GraphCache, GraphCaptureError, warm_up
from pipeline.accel.priority import high_priority_stream, request_realtime_priority
from pipeline.accel.transfer import Readback, Uploader, pinned_empty

__all__ = [
    "GraphCache",
    "GraphCaptureError",
    "Readback",
    "Uploader",
    "high_priority_stream",
    "pinned_empty",
    "request_realtime_priority",
    "warm_up",
]
