#!/usr/bin/env bash
# Builds the real Kubernetes binaries the tests run (kube-apiserver, etcd; see internal/kubetest)
# and helm from source through the Go module proxy, into .cache/kube/$KUBE_VERSION/bin.
# Nothing but Go and the module proxy is needed. Each part is keyed by a stamp file holding its
# versions (and, for the Kubernetes part, a hash of hack/kubetools/go.mod and go.sum), so a
# repeat run with the same versions is a no-op; change a version below to rebuild.
#
# Cold (empty build cache) this costs about 25 CPU-minutes and 2.4 GB of memory at peak (the
# kube-apiserver link); with a warm build cache a rebuild takes ~20 s, a repeat run ~0.1 s.
set -euo pipefail

# Pinned versions. KUBE_VERSION must match k8s.io/kubernetes in hack/kubetools/go.mod (whose
# replace directives map the staging modules to v0.X.Y) and KubeVersion in internal/kubeenv;
# ETCD_VERSION is the go.etcd.io/etcd/server/v3 that k8s.io/kubernetes itself requires.
KUBE_VERSION=v1.37.2
KUBE_BUILD_DATE=2026-10-27T12:01:04Z # the release's time as the module proxy reports it
ETCD_VERSION=v3.7.0
HELM_VERSION=v3.22.0
HELM_KUBE_MINOR=37 # helm's default capabilities (1.MINOR), as its release builds derive from its client-go

root=$(cd "$(dirname "$0")/.." && pwd)
tools=$root/hack/kubetools
base=$root/.cache/kube/$KUBE_VERSION
bin=$base/bin

die() {
	echo "kube-bin: $*" >&2
	exit 1
}

# The versions are written down in three places; refuse to build if they disagree.
grep -qE "^[[:space:]]*k8s\.io/kubernetes $KUBE_VERSION\$" "$tools/go.mod" ||
	die "hack/kubetools/go.mod does not require k8s.io/kubernetes $KUBE_VERSION"
grep -qE "^[[:space:]]*go\.etcd\.io/etcd/server/v3 $ETCD_VERSION\$" "$tools/go.mod" ||
	die "hack/kubetools/go.mod does not require go.etcd.io/etcd/server/v3 $ETCD_VERSION"
staging=v0.${KUBE_VERSION#v1.}
if grep -E '^[[:space:]]*k8s\.io/[a-z-]+ => ' "$tools/go.mod" | grep -vqE "=> k8s\.io/[a-z-]+ $staging\$"; then
	die "hack/kubetools/go.mod replaces a staging module with something other than $staging"
fi
grep -qE "^const KubeVersion = \"$KUBE_VERSION\"\$" "$root/internal/kubeenv/assets.go" ||
	die "internal/kubeenv.KubeVersion is not $KUBE_VERSION"

command -v go >/dev/null || die "go not found in PATH"
# Module mode with the committed go.sum, no workspace, no VCS stamping (reproducible), static.
export GOWORK=off GOFLAGS="-mod=readonly -buildvcs=false" CGO_ENABLED=0

kube_key="kube=$KUBE_VERSION date=$KUBE_BUILD_DATE etcd=$ETCD_VERSION $(go env GOOS)/$(go env GOARCH) mod=$(cat "$tools/go.mod" "$tools/go.sum" | sha256sum | cut -c1-16)"
helm_key="helm=$HELM_VERSION kube-minor=$HELM_KUBE_MINOR $(go env GOOS)/$(go env GOARCH)"

# fresh STAMP KEY FILE...: the stamp holds KEY and every FILE is an executable.
fresh() {
	local stamp=$1 key=$2
	shift 2
	[[ -f $stamp && "$(cat "$stamp")" == "$key" ]] || return 1
	for f in "$@"; do [[ -x $f ]] || return 1; done
}

if fresh "$bin/.kube.stamp" "$kube_key" "$bin/kube-apiserver" "$bin/etcd" &&
	fresh "$bin/.helm.stamp" "$helm_key" "$bin/helm"; then
	echo "kube-bin: $bin up to date ($KUBE_VERSION, etcd $ETCD_VERSION, helm $HELM_VERSION)"
	exit 0
fi

mkdir -p "$bin"
# Serialise concurrent runs in one checkout (parallel make, several shells) so that they do
# not all spend minutes building the same thing; the second finds the stamps fresh.
exec 9>"$base/.lock"
flock 9 2>/dev/null || true # flock is util-linux; without it, the atomic renames below still hold

tmp=$(mktemp -d "$base/.build.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

if ! fresh "$bin/.kube.stamp" "$kube_key" "$bin/kube-apiserver" "$bin/etcd"; then
	echo "kube-bin: building kube-apiserver $KUBE_VERSION and etcd $ETCD_VERSION from source (cold: several minutes)"
	major=${KUBE_VERSION#v}
	major=${major%%.*}
	minor=${KUBE_VERSION#v*.}
	minor=${minor%%.*}
	ldflags="-s -w"
	for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
		ldflags+=" -X $pkg.gitVersion=$KUBE_VERSION -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor"
		ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=$KUBE_BUILD_DATE"
	done
	(
		cd "$tools"
		go build -trimpath -ldflags "$ldflags" -o "$tmp/kube-apiserver" k8s.io/kubernetes/cmd/kube-apiserver
		go build -trimpath -ldflags "-s -w" -o "$tmp/etcd" go.etcd.io/etcd/server/v3
	)
	# (Captured, not piped into grep -q: with pipefail an early-exiting grep fails the pipe.)
	v=$("$tmp/kube-apiserver" --version)
	[[ $v == "Kubernetes $KUBE_VERSION" ]] || die "built kube-apiserver reports '$v', want $KUBE_VERSION"
	v=$("$tmp/etcd" --version)
	[[ $v == "etcd Version: ${ETCD_VERSION#v}"$'\n'* ]] || die "built etcd reports '$v', want ${ETCD_VERSION#v}"
	rm -f "$bin/.kube.stamp"
	mv -f "$tmp/kube-apiserver" "$tmp/etcd" "$bin/"
	echo "$kube_key" >"$bin/.kube.stamp"
fi

if ! fresh "$bin/.helm.stamp" "$helm_key" "$bin/helm"; then
	echo "kube-bin: building helm $HELM_VERSION from source"
	# The same -X flags as helm's Makefile sets for a release.
	ldflags="-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION"
	ldflags+=" -X helm.sh/helm/v3/internal/version.gitTreeState=clean"
	for pkg in helm.sh/helm/v3/pkg/chartutil helm.sh/helm/v3/pkg/lint/rules; do
		ldflags+=" -X $pkg.k8sVersionMajor=1 -X $pkg.k8sVersionMinor=$HELM_KUBE_MINOR"
	done
	# `go install pkg@version` builds from helm's own go.mod; -mod must not be set for it.
	GOFLAGS=-buildvcs=false GOBIN="$tmp" go install -trimpath -ldflags "$ldflags" "helm.sh/helm/v3/cmd/helm@$HELM_VERSION"
	v=$("$tmp/helm" version --short)
	[[ $v == "$HELM_VERSION"* ]] || die "built helm reports '$v', want $HELM_VERSION"
	rm -f "$bin/.helm.stamp"
	mv -f "$tmp/helm" "$bin/"
	echo "$helm_key" >"$bin/.helm.stamp"
fi

echo "kube-bin: built into $bin"
