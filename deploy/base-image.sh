#!/usr/bin/env bash
# A base image for deploy/Dockerfile built from Debian packages alone, for sites (and this
# project's CI) that cannot pull from an image registry:
#
#   deploy/base-image.sh [TAG]        # default fedhh-base:bookworm; then build with
#   docker build --build-arg BASE_IMAGE=fedhh-base:bookworm ...
#
# Needs mmdebstrap (Debian's package of that name), a reachable Debian package mirror (or a
# local one: MIRROR=http://... ) and a running Docker engine. About 2 minutes and 225 MB on
# 2 cores. With FEDHH_BASE_TAR=PATH the root filesystem is kept in PATH and reused when present.
set -euo pipefail

tag=${1:-fedhh-base:bookworm}
suite=${FEDHH_BASE_SUITE:-bookworm}
# python3-venv: the image installs fedhh into a virtual environment (Debian's python3 is
# "externally managed"); ca-certificates for operators who add outbound TLS.
packages=python3,python3-venv,ca-certificates
tar=${FEDHH_BASE_TAR:-}

command -v mmdebstrap >/dev/null || { echo "base-image.sh: mmdebstrap not found (apt-get install mmdebstrap)" >&2; exit 2; }
command -v docker >/dev/null || { echo "base-image.sh: docker not found" >&2; exit 2; }

cleanup=
if [[ -z "$tar" ]]; then
    tar=$(mktemp --suffix=.tar)
    cleanup=$tar
    rm -f "$tar"
fi
trap '[[ -n "$cleanup" ]] && rm -f "$cleanup"' EXIT

if [[ ! -s "$tar" ]]; then
    partial="$tar.$$.partial"  # per process: two concurrent runs must not share one file
    trap 'rm -f "$partial"; [[ -n "$cleanup" ]] && rm -f "$cleanup"' EXIT
    # stdin closed: mmdebstrap reads extra sources.list lines from a non-terminal stdin.
    mmdebstrap --quiet --format=tar --variant=minbase --include="$packages" "$suite" "$partial" ${MIRROR:-} </dev/null
    mv "$partial" "$tar"
fi
docker import --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'CMD ["/bin/sh"]' "$tar" "$tag" >/dev/null
echo "base-image.sh: $tag from Debian $suite ($packages)"
