#!/usr/bin/env bash
# Installs the Debian packages the project builds with. Idempotent: apt-get skips what is
# already installed, and the package index is refreshed only when a package is missing.
set -euo pipefail

packages=(
  build-essential cmake ninja-build clang clang-format libclang-rt-14-dev
  libasio-dev libspdlog-dev libcli11-dev libgtest-dev libgmock-dev libbenchmark-dev
  libconcurrentqueue-dev nlohmann-json3-dev libyaml-cpp-dev libssl-dev libexpected-dev
  python3-numpy libtinyxml2-dev mold pkgconf libxxhash-dev python3-dev pybind11-dev
  python3-pytest libeigen3-dev
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  sudo_cmd=()
  [[ $(id -u) -ne 0 ]] && sudo_cmd=(sudo)
  echo "setup: installing ${missing[*]}"
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq "${missing[@]}"
fi
