#!/usr/bin/env bash
# On the lent GPU machine (its CPUs; from the repo root, .lip carried; see
# scripts/build_lipsync_bundle.sh): split-bench jobs side by side, two threads each, their JSON
# lines to $OUT/split.jsonl and each job's last lines to $OUT/jobs.txt.
#   JOBS="base:0 base:1 extra-texts:0 extra-texts:1" ARGS="--with-reverb" LIMIT=560 \
#       bash scripts/gpu_lipsync_split.sh
# A job is RECIPE:SEED, or "shipped" (the shipped net scored: a check of the path that trains
# nothing); ARGS go to every job (e.g. --full); LIMIT: seconds before they are
# stopped (the device tool's calls last 600 s at most); THREADS: each job's threads (2).
# Builds only, the nets back to score here:
#   JOBS="base:0 lifter:0" ARGS="--build-only --save-dir $OUT/nets" bash scripts/gpu_lipsync_split.sh
set -uo pipefail
mkdir -p /tmp/site /tmp/lipjobs "${OUT:=/tmp/out}"
tar -xJf .lip/site.tar.xz -C /tmp/site
export PYTHONPATH=$PWD:/tmp/site KAGURA_CACHE_DIR=/tmp/kagura-cache PYTHONUNBUFFERED=1
python3 scripts/lipsync_bundle.py unpack .lip
pids=()
for job in ${JOBS:?}; do
    what=(--recipe "${job%%:*}" --seeds "${job##*:}")
    [ "$job" = shipped ] && what=(--shipped)
    # shellcheck disable=SC2086
    OMP_NUM_THREADS=${THREADS:-2} MKL_NUM_THREADS=${THREADS:-2} timeout "${LIMIT:-560}" python3 scripts/lipsync_bundle.py \
        split .lip "${what[@]}" ${ARGS:-} --log "/tmp/lipjobs/$job.jsonl" \
        >"/tmp/lipjobs/$job.out" 2>&1 &
    pids+=($!)
done
wait "${pids[@]}"
cat /tmp/lipjobs/*.jsonl >"$OUT/split.jsonl" 2>/dev/null
tail -n 5 /tmp/lipjobs/*.out >"$OUT/jobs.txt"
cut -c1-300 "$OUT/split.jsonl"
