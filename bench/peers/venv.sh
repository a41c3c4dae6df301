#!/usr/bin/env bash
# Creates (or refreshes) bench/peers/.venv from bench/peers/requirements.txt
# and prints its python. Only bench/peers uses it; the project's own
# environment (scripts/setup.sh, scripts/requirements.txt) is left alone.
#
#   bench/peers/venv.sh [venv-dir]
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
venv=${1:-$here/.venv}
req=$here/requirements.txt
stamp=$venv/.requirements
if [[ -x $venv/bin/python ]] && cmp -s "$req" "$stamp"; then
  echo "$venv/bin/python"
  exit 0
fi
[[ -x $venv/bin/python ]] || python3 -m venv "$venv" >&2
# deepspeed's setup.py imports torch: everything else first, then deepspeed
# without build isolation against that torch (no ops prebuilt; the CPU
# accelerator builds the one it needs on first use).
grep -v '^deepspeed==' "$req" >"$venv/.requirements-first"
"$venv/bin/pip" install --disable-pip-version-check -q \
  -r "$venv/.requirements-first" >&2
DS_BUILD_OPS=0 "$venv/bin/pip" install --disable-pip-version-check -q \
  --no-build-isolation --no-deps "$(grep '^deepspeed==' "$req")" >&2
cp "$req" "$stamp"
echo "$venv/bin/python"
