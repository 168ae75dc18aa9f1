#!/usr/bin/env bash
# hack/image.sh: build the function's runtime image on this machine, without any container
# registry, and write the docker-archive tarball `crossplane xpkg build` embeds.
#
#   hack/image.sh            # or: SACK8S_IMAGE=localhost/function-sack8s:dev hack/image.sh
#
# Steps (each is skipped when its result is already there: cold about 2.5 min on 2 shared
# cores, then seconds):
#   1. tools: podman, buildah, mmdebstrap, skopeo, runc from Debian, when missing (needs root).
#   2. containers.conf in the cache dir: runtime runc (crun refuses cgroups v1 hybrid mode) and
#      default ulimits the VM can grant (no CAP_SYS_RESOURCE). Used through CONTAINERS_CONF
#      unless you set CONTAINERS_CONF yourself; export it to run podman by hand or the tests.
#   3. the base: Debian bookworm minbase + python3, python3-venv, ca-certificates, made by
#      mmdebstrap from the apt sources this machine already uses (merged /usr by mmdebstrap's
#      hook instead of the usrmerge package and its perl; no docs, man pages or locales) and
#      `podman import`ed as localhost/sack8s-base:<key>. <key> hashes the recipe (suite,
#      variant, packages, dpkg options, hook, image config, the apt sources): change any of
#      them and the base is rebuilt; so is a base older than SACK8S_BASE_MAX_AGE_DAYS. The
#      rootfs tarball stays in the cache dir: a wiped podman storage costs an import only.
#   4. the image: `podman build` of ./Dockerfile with PYTHON_IMAGE set to that base (the
#      Dockerfile's default stays the official Python image pinned by digest, for everyone
#      else), on the host network, never pulling. pip inside the build verifies TLS against
#      this machine's CA bundle, so /etc/ssl/certs/ca-certificates.crt and /etc/pip.conf are
#      mounted read-only into the build's RUN steps; they are in no layer (tests/test_image.py).
#      The build stage is kept as IMAGE-build:cache (the next run's layer cache).
#   5. `podman save --format docker-archive` to $SACK8S_IMAGE_TAR (rewritten only when the
#      image changed), for `crossplane xpkg build --embed-runtime-image-tarball` (docs/image.md).
#
# Environment (defaults in brackets):
#   SACK8S_IMAGE         image name          [localhost/function-sack8s:dev]
#   SACK8S_IMAGE_TAR     docker-archive path [dist/function-sack8s-image.tar]
#   SACK8S_IMAGE_CACHE   cache dir           [${XDG_CACHE_HOME:-~/.cache}/sack8s/image]
#   SACK8S_IMAGE_BUDGET  seconds for the whole script; every step gets what is left [900]
#   SACK8S_BASE_IMAGE    use this base instead of building one (e.g. the official image)
#   SACK8S_BASE_MAX_AGE_DAYS  rebuild a cached base older than this (security updates) [7]
# Last line on stdout: the image name, its ID and the tarball path.
set -euo pipefail
cd "$(dirname "$0")/.."

IMAGE="${SACK8S_IMAGE:-localhost/function-sack8s:dev}"
TAR="${SACK8S_IMAGE_TAR:-dist/function-sack8s-image.tar}"
CACHE="${SACK8S_IMAGE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/sack8s/image}"
BUDGET="${SACK8S_IMAGE_BUDGET:-900}"
MAX_AGE="${SACK8S_BASE_MAX_AGE_DAYS:-7}"
deadline=$((SECONDS + BUDGET))

log() { echo "[image.sh +${SECONDS}s] $*" >&2; }
within() { # run a command within what is left of the budget
  local n=$((deadline - SECONDS))
  if [ "$n" -le 0 ]; then log "time budget of ${BUDGET}s spent"; exit 124; fi
  timeout "$n" "$@"
}
# Run a step within the budget, its output in $CACHE/NAME.log; show the log's tail if it fails.
step() {
  local name="$1" rc=0
  shift
  within "$@" >"$CACHE/$name.log" 2>&1 || rc=$?
  if [ "$rc" != 0 ]; then
    tail -n 40 "$CACHE/$name.log" >&2
    log "$name failed (exit $rc; log: $CACHE/$name.log)"
    exit "$rc"
  fi
}

