#!/usr/bin/env bash
# Configures and builds mnemo (Release) into ${MNEMO_BUILD_DIR:-build}.
# fully_connected's backward GEMMs use MKL (PyPI's mkl-devel, installed here into BUILD/venv-mkl
# on the first build; about 1 GB): on Intel CPUs it measured faster than oneDNN there
# (docs/BENCHMARKS.md "MKL for the backward products"). MNEMO_MKL=0 builds without it (oneDNN's
# sgemm; on AMD CPUs MKL measured slowest).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
build=${MNEMO_BUILD_DIR:-build}
mkl_root=""
if [ "${MNEMO_MKL:-1}" != 0 ]; then
  venv="$build/venv-mkl"
  if ! compgen -G "$venv/lib/libmkl_core.so*" >/dev/null || [ ! -f "$venv/include/mkl_cblas.h" ]; then
    echo "build: installing PyPI's mkl-devel into $venv (MNEMO_MKL=0 builds without MKL)"
    mkdir -p "$build"
    if ! { python3 -m venv "$venv" && "$venv/bin/pip" install -q mkl-devel; }; then
      echo "build: error: could not install mkl-devel into $venv (is PyPI reachable?); MNEMO_MKL=0 builds without MKL" >&2
      exit 1
    fi
  fi
  mkl_root=$(cd "$venv" && pwd)
fi
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DMNEMO_MKL_ROOT="$mkl_root" "$@" >/dev/null
ninja -C "$build" -j"$(nproc)"
