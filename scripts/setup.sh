#!/usr/bin/env bash
# Installs what attnlab needs on Debian 12 (only what is missing) and builds it in build/.
# Safe to run twice: installed packages are skipped and the build is incremental.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(build-essential cmake g++ pkg-config git clang-format python3
          libfmt-dev nlohmann-json3-dev libcli11-dev libgtest-dev libgmock-dev libbenchmark-dev
          libhwy-dev libcpp-httplib-dev librsvg2-bin
          libopenblas-dev libpcre2-dev   # the model layer: linear layers (CBLAS), the BPE pre-tokenizer
          libutf8proc-dev                # the model layer: Unicode normalization (tokenizer.json's NFC)
          libdnnl-dev ocl-icd-opencl-dev # the model layer: bf16 products (AVX-512 BF16, AMX tiles); oneDNN's CMake file wants OpenCL's
          # the Python module (src/python/, docs/python.md) and its tests
          python3-dev pybind11-dev python3-numpy python3-pytest
          python3-distributed                  # attnlab.survey on a Dask cluster (docs/survey.md), and its tests
          python3-nbclient python3-ipykernel   # the tests run docs/notebooks/tour.ipynb
          # the page's engine: the attention code compiled to WebAssembly (src/wasm/)
          clang-14 lld-14 wasi-libc libc++-14-dev-wasm32 libc++abi-14-dev-wasm32 libclang-rt-14-dev-wasm32
          # the sanitizer build (build-fuzz/): libFuzzer, ASan and UBSan runtimes, clang's OpenMP
          libfuzzer-14-dev libclang-rt-14-dev libomp-14-dev)
if [ "${ATTNLAB_WITH_BROWSER:-0}" = 1 ]; then
  packages+=(chromium)
  command -v node >/dev/null && command -v npm >/dev/null || packages+=(nodejs npm)
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "attnlab setup: installing ${missing[*]}"
  sudo=""
  [ "$(id -u)" = 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
fi

[ "${ATTNLAB_SETUP_PACKAGES_ONLY:-0}" = 1 ] && exit 0  # scripts/test.sh: the packages now, the build later

# Line tables only (-g1): backtraces keep file and line, and the build takes a third less time
# than with full debug information; the command and the unit tests compile in batches.
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG" \
  -DATTNLAB_UNITY_BUILD=ON >/dev/null
cmake --build build -j"$(nproc)"
