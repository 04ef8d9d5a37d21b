#!/usr/bin/env bash
# On the GPU machine (the device tool), from the repo root: `kagura serve` against a render in
# its own process, cuda defaults (Kagura's model + temporal, x3 to 1080p) on SECONDS (3) of the
# demo song. Two served renders (the second through the chain the first left set up) and one
# --no-server render; their frames compared; the server stopped with SIGTERM.
# Everything goes to $OUT/serve_check.log as it happens (a call cut short still brings it back);
# each step has its own time limit.
set -uo pipefail
source scripts/gpu_env.sh || exit 1
exec > >(tee "$OUT/serve_check.log") 2>&1
export KAGURA_SERVE_SOCKET=/tmp/kagura-check.sock
SONG=audio/assets/demo_song.ogg
OPTS=(--device cuda --size 1920x1080 --upscale 3)
since() { awk "BEGIN { printf \"%.2f\", $EPOCHREALTIME - $1 }"; }
timed() { local t0=$EPOCHREALTIME; "$@"; echo "rc $? in $(since "$t0") s"; }
t0=$EPOCHREALTIME
timeout 400 python3 -m app.cli serve "${OPTS[@]}" >"$OUT/serve.out" 2>"$OUT/serve.err" &
server=$!
for _ in $(seq 600); do grep -q listening "$OUT/serve.out" && break; sleep 0.2; done
echo "server listening after $(since "$t0") s:"; cat "$OUT/serve.out"
for o in a b; do
    timed timeout 120 python3 -m app.cli render $SONG -o /tmp/s_$o.mp4 "${OPTS[@]}" --seconds "${SECONDS_:-3}" -y --quiet
done
timed timeout 120 python3 -m app.cli render $SONG -o /tmp/l.mp4 "${OPTS[@]}" --seconds "${SECONDS_:-3}" -y --quiet --no-server 2>&1 | filter
python3 - <<'PY'
import av
import numpy as np
def frames(p):
    with av.open(p) as c:
        return [f.to_ndarray(format="rgb24").astype(np.int16) for f in c.decode(video=0)]
local = frames("/tmp/l.mp4")
for name in ("/tmp/s_a.mp4", "/tmp/s_b.mp4"):
    served = frames(name)
    d = [np.abs(a - b) for a, b in zip(served, local)]
    same = sum(int(x.max() == 0) for x in d)
    print(f"{name} against /tmp/l.mp4: {len(served)} / {len(local)} frames, {same} identical, "
          f"max |diff| {max(int(x.max()) for x in d)}, mean {np.mean([x.mean() for x in d]):.4f}")
PY
kill -TERM $server; wait $server; echo "server exit status $?"
grep -v "float32" "$OUT/serve.err" | tail -15
[ -e "$KAGURA_SERVE_SOCKET" ] && echo "socket left behind" || echo "socket removed"
