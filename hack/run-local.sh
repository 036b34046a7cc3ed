#!/usr/bin/env bash
# `make run`: the local mesh on the example cluster in deploy/examples, no Kubernetes needed.
set -euo pipefail
cd "$(dirname "$0")/.."
exec ./bin/meridian demo --dir deploy/examples "$@"
