#!/usr/bin/env bash
# On the GPU machine (the device tool), from the repo root, carrying .whl/ and .gl/: the live
# lead. `kagura bench live --headless` at 60 fps x3, 10 s runs, ROUNDS rounds of the ARMS below,
# interleaved (e.g. --[no-]relearn-after-setup, --frame-window N). Every run writes a
# per-frame trace (--trace); traces and logs come back as $OUT/lead.tar.xz (docs/BENCHMARKS.md,
# "live-lead-2026-12-04"). STALL_WATCH=MS adds `--stall-watch MS` to every run (its events
# beside each trace: what every thread was in when the process stalled, core/stall_watch.py).
# Summarise the traces with `python3 scripts/live_traces.py /tmp/lead/*.jsonl`, replay lead
# policies over them with `python3 scripts/lead_replay.py`.
set -uo pipefail
source scripts/gpu_env.sh || exit 1
ROUNDS=${ROUNDS:-4}
mkdir -p /tmp/lead
run() {  # name, extra options
  local name=$1; shift
  python3 -m app.cli bench live --headless --device cuda --fps 60 --present-lead-ms 4 \
    --seconds 10 --diffusion kagura --upscale 3 --no-write --trace /tmp/lead/$name.jsonl \
    ${STALL_WATCH:+--stall-watch $STALL_WATCH} "$@" \
    >/tmp/lead/$name.log 2>&1
  tail -1 /tmp/lead/$name.log | python3 -c "
import json,sys; r=json.loads(sys.stdin.read()); p=r['latency_parts_ms']
print('$name', r['audio_to_photon_ms'], 'lead', p['lead'], 'late', r['late_ticks'], 'rep', r['repeated'], 'lower', (r.get('quality') or {}).get('lower_rungs_s'))" 2>&1 | tail -1
}
# ARMS: "name|options;name|options" (default: the shipped configuration, one arm per preset)
ARMS=${ARMS:-"s|--preset studio;c|--preset cyberpunk;i|--preset ink-wash"}
IFS=';' read -ra arms <<<"$ARMS"
for i in $(seq 1 $ROUNDS); do
  for arm in "${arms[@]}"; do
    run "${arm%%|*}_$i" ${arm#*|}
  done
done
tar -cJf $OUT/lead.tar.xz -C /tmp lead
