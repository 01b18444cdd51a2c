#!/usr/bin/env bash
# Installs this build into a scratch prefix and uses it as an outside project would:
#   1. a consumer project (tests/install/consumer) finds the package with find_package(calrt),
#      builds against calrt::abi and opens the installed libcalrt_sim.so by path;
#   2. the installed vendor-shim skeleton builds on its own and the installed calrt loads it;
#   3. the installed calrt runs the bring-up smoke through the installed simulator library;
#   4. pkg-config finds the headers (a C file compiles with its flags), and the libraries
#      carry their SONAMEs;
#   5. the installed Python package (when built) runs the example smoke through the installed
#      simulator library, with nothing of the build tree on its path.
# Usage: consumer_test.sh BUILD_DIR SOURCE_DIR CALBIN SCRATCH C_COMPILER CXX_COMPILER
set -euo pipefail
build=$1 source=$2 calbin=$3 scratch=$4 cc=$5 cxx=$6
prefix=$scratch/prefix
rm -rf "$scratch"
mkdir -p "$scratch"

step() { printf '\n== %s\n' "$*"; }

step "install into $prefix"
cmake --install "$build" --prefix "$prefix" >"$scratch/install.log"
for f in include/calrt/abi/calrt.h include/calrt/abi/calrt_ext.h include/calrt/abi/calrt.hpp \
  include/calrt/abi/calrt_loader.hpp bin/calrt bin/simdev lib/cmake/calrt/calrtConfig.cmake \
  lib/pkgconfig/calrt.pc share/calrt/config/calculet-default.yaml \
  share/calrt/shim_skeleton/CMakeLists.txt share/doc/calrt/CONFORMANCE.md; do
  [[ -e "$prefix/$f" ]] || { echo "missing from the installed tree: $f"; exit 1; }
done
libdir=$(dirname "$(find "$prefix" -name 'libcalrt_sim.so.*' -print -quit)")
for lib in calrt_sim calrt_client calrt_validate; do
  soname=$(objdump -p "$libdir/lib$lib.so" | awk '/SONAME/ { print $2 }')
  [[ "$soname" == "lib$lib.so.0" ]] || { echo "lib$lib.so has SONAME '$soname'"; exit 1; }
done
ls "$prefix/share/calrt/scenarios/"*.yaml >/dev/null

common=(-G Ninja -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_C_COMPILER="$cc"
  -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_BUILD_TYPE=Release)

step "consumer project against the installed package"
cmake -S "$source/tests/install/consumer" -B "$scratch/consumer" "${common[@]}" >/dev/null
cmake --build "$scratch/consumer" >/dev/null
"$scratch/consumer/consumer" "$calbin"
"$scratch/consumer/consumer_c"

step "vendor-shim skeleton, out of tree"
cp -r "$prefix/share/calrt/shim_skeleton" "$scratch/shim"
cmake -S "$scratch/shim" -B "$scratch/shim/build" "${common[@]}" >/dev/null
cmake --build "$scratch/shim/build" >/dev/null
shim=$scratch/shim/build/libcalrt_shim_skeleton.so
# The skeleton implements nothing yet: conformance loads it and reports its clauses unmet.
status=0
"$prefix/bin/calrt" conformance --device "$shim" --calbin "$calbin" --only VER.1 \
  >"$scratch/shim.log" 2>&1 || status=$?
grep -q "VER.1" "$scratch/shim.log" || { cat "$scratch/shim.log"; exit 1; }
[[ $status -eq 1 ]] || { echo "conformance on the skeleton exited $status, expected 1"; exit 1; }
echo "the installed calrt loaded the skeleton and judged it (exit 1, as it implements nothing)"

step "bring-up smoke through the installed simulator library"
"$prefix/bin/calrt" smoke "$calbin" --device "$libdir/libcalrt_sim.so"

step "pkg-config"
export PKG_CONFIG_PATH=$libdir/pkgconfig
pkg-config --modversion calrt
# shellcheck disable=SC2046
"$cc" -o "$scratch/pc_consumer" "$source/tests/install/consumer/consumer_c.c" \
  $(pkg-config --cflags --libs calrt)
"$scratch/pc_consumer"
[[ -e "$(pkg-config --variable=sim_library calrt)" ]]

pydir=$prefix/lib/python3/dist-packages
if [[ -e "$pydir/calrt/__init__.py" ]]; then
  step "Python package from the installed tree"
  PYTHONPATH=$pydir PYTHONDONTWRITEBYTECODE=1 /usr/bin/python3 \
    "$prefix/share/calrt/python/smoke.py" "$calbin" --cases len2,len17 | tee "$scratch/py.log"
  grep -q "smoke PASS" "$scratch/py.log"
  PYTHONPATH=$pydir /usr/bin/python3 -c \
    "import calrt; assert calrt.open_device('sim').status()['chip_count'] == 2"
fi
echo "install consumer test: ok"
