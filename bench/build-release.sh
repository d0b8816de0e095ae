#!/usr/bin/env bash
# Builds hookproxy as `make build` does (the Makefile's SWIFT_BUILD_FLAGS: release, with the startup layout of
# linker/startup.order) and prints the binary's path. The bench scripts build through it, so what they measure is
# what `make run` and the Docker image run, and .build/release is never rebuilt from scratch because two scripts
# asked for it with different flags.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
read -r -a FLAGS <<<"$(make -s --no-print-directory print-build-flags)"
BIN="$(swift build "${FLAGS[@]}" --show-bin-path)/hookproxy"
# SwiftPM does not track the order file as an input: a binary older than it is linked again.
[ -f "$BIN" ] && [ linker/startup.order -nt "$BIN" ] && rm -f "$BIN"
swift build "${FLAGS[@]}" --product hookproxy >&2
# A list whose names the code no longer has lays start-up out worse (idle RSS): say when to renew it.
if command -v nm >/dev/null; then
  gone=$(comm -23 <(sort -u linker/startup.order) <(nm --defined-only "$BIN" | awk '{print $3}' | sort -u) | wc -l)
  total=$(wc -l <linker/startup.order)
  [ $((gone * 50)) -gt "$total" ] && echo "linker/startup.order: $gone of its $total functions are no longer in the binary; \
renew it with make startup-order (bench/startup-order.sh)" >&2
fi
echo "$BIN"
