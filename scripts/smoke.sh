#!/usr/bin/env bash
# The bring-up smoke on the simulated device: installs what the build needs, builds, generates
# the tiny functional calbin with its golden set, and runs `calrt smoke` against it.
# Extra arguments go to `calrt smoke` (e.g. --cases all, --json report.json).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh build -- simdev calrt
build/simdev/tool/simdev gen --preset tiny --seed 1 --no-long --force --out build/calbins/tiny
build/runner/calrt smoke build/calbins/tiny --device sim "$@"