mkdir -p "$CACHE" "$(dirname "$TAR")"
exec 9>"$CACHE/lock" # one run at a time per cache (the base, the tags, the tarball)
flock -w "$BUDGET" 9 || { log "another hack/image.sh kept $CACHE/lock for ${BUDGET}s"; exit 1; }

# -- 1. tools --------------------------------------------------------------------------------------
missing=()
for tool in podman:podman buildah:buildah mmdebstrap:mmdebstrap skopeo:skopeo runc:runc; do
  command -v "${tool%%:*}" >/dev/null || missing+=("${tool#*:}")
done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then
    echo "hack/image.sh: install ${missing[*]} (Debian: apt-get install ...) or run as root" >&2
    exit 1
  fi
  log "installing from Debian: ${missing[*]}"
  step apt-update apt-get update -qq
  DEBIAN_FRONTEND=noninteractive step apt-install apt-get install -y -qq --no-install-recommends \
    -o DPkg::Lock::Timeout=300 "${missing[@]}"
fi

# -- 2. containers.conf ----------------------------------------------------------------------------
cat >"$CACHE/containers.conf.new" <<'EOF'
# Written by hack/image.sh. crun fails on cgroups v1 hybrid mode; podman's default ulimits
# need CAP_SYS_RESOURCE, which this VM lacks.
[containers]
default_ulimits = ["nofile=20000:20000", "nproc=32768:32768"]

[engine]
runtime = "runc"
EOF
mv "$CACHE/containers.conf.new" "$CACHE/containers.conf"
export CONTAINERS_CONF="${CONTAINERS_CONF:-$CACHE/containers.conf}"

# -- 3. the base -----------------------------------------------------------------------------------
if [ -n "${SACK8S_BASE_IMAGE:-}" ]; then
  BASE="$SACK8S_BASE_IMAGE"
  log "base: $BASE (given)"
else
  SUITE=bookworm
  VARIANT=minbase
  PACKAGES=python3,python3-venv,ca-certificates
  # Documentation and translations are not needed at runtime; licences stay.
  DPKGOPTS=(
    'path-exclude=/usr/share/doc/*'
    'path-include=/usr/share/doc/*/copyright'
    'path-exclude=/usr/share/man/*'
    'path-exclude=/usr/share/info/*'
    'path-exclude=/usr/share/locale/*'
  )
  # merged-/usr the way debootstrap makes it (symlinks + usr-is-merged), instead of the
  # usrmerge package, which drags perl (~55 MB) into the image.
  HOOKS=(/usr/share/mmdebstrap/hooks/merged-usr)
  IMPORT_CHANGES=(
    'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin'
    'CMD ["python3"]'
  )
  # The apt sources this machine uses (deb822 or one-line files); deb.debian.org without any.
  sources=()
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.{list,sources}; do
    [ -f "$f" ] && grep -qE '^[[:space:]]*(deb|Types:)' "$f" && sources+=("$f")
  done
  recipe="$(
    printf 'suite=%s\nvariant=%s\npackages=%s\n' "$SUITE" "$VARIANT" "$PACKAGES"
    printf 'dpkgopt=%s\n' "${DPKGOPTS[@]}"
    printf 'hook=%s\n' "${HOOKS[@]##*/}"
    printf 'change=%s\n' "${IMPORT_CHANGES[@]}"
    for f in "${sources[@]}"; do echo "source=$f"; grep -vE '^[[:space:]]*(#|$)' "$f"; done
  )"
  key="$(printf '%s' "$recipe" | sha256sum | cut -c1-16)"
  BASE="localhost/sack8s-base:$key"
  rootfs="$CACHE/base-$key.tar"
  # Debian publishes security updates within a suite: a base older than the limit is rebuilt.
  if [ -s "$rootfs" ] && [ -n "$(find "$rootfs" -mtime "+$MAX_AGE" 2>/dev/null)" ]; then
    log "base: older than $MAX_AGE days, rebuilding"
    rm -f "$rootfs"
    podman rmi "$BASE" >/dev/null 2>&1 || true
  fi
  if podman image exists "$BASE"; then
    log "base: $BASE (cached)"
  else
    if [ ! -s "$rootfs" ]; then
      log "base: mmdebstrap $SUITE $VARIANT +$PACKAGES (a few minutes)"
      printf '%s\n' "$recipe" >"$CACHE/base-$key.recipe"
      dpkg_args=()
      for o in "${DPKGOPTS[@]}"; do dpkg_args+=("--dpkgopt=$o"); done
      for h in "${HOOKS[@]}"; do dpkg_args+=("--hook-dir=$h"); done
      step mmdebstrap mmdebstrap --format=tar --variant="$VARIANT" --include="$PACKAGES" \
        "${dpkg_args[@]}" "$SUITE" "$rootfs.partial" "${sources[@]}"
      mv "$rootfs.partial" "$rootfs"
    fi
    log "base: podman import $rootfs as $BASE"
    change_args=()
    for c in "${IMPORT_CHANGES[@]}"; do change_args+=(--change "$c"); done
    step import podman import "${change_args[@]}" \
      --message "hack/image.sh: mmdebstrap $SUITE $VARIANT $PACKAGES" "$rootfs" "$BASE"
  fi
  # Bases of older recipes are not needed any more (an image still using one keeps it).
  for old in "$CACHE"/base-*.tar; do
    [ "$old" = "$rootfs" ] || [ ! -e "$old" ] || {
      log "removing stale $old"
      rm -f "$old" "${old%.tar}.recipe"
    }
  done
  for old in $(podman images --format '{{.Repository}}:{{.Tag}}' localhost/sack8s-base); do
    [ "$old" = "$BASE" ] || podman rmi "$old" >/dev/null 2>&1 || true
  done
