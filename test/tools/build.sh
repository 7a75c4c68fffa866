#!/usr/bin/env bash
# Builds the pinned test tools into bin/ and installs the Debian packages the
# tests use. Each tool is rebuilt only when the version pinned in its module
# under test/tools/ differs from the one recorded in bin/.stamp-<tool>.
#
#   build.sh        every tool
#   build.sh first  what most e2e packages need: the control plane, real
#                   nodes (kubelet, kube-proxy, containerd, CoreDNS, the
#                   Debian packages), helm, Prometheus and promtool, the
#                   test images and the CRDs
#   build.sh later  the rest (KWOK, Karpenter, cert-manager,
#                   kube-network-policies, staticcheck), which make test
#                   builds while the e2e tests that need none of them run
set -euo pipefail

# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"

# Every tool builds with the project's toolchain (the Makefile's GOTOOLCHAIN),
# the analysers (staticcheck here, govulncheck for make vuln) because they
# must read its standard library, the cluster's components and the rest
# because they then share the build cache with the project: one compile of the
# standard library, and of client-go and the other modules they pin at the
# project's versions (456 of the Kubernetes binaries' packages). From empty
# caches that is about 2 core-minutes less than with a second Go, and a
# CPU-bound cold `make test` on 2 cores pays for every one; a move of the
# project's toolchain rebuilds the tools once (their stamps name the Go).

group=${1:-all}
case $group in
all | first | later) ;;
*)
	echo "usage: $0 [first|later]" >&2
	exit 2
	;;
esac
# A marker make test left behind when it was stopped (harness.LaterTool).
[[ $group == later ]] || rm -f "$bin/.tools-later"

