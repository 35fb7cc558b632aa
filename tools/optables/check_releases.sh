#!/usr/bin/env bash
# Check the autocast op tables against every torch release this machine can install.
#
#   tools/optables/check_releases.sh [WORK_DIR] [X.Y.Z ...]   (default: 2.4.1 to 2.15.0)
#
# For each release: a fresh venv with torch from PyPI (a CUDA build: it imports on a machine
# without a GPU once pip has installed its nvidia packages, ~5 GB each, removed afterwards),
# pytest and numpy; then
#   1. dump_registrations.py -> tools/optables/registrations/<X.Y>.json (the autocast kernels
#      the release registers, per dispatch key);
#   2. generate.py <X.Y> regenerates that release's table with them;
#   3. tests/test_optables.py runs under that torch: every listed CPU op is called under CPU
#      autocast (float16 and bfloat16) and its output dtype checked against the table, and
#      both tables are compared with the release's AutocastCPU/AutocastCUDA registrations.
# The pytest summary of each release goes to WORK_DIR/<X.Y>.log and one line per release to
# WORK_DIR/summary.txt. Needs network access to PyPI and about 10 GB free while it runs.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
work=${1:-/tmp/amp-lint-releases}
shift || true
releases=("$@")
[ ${#releases[@]} -eq 0 ] && releases=(2.4.1 2.5.1 2.6.0 2.7.1 2.8.0 2.9.1 2.10.0 2.11.0 2.12.1 2.13.0 2.14.1 2.15.0)
mkdir -p "$work"
for release in "${releases[@]}"; do
    minor=${release%.*}
    venv="$work/venv-$minor"
    rm -rf "$venv"
    python3 -m venv "$venv"
    # Ignore machine-wide pip settings (a cap on torch, local CPU wheels): PyPI's own builds.
    if ! env -u PIP_FIND_LINKS PIP_CONFIG_FILE=/dev/null "$venv/bin/pip" install -q "torch==$release" pytest numpy \
        >"$work/$minor.install.log" 2>&1; then
        echo "$release: not installable here (see $minor.install.log)" | tee -a "$work/summary.txt"
        rm -rf "$venv"
        continue
    fi
    "$venv/bin/python" "$here/dump_registrations.py" >"$here/registrations/$minor.json"
    "$venv/bin/python" "$here/generate.py" "$minor"
    (cd "$root" && PYTHONPATH=src "$venv/bin/python" -m pytest tests/test_optables.py \
        -o addopts='' -q -rfEsx -p no:cacheprovider >"$work/$minor.log" 2>&1)
    status=$?
    installed=$("$venv/bin/python" -c 'import torch; print(torch.__version__)' 2>/dev/null)
    echo "$release ($installed): pytest exit $status: $(tail -1 "$work/$minor.log")" \
        | tee -a "$work/summary.txt"
    rm -rf "$venv"
done
