#!/usr/bin/env bash
# On the GPU machine (the device tool), from the repo root: where `kagura render --device cuda`
# spends the time before its first frame (issue 16). Writes $OUT/startup.txt: torch's import and
# CUDA's start split apart, one traced render's phases, and the setup functions of a profiled
# render and of `kagura bench live --headless` (cProfile of the main thread, cumulative seconds).
#   bash scripts/gpu_startup_profile.sh [render options, default: 1080p x3 of the demo song]
set -uo pipefail
source scripts/gpu_env.sh || exit 1
song=audio/assets/demo_song.ogg
opts=("$@")
[ ${#opts[@]} -eq 0 ] && opts=(--size 1920x1080 --upscale 3)
log=$OUT/startup.txt
{
echo "== torch and CUDA, a fresh process each"
for i in 1 2; do
python3 - <<'PY'
import time
t0 = time.perf_counter()
import torch
t1 = time.perf_counter()
ok = torch.cuda.is_available()
t2 = time.perf_counter()
torch.cuda.init()
t3 = time.perf_counter()
torch.zeros(1, device="cuda").add_(1).item()
t4 = time.perf_counter()
print(f"import torch {t1 - t0:.2f} s, is_available {t2 - t1:.2f} s, init {t3 - t2:.2f} s, "
      f"first kernel {t4 - t3:.2f} s")
PY
done
echo "== import torch: the slowest modules by their own time (-X importtime, us)"
python3 -X importtime -c "import torch" 2>&1 | sort -t'|' -k1.13n | tail -12
echo "== one untimed render (fills the caches), then a traced one"
python3 -m app.cli render $song -o /tmp/r0.mp4 --device cuda --quiet -y "${opts[@]}"
rm -f /tmp/trace.jsonl
KAGURA_TRACE=/tmp/trace.jsonl python3 -m app.cli render $song -o /tmp/r1.mp4 --device cuda --quiet -y "${opts[@]}"
python3 - <<'PY'
import json
ev = [json.loads(l) for l in open("/tmp/trace.jsonl")]
t0 = ev[0]["t_ns"]
for e in ev:
    print(f"  {(e['t_ns'] - t0) / 1e9:7.3f} s  {e['event']}")
PY
echo "== cProfile of a render's main thread (setup functions, cumulative s)"
# main(), not the `kagura` script: the script's fast exit would skip writing the profile
# (from a file: spawned render and encoder processes re-import the main module by its path)
cat > /tmp/profile_render.py <<'PY'
import cProfile, pstats, sys
from app import cli
args = ["render", sys.argv[1], "-o", "/tmp/r2.mp4", "--device", "cuda", "--quiet", "-y", *sys.argv[2:]]
if __name__ == "__main__":
    cProfile.run("cli.main(args)", "/tmp/render.prof")
    pstats.Stats("/tmp/render.prof").sort_stats("cumulative").print_stats(70)
PY
python3 /tmp/profile_render.py $song "${opts[@]}"
echo "== cProfile of kagura live (headless) to its first frames (cumulative s)"
cat > /tmp/profile_live.py <<'PY'
import cProfile, pstats
from app import cli
args = ["bench", "live", "--headless", "--device", "cuda", "--no-write", "--seconds", "3", "--warm-up", "0"]
if __name__ == "__main__":
    cProfile.run("cli.main(args)", "/tmp/live.prof")
    pstats.Stats("/tmp/live.prof").sort_stats("cumulative").print_stats(60)
PY
python3 /tmp/profile_live.py
} > "$log" 2>&1
tail -5 "$log"