# CustomResourceDefinitions of the tools the chart and the webhook work with,
# copied from their pinned Go modules (checked against the Go checksum
# database): Karpenter's NodeClaim (remediation), prometheus-operator's
# ServiceMonitor and PrometheusRule (monitoring), cert-manager's Certificate
# and Issuer. Tests install them from bin/crds/<tool>/.
crd() {
	local name=$1 mod=$2 sub=$3 stamp="$bin/.stamp-crds-$1" dir
	if [[ -f "$stamp" && "$(cat "$stamp")" == "$mod" ]] && [[ -d "$bin/crds/$name" ]]; then
		return 0
	fi
	dir=$(cd / && GOFLAGS=-mod=mod go mod download -json "$mod" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
	[[ -n "$dir" && -d "$dir/$sub" ]] || { echo "CRDs of $mod: $sub not found (go mod download failed?)" >&2; exit 1; }
	rm -rf "$bin/crds/$name" && mkdir -p "$bin/crds/$name"
	cp "$dir/$sub"/*.yaml "$bin/crds/$name/" && chmod u+w "$bin/crds/$name"/*.yaml
	echo "$mod" >"$stamp"
}

if [[ $group != later ]]; then
	# Every module the tools, the project and its image builder need,
	# downloaded in the background while the first tools compile: from an
	# empty module cache the builds otherwise wait on the module proxy with the
	# cores idle (about 100 s of 2 cores in a cold make test's first tools). A
	# module not fetched yet a build fetches itself (the module cache locks
	# each), so a failure here costs only the overlap: logged, not fatal.
	mkdir -p "$bin/logs"
	for m in kubernetes coredns helm containerd prometheus kwok karpenter kube-network-policies cert-manager \
		staticcheck govulncheck vulndb "$root" "$root/hack/images"; do
		[[ $m == /* ]] || m=$tools/$m
		(cd "$m" && go mod download) || echo "go mod download in $m failed (the build will fetch what it needs)"
	done >"$bin/logs/prefetch.log" 2>&1 &
	prefetch=$!

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
		kube-apiserver=k8s.io/kubernetes/cmd/kube-apiserver kubectl=k8s.io/kubernetes/cmd/kubectl \
		kubelet=k8s.io/kubernetes/cmd/kubelet kube-proxy=k8s.io/kubernetes/cmd/kube-proxy \
		kube-controller-manager=k8s.io/kubernetes/cmd/kube-controller-manager \
		kube-scheduler=k8s.io/kubernetes/cmd/kube-scheduler
	# CoreDNS with the plugins the tests use (test/tools/coredns/coredns); its
	# version names the program's source hash, so the stamp follows that too.
	cdsrc=$(cat "$tools/coredns/go.mod" "$tools/coredns/go.sum" "$tools/coredns"/coredns/*.go | sha256sum | cut -c1-12)
	LDFLAGS="-X github.com/coredns/coredns/coremain.GitCommit=knr-$cdsrc" build coredns "$tools/coredns" github.com/coredns/coredns \
		coredns=github.com/kube-node-ready/kube-node-ready/test/tools/coredns/coredns
	# Like helm's own release build: the Kubernetes version helm assumes without
	# --kube-version (template, lint) is the pinned one, not its 1.20 default.
	ldh=""
	for pkg in helm.sh/helm/v3/pkg/chartutil helm.sh/helm/v3/pkg/lint/rules; do
		ldh+=" -X $pkg.k8sVersionMajor=1 -X $pkg.k8sVersionMinor=$k8sminor"
	done
	LDFLAGS=$ldh build helm "$tools/helm" helm.sh/helm/v3 helm=helm.sh/helm/v3/cmd/helm
	TAGS=no_btrfs,no_devmapper,no_zfs build containerd "$tools/containerd" github.com/containerd/containerd/v2 \
		containerd=github.com/containerd/containerd/v2/cmd/containerd \
		containerd-shim-runc-v2=github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2 \
		ctr=github.com/containerd/containerd/v2/cmd/ctr
	# Prometheus and promtool for the monitoring tests (promtool also checks
	# the agent's metrics in several e2e packages, so it is built first) and the chart's rule tests,
	# with Kubernetes service discovery (which Debian's prometheus package is built
	# without); every other discovery is left out.
	# Module versions v0.MNN.P are Prometheus M.NN.P.
	pv=$(cd "$tools/prometheus" && go list -m -f '{{.Version}}' github.com/prometheus/prometheus)
	pv=${pv#v0.}
	pv="$((${pv%%.*} / 100)).$((${pv%%.*} % 100)).${pv#*.}"
	LDFLAGS="-X github.com/prometheus/common/version.Version=$pv -X github.com/prometheus/common/version.Branch=knr-tools" \
		TAGS=remove_all_sd,enable_kubernetes_sd build prometheus "$tools/prometheus" github.com/prometheus/prometheus \
		prometheus=github.com/prometheus/prometheus/cmd/prometheus promtool=github.com/prometheus/prometheus/cmd/promtool

	# The image builder and the pause program are the project's own code in a
	# module of its own, so go-containerregistry never enters the agent's or the
	# webhook's dependencies; their stamp is the hash of their sources. The test
	# nodes' images (pause, CoreDNS) are rebuilt when either they or CoreDNS change.
	images_src=$(cat "$root/hack/images/go.mod" "$root/hack/images/go.sum" "$root/hack/images"/*.go "$root/hack/images"/pause/*.go | sha256sum | cut -c1-12)
	images_stamp="$images_src $(cat "$bin/.stamp-coredns")"
	if [[ ! -f "$bin/images/pause.tar" || ! -f "$bin/images/coredns.tar" || "$(cat "$bin/.stamp-images" 2>/dev/null)" != "$images_stamp" ]]; then
		echo ">> building knr-image and the test nodes' images (pause, CoreDNS)"
		mkdir -p "$bin/images"
		(cd "$root/hack/images" && CGO_ENABLED=0 go build -trimpath -o "$bin/knr-image" . &&
			CGO_ENABLED=0 go build -trimpath -ldflags '-s -w' -o "$bin/pause" ./pause)
		arch=$(go env GOARCH)
		"$bin/knr-image" --ref registry.k8s.io/pause:3.10.1 --binary "linux/$arch=$bin/pause" --out "$bin/images/pause.tar"
		coredns_version=$(cd "$tools/coredns" && go list -m -f '{{.Version}}' github.com/coredns/coredns)
		"$bin/knr-image" --ref "registry.k8s.io/coredns/coredns:$coredns_version" --binary "linux/$arch=$bin/coredns" \
			--out "$bin/images/coredns.tar"
		echo "$images_stamp" >"$bin/.stamp-images"
	fi

	crd karpenter sigs.k8s.io/karpenter@v1.14.1 pkg/apis/crds
	crd prometheus-operator github.com/prometheus-operator/prometheus-operator@v0.85.0 example/prometheus-operator-crd
	crd cert-manager github.com/cert-manager/cert-manager@v1.21.2 deploy/crds
	# KWOK's Stage documents and the KWOK provider's CRDs (KWOKNodeClass), from
	# the modules test/tools/kwok and test/tools/karpenter pin.
	kwokv=$(cd "$tools/kwok" && go list -m -f '{{.Version}}' sigs.k8s.io/kwok)
	karpv=$(cd "$tools/karpenter" && go list -m -f '{{.Version}}' sigs.k8s.io/karpenter)
	# KWOK's "fast" Stages (the kustomization.yaml beside them is not a Stage).
	crd kwok-stage-node-fast "sigs.k8s.io/kwok@$kwokv" kustomize/stage/node/fast
	crd kwok-stage-node-heartbeat-with-lease "sigs.k8s.io/kwok@$kwokv" kustomize/stage/node/heartbeat-with-lease
	crd kwok-stage-pod-fast "sigs.k8s.io/kwok@$kwokv" kustomize/stage/pod/fast
	crd karpenter-kwok "sigs.k8s.io/karpenter@$karpv" kwok/apis/crds
	[[ "$(cat "$bin/.stamp-crds-karpenter")" == "sigs.k8s.io/karpenter@$karpv" ]] ||
		{ echo "test/tools/karpenter pins Karpenter $karpv, but its CRDs come from $(cat "$bin/.stamp-crds-karpenter"): pin one version" >&2; exit 1; }

	# Debian packages: hey (HTTP load), ip (iproute2),
	# unshare and nsenter (util-linux); for real nodes runc, the CNI plugins
	# (/usr/lib/cni), iptables and conntrack.
	need=()
	command -v hey >/dev/null || need+=(hey)
	command -v ip >/dev/null || need+=(iproute2)
	command -v unshare >/dev/null || need+=(util-linux)
	command -v runc >/dev/null || need+=(runc)
	[[ -x /usr/lib/cni/bridge && -x /usr/lib/cni/host-local && -x /usr/lib/cni/loopback ]] || need+=(containernetworking-plugins)
	command -v iptables >/dev/null || need+=(iptables)
	command -v conntrack >/dev/null || need+=(conntrack)
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

	# The later tools' modules, and make vuln's and make lint's, downloaded
	# before this returns: make test builds them at idle priority beside the
	# e2e tests, where a download's TLS handshake outwaits its 10-s timeout on
	# busy cores (a cold run failed so).
	wait "$prefetch" || true
	for m in cert-manager kwok karpenter kube-network-policies staticcheck govulncheck vulndb; do
		(cd "$tools/$m" && go mod download)
	done
fi

if [[ $group != first ]]; then
	# In the order of the work that waits for them (harness.LaterTool waits for
	# its own tool only): KWOK and Karpenter first, for the longest package
	# (test/e2e/karpenter, about 7 minutes of tests after its tools) and the
	# fleet test; then the network policy enforcer (test/e2e/netpol, about a
	# minute); cert-manager last (below).
	#
	# The autoscaler and fleet-scale tools, each in a module of its own (one module
	# for both would let minimal version selection move Karpenter off the
	# Kubernetes and controller-runtime it was released with): KWOK keeps the
	# simulated Nodes Ready and heart-beating; the real Karpenter controller with
	# its KWOK cloud provider creates them.
	build kwok "$tools/kwok" sigs.k8s.io/kwok kwok=sigs.k8s.io/kwok/cmd/kwok
	build karpenter "$tools/karpenter" sigs.k8s.io/karpenter karpenter=sigs.k8s.io/karpenter/kwok

	# SIG Network's reference NetworkPolicy enforcer, which real nodes run when a
	# test asks for enforced policies (harness.ClusterOptions.NetworkPolicies):
	# it judges each connection's first packet from the NetworkPolicies, Pods and
	# Namespaces it watches, handed to it on a netfilter queue.
	build kube-network-policies "$tools/kube-network-policies" sigs.k8s.io/kube-network-policies \
		kube-network-policies=sigs.k8s.io/kube-network-policies/cmd

	# cert-manager's controller and CA injector, for the cert-manager test (about
	# 3 minutes from empty caches, less after the Kubernetes binaries, whose
	# packages they share). test/tools/cert-manager pins cert-manager's library module (its
	# binaries' own modules are not published; see tools.go there) and holds the
	# two main packages; the stamp covers their sources through the ldflags. Their
	# images are one-layer images like CoreDNS's, under a name of the project's
	# own, since the programs are not cert-manager's release binaries.
	{
		cm="$tools/cert-manager"
		cmv=$(cd "$cm" && go list -m -f '{{.Version}}' github.com/cert-manager/cert-manager)
		[[ "$(cat "$bin/.stamp-crds-cert-manager")" == "github.com/cert-manager/cert-manager@$cmv" ]] ||
			{ echo "test/tools/cert-manager pins cert-manager $cmv, but its CRDs come from $(cat "$bin/.stamp-crds-cert-manager"): pin one version" >&2; exit 1; }
		cmsrc=$(cat "$cm/go.mod" "$cm/go.sum" "$cm"/*.go "$cm"/*/*.go | sha256sum | cut -c1-12)
		cmpkg=github.com/cert-manager/cert-manager/pkg/util
		LDFLAGS="-X $cmpkg.AppVersion=$cmv -X $cmpkg.AppGitCommit=knr-$cmsrc" build cert-manager "$cm" github.com/cert-manager/cert-manager \
			cert-manager-controller=github.com/kube-node-ready/kube-node-ready/test/tools/cert-manager/controller \
			cert-manager-cainjector=github.com/kube-node-ready/kube-node-ready/test/tools/cert-manager/cainjector
		cm_stamp="$(cat "$bin/.stamp-cert-manager") $(cat "$bin/.stamp-images")"
		if [[ ! -f "$bin/images/cert-manager-controller.tar" || ! -f "$bin/images/cert-manager-cainjector.tar" ||
			"$(cat "$bin/.stamp-cert-manager-images" 2>/dev/null)" != "$cm_stamp" ]]; then
			echo ">> building the cert-manager test images"
			for c in controller cainjector; do
				"$bin/knr-image" --ref "kube-node-ready.test/cert-manager-$c:$cmv" --binary "linux/$(go env GOARCH)=$bin/cert-manager-$c" \
					--out "$bin/images/cert-manager-$c.tar"
			done
			echo "$cm_stamp" >"$bin/.stamp-cert-manager-images"
		fi
		ready images/cert-manager-controller.tar images/cert-manager-cainjector.tar
	}

	"$tools/staticcheck/build.sh"
fi
