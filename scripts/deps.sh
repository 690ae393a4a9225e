#!/usr/bin/env bash
# Installs mnemo's build dependencies from Debian's packages when they are missing.
set -euo pipefail
pkgs=(cmake ninja-build g++ python3 libeigen3-dev libdnnl-dev libgtest-dev libgmock-dev libbenchmark-dev
      libcli11-dev nlohmann-json3-dev libyaml-cpp-dev gnuplot-nox zlib1g-dev dataset-fashion-mnist
      libonnx-dev libprotobuf-dev coinor-libcbc-dev pkg-config libopenmpi-dev openmpi-bin libjemalloc-dev python3-venv)
missing=()
for p in "${pkgs[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "deps: installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi
