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
command -v docker >/dev/null || { echo "base-image.sh: docker not found (apt-get install docker.io, or Docker's own packages)" >&2; exit 2; }
# The engine must answer before two minutes of mmdebstrap, not after (docker import needs it).
# `timeout`: an engine that accepts the connection but hangs must not stall this script either.
if ! engine=$(timeout 60 docker info --format '{{.ServerVersion}}' 2>&1); then
    echo "base-image.sh: no Docker engine answers \`docker info\`${DOCKER_HOST:+ at DOCKER_HOST=$DOCKER_HOST}:" >&2
    { grep -v '^[[:space:]]*$' <<<"$engine" || echo "no answer within 60 s"; } | head -n 3 | sed 's/^/  /' >&2
    echo "  start one (as root: dockerd >/var/log/dockerd.log 2>&1 &, or systemctl start docker)," >&2
    echo "  or, as a user, join the docker group or point DOCKER_HOST at an engine; then run this again" >&2
    exit 2
fi

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
