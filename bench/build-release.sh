#!/usr/bin/env bash
# Builds hookproxy as `make build` does (the Makefile's SWIFT_BUILD_FLAGS: release, with the startup layout of
# linker/startup.order) and prints the binary's path. The bench scripts build through it, so what they measure is
# what `make run` and the Docker image run, and .build/release is never rebuilt from scratch because two scripts
# asked for it with different flags.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
read -r -a FLAGS <<<"$(make -s --no-print-directory print-build-flags)"
swift build "${FLAGS[@]}" --product hookproxy >&2
echo "$(swift build "${FLAGS[@]}" --show-bin-path)/hookproxy"