fi

# -- 4. the image ----------------------------------------------------------------------------------
mounts=(-v /etc/ssl/certs/ca-certificates.crt:/etc/ssl/certs/ca-certificates.crt:ro)
[ -f /etc/pip.conf ] && mounts+=(-v /etc/pip.conf:/etc/pip.conf:ro)
# The build stage is tagged too (IMAGE-build:cache): it is the layer cache of the next run, and
# an image this script replaced is removed instead of piling up untagged.
CACHE_TAG="${IMAGE%:*}-build:cache"
replace() { # replace TAG PREVIOUS_ID: drop the image TAG pointed at before, if nothing else uses it
  local now
  now="$(podman image inspect --format '{{.Id}}' "$1")"
  if [ -n "$2" ] && [ "$2" != "$now" ]; then podman rmi "$2" >/dev/null 2>&1 || true; fi
}
build=(podman build --pull=never --network=host "${mounts[@]}" --build-arg PYTHON_IMAGE="$BASE"
  -f Dockerfile)
previous="$(podman image inspect --format '{{.Id}}' "$IMAGE" 2>/dev/null || true)"
previous_stage="$(podman image inspect --format '{{.Id}}' "$CACHE_TAG" 2>/dev/null || true)"
log "image: podman build $IMAGE from $BASE"
step build-stage "${build[@]}" --target build -t "$CACHE_TAG" .
step build "${build[@]}" --label org.opencontainers.image.base.name="$BASE" -t "$IMAGE" .
replace "$CACHE_TAG" "$previous_stage"
replace "$IMAGE" "$previous"
id="$(podman image inspect --format '{{.Id}}' "$IMAGE")"

# -- 5. the docker-archive -------------------------------------------------------------------------
if [ -s "$TAR" ] && [ "$(cat "$TAR.id" 2>/dev/null)" = "$id" ]; then
  log "archive: $TAR (up to date)"
else
  log "archive: podman save --format docker-archive -o $TAR"
  rm -f "$TAR.partial"
  step save podman save --format docker-archive -o "$TAR.partial" "$IMAGE"
  mv "$TAR.partial" "$TAR"
  echo "$id" >"$TAR.id"
fi
log "done"
echo "$IMAGE $id $TAR"
