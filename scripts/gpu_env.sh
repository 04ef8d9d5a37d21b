# Sourced on the GPU machine (the device tool), from the repo root: the libraries and wheels
# that machine lacks (.gl/, .whl/; see docs/BENCHMARKS.md), on the paths Kagura expects.
# Skia links libEGL/libGL/libX11, which that image lacks: the GL loaders go to / (as the device
# notes advise), the X11 client libraries into a private folder.
for f in .gl/*.deb; do dpkg -x "$f" /; done
mkdir -p /tmp/xroot; for f in .gl/x/*.deb; do dpkg -x "$f" /tmp/xroot; done; ldconfig
export LD_LIBRARY_PATH=/tmp/xroot/usr/lib/x86_64-linux-gnu:/tmp/xroot/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
# The wheels travel either as they are, or (to fit the 64 MiB the device tool carries) unpacked
# into one folder and packed as .whl/site.tar.xz — the same files, xz compresses them better.
mkdir -p /tmp/site
if [ -f .whl/site.tar.xz ]; then tar -xJf .whl/site.tar.xz -C /tmp/site || return 1; fi
if compgen -G ".whl/*.whl" >/dev/null; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || return 1
fi
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
# That machine sets PYTHONDONTWRITEBYTECODE and its torch has no __pycache__, so every process
# compiled torch's sources again (seconds per start-up, docs/BENCHMARKS.md); a user's pip install
# has the bytecode. Keep it in a writable folder of its own, as a user's machine would.
unset PYTHONDONTWRITEBYTECODE
export PYTHONPYCACHEPREFIX=/tmp/pycache
[ -f .whl/realesr-animevideov3-x4.bin ] && export KAGURA_ANIMEVIDEOV3_BIN=$PWD/.whl/realesr-animevideov3-x4.bin
export OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
# the libraries' chatter (accelerate hints, float32 casts, progress bars) out of the logs
filter() { grep -v "accelerate\|^\`\`\`\|pip install\|^\.$\|should be kept in float32\|^$\|Loading weights\|^{"; }
