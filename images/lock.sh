#!/usr/bin/env bash
# Regenerate every stack's lock file from its requirements-<variant>.in:
#
#   pip install uv && images/lock.sh            # all stacks and variants, and the report image
#   images/lock.sh jax cuda12                   # one stack, one variant
#
# It also writes each lock's sha256 into compose.yaml (the LOCK_HASH build arguments, which the
# Dockerfiles verify, so an image's lock-hash label never names another lock).
#
# Locks are resolved for the images' platform (CPython 3.11, x86_64 glibc 2.36 = Debian
# bookworm), not for the machine running this script, and carry every wheel's sha256, so
# `pip install --require-hashes` in the Dockerfile refuses anything else.
# The CPU torch wheel is not on PyPI: it is read from $TORCH_CPU_WHEELS (default /opt/wheels)
# when that folder exists, else from https://download.pytorch.org/whl/cpu.
set -euo pipefail
cd "$(dirname "$0")"

stacks=${1:-"numpy jax pytorch report"}
variants=${2:-"cpu cuda12"}
torch_cpu=${TORCH_CPU_WHEELS:-/opt/wheels}

compile() {  # in-file, lock-file, the command that regenerates it, extra uv arguments...
  local src=$1 out=$2 how=$3; shift 3
  echo "locking $out" >&2
  uv pip compile "$src" -o "$out" --python-version 3.11 --python-platform x86_64-manylinux_2_36 \
    --generate-hashes --no-emit-find-links --quiet --custom-compile-command "$how" "$@"
  local hash; hash=$(sha256sum "$out" | cut -d' ' -f1)
  sed -i -E "s|^( *LOCK_HASH: )[0-9a-f]{64}( +# sha256 of images/$out)\$|\1$hash\2|" ../compose.yaml
  # The image's tag names its lock too, so a changed lock is a new tag that `docker compose up`
  # builds, instead of reusing the image of the old lock found under the same name.
  local image; image=$(image_of "$out")
  sed -i -E "s|^( *image: fw-harness-compose/$image)-[0-9a-f]{12}\$|\1-${hash:0:12}|" ../compose.yaml
}

image_of() {  # report/lock.txt -> report:cpu, jax/lock-cuda12.txt -> jax:cuda12
  case $1 in
    report/lock.txt) echo report:cpu ;;
    *) local stack=${1%%/*} file=${1##*/lock-}; echo "$stack:${file%.txt}" ;;
  esac
}

for stack in $stacks; do
  if [ "$stack" = report ]; then
    compile report/requirements.in report/lock.txt "images/lock.sh report"
    continue
  fi
  for variant in $variants; do
    extra=()
    if [ "$stack/$variant" = "pytorch/cpu" ]; then
      if [ -d "$torch_cpu" ]; then extra=(--find-links "$torch_cpu");
      else extra=(--extra-index-url https://download.pytorch.org/whl/cpu --index-strategy unsafe-best-match); fi
    fi
    compile "$stack/requirements-$variant.in" "$stack/lock-$variant.txt" "images/lock.sh $stack $variant" "${extra[@]}"
  done
done
