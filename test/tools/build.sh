#!/usr/bin/env bash
# Builds the pinned test tools into bin/ and installs the Debian packages the
# tests use. Each tool is rebuilt only when the version pinned in its module
# under test/tools/ differs from the one recorded in bin/.stamp-<tool>.
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
bin="$root/bin"
mkdir -p "$bin"

# build NAME MODULE_DIR PINNED_MODULE BINARY=PACKAGE...  ($LDFLAGS applies)
build() {
	local name=$1 dir=$2 mod=$3
	shift 3
	local version stamp="$bin/.stamp-$name" pinned
	pinned=$(cd "$dir" && go list -m -f '{{.Version}}' "$mod")
	version="$mod@$pinned $(go env GOVERSION) ldflags:$(printf %s "${LDFLAGS:-}" | sha256sum | cut -c1-12)"
	if [[ -f "$stamp" && "$(cat "$stamp")" == "$version" ]] && all_present "$@"; then
		return 0
	fi
	echo ">> building $name ($version)"
	local start=$SECONDS
	local spec
	for spec in "$@"; do
		(cd "$dir" && CGO_ENABLED=0 go build -trimpath -ldflags "${LDFLAGS:-}" -o "$bin/${spec%%=*}" "${spec#*=}")
	done
	echo "$version" >"$stamp"
	echo ">> built $name in $((SECONDS - start))s"
}

all_present() {
	local p
	for p in "$@"; do
		[[ -x "$bin/${p%%=*}" ]] || return 1
	done
}

tools="$root/test/tools"
build etcd "$tools/etcd" go.etcd.io/etcd/server/v3 etcd=go.etcd.io/etcd/server/v3
# Stamp the version the way Kubernetes' own build does, or the API server
# reports v0.0.0-master and helm refuses charts with a kubeVersion.
k8s=$(cd "$tools/kubernetes" && go list -m -f '{{.Version}}' k8s.io/kubernetes)
k8sminor=$(echo "$k8s" | cut -d. -f2)
ldv=""
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
	ldv+=" -X $pkg.gitVersion=$k8s -X $pkg.gitMajor=1 -X $pkg.gitMinor=$k8sminor -X $pkg.gitTreeState=clean"
done
LDFLAGS=$ldv build kubernetes "$tools/kubernetes" k8s.io/kubernetes \
	kube-apiserver=k8s.io/kubernetes/cmd/kube-apiserver kubectl=k8s.io/kubernetes/cmd/kubectl
build coredns "$tools/coredns" github.com/coredns/coredns coredns=github.com/coredns/coredns
build helm "$tools/helm" helm.sh/helm/v3 helm=helm.sh/helm/v3/cmd/helm

# Debian packages: promtool (prometheus), hey (HTTP load), ip (iproute2), unshare (util-linux).
need=()
command -v promtool >/dev/null || need+=(prometheus)
command -v hey >/dev/null || need+=(hey)
command -v ip >/dev/null || need+=(iproute2)
command -v unshare >/dev/null || need+=(util-linux)
if ((${#need[@]})); then
	if [[ $(id -u) -ne 0 ]]; then
		echo "missing Debian packages: ${need[*]}; install them as root: apt-get install ${need[*]}" >&2
		exit 1
	fi
	echo ">> apt-get install ${need[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get install -y --no-install-recommends "${need[@]}" >/dev/null 2>&1 ||
		{ apt-get update >/dev/null && apt-get install -y --no-install-recommends "${need[@]}"; }
fi
