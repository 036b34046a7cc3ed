#!/usr/bin/env bash
# `make run`: the whole mesh on this machine (3 destination replicas, identity, policy, an app
# and a proxy per pod of the example cluster in deploy/examples, a traffic generator) with a
# live view; no Kubernetes needed. Ctrl-C (or q) stops everything. Identity and logs: .cache/demo.
set -euo pipefail
cd "$(dirname "$0")/.."
exec ./bin/meridian demo --dir deploy/examples "$@"
