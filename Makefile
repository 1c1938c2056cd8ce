# Contiv-style IPAM agent. `make run` starts the agent, `make test` runs the suite.
SHELL       := /bin/bash
GO          ?= go
BIN         := $(CURDIR)/bin
PKGS        := ./...
FUZZTIME    ?= 30s
BENCHTIME   ?= 1s
VERSION     ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT      ?= $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
DATE        ?= $(shell date -u +%Y-%m-%dT%H:%M:%SZ)
LDFLAGS     := -X main.version=$(VERSION) -X main.commit=$(COMMIT) -X main.buildDate=$(DATE)
STATICCHECK := $(BIN)/staticcheck
ERRCHECK    := $(BIN)/errcheck
CNITOOL     := $(BIN)/cnitool
CNI_PLUGINS := /usr/lib/cni
PROTOC_GEN_GO_VERSION := v1.36.11
PROTOC_GEN_GO_GRPC_VERSION := v1.6.2
CONTROLLER_GEN_VERSION := v0.23.0
CONTROLLER_GEN := $(BIN)/controller-gen
# The kube-apiserver, kubectl and etcd the Kubernetes tests run, built once
# from tests/kubebin (its go.mod pins the versions) into a directory keyed
# by those versions; KUBEBUILDER_ASSETS points envtest at it.
KUBE_VERSION := v1.36.3-etcd3.6.16
KUBE_BINS   := $(CURDIR)/_cache/kube/$(KUBE_VERSION)
export KUBEBUILDER_ASSETS ?= $(KUBE_BINS)
# The container runtime of tests/node (`make node-bins`), built with
# CGO_ENABLED=0 from the module proxy into a directory keyed by the
# versions (tests/node checks NODE_VERSION); CONTIV_NODE_BINS points the
# tests at it.
CONTAINERD_VERSION := v2.4.2
CRICTL_VERSION := v1.37.0
PTP_VERSION := v1.9.1
NODE_VERSION := containerd-$(CONTAINERD_VERSION)-crictl-$(CRICTL_VERSION)-ptp-$(PTP_VERSION)
NODE_BINS   := $(CURDIR)/_cache/node/$(NODE_VERSION)
export CONTIV_NODE_BINS ?= $(NODE_BINS)
# The container images `make images` builds from docker/, under the names
# k8s/kustomization.yaml deploys (tests/manifests checks that they agree).
IMAGE_REPO  ?= ghcr.io/contiv-ipam
IMAGE_TAG   ?= v0.1.0
AGENT_IMAGE := $(IMAGE_REPO)/contiv-agent:$(IMAGE_TAG)
KSR_IMAGE   := $(IMAGE_REPO)/contiv-ksr:$(IMAGE_TAG)
CAPI_IMAGE  := $(IMAGE_REPO)/contiv-capi-ipam:$(IMAGE_TAG)
# Where `make images` writes the archives, <name>.tar each (contiv-agent.tar,
# contiv-ksr.tar, contiv-capi-ipam.tar): what a node imports with
# `ctr -n k8s.io images import`.
IMAGES_DIR  ?= $(CURDIR)/_cache/images
# buildah (no daemon, no registry; apt-get installs it when missing), or
# docker or podman with a daemon that answers.
CONTAINER_ENGINE ?= buildah
# The static busybox of the contiv-agent image (Debian's busybox-static),
# and the applets linked to it in /bin: what the install-cni init
# container's script runs (tests/manifests checks them against the script).
BUSYBOX     ?= /usr/bin/busybox
AGENT_APPLETS := sh cp chmod mv basename echo
# `make static`: CGO_ENABLED=0 builds of STATIC_CMDS into STATIC_DIR (the
# image builds run it).
STATIC_DIR  ?= $(BIN)/static
STATIC_CMDS := ./cmd/contiv-cni ./cmd/contiv-ksr ./cmd/contiv-capi-ipam

.PHONY: all build static images run test test-unit test-race test-deps kube-bins cni-plugins check lint bench chaos crash fuzz clean tools generate generate-crds demo test-nodeipam-diff test-cilium-diff test-aws-diff bench-nodeipam bench-report bench-list bench-micro test-bench test-flakes

all: build

## build: compile every command into ./bin (contiv-cni static, as the image ships it: a runtime execs it for every pod, and without the dynamic loader it starts about 0.5 ms sooner)
build:
	@mkdir -p $(BIN)
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/ ./cmd/...
	CGO_ENABLED=0 $(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/ ./cmd/contiv-cni

## static: static (CGO_ENABLED=0) builds of contiv-agent (without the embedded etcd server: tag contiv_noembed, about 7 MiB less resident; the image always has an etcd cluster), contiv-cni, contiv-ksr and contiv-capi-ipam into STATIC_DIR (default ./bin/static), as the images hold them
static:
	@mkdir -p $(STATIC_DIR)
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(LDFLAGS)" -o $(STATIC_DIR)/ $(STATIC_CMDS)
	CGO_ENABLED=0 $(GO) build -trimpath -tags contiv_noembed -ldflags "$(LDFLAGS)" -o $(STATIC_DIR)/ ./cmd/contiv-agent

## images: build the images $(IMAGE_REPO)/contiv-agent, contiv-ksr and contiv-capi-ipam:$(IMAGE_TAG) FROM scratch from docker/ and the `make static` binaries, with buildah (no daemon, no registry; CONTAINER_ENGINE=docker or podman to use those), and write each as an archive IMAGES_DIR/<name>.tar (default _cache/images) for `ctr -n k8s.io images import` (docker/README.md)
images: static image-tools
	ENGINE=$(CONTAINER_ENGINE) IMAGES_DIR=$(abspath $(IMAGES_DIR)) STATIC_DIR=$(abspath $(STATIC_DIR)) BUSYBOX=$(BUSYBOX) \
	  AGENT_APPLETS="$(AGENT_APPLETS)" VERSION=$(VERSION) COMMIT=$(COMMIT) \
	  docker/images.sh $(AGENT_IMAGE) $(KSR_IMAGE) $(CAPI_IMAGE)

# image-tools: Debian's buildah (when it is the engine) and busybox-static,
# installed with apt-get when missing.
.PHONY: image-tools
image-tools:
	@missing=; \
	  if [ "$(CONTAINER_ENGINE)" = buildah ] && ! command -v buildah >/dev/null; then missing="$$missing buildah"; fi; \
	  if [ ! -x $(BUSYBOX) ]; then missing="$$missing busybox-static"; fi; \
	  if [ -n "$$missing" ]; then \
	    if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
	    $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing; \
	  fi

## run: build and start the agent with conf/ and an embedded etcd in ./_data
run: build
	@mkdir -p _data
	@echo "contiv-agent: REST on http://127.0.0.1:9999/ (index), /liveness, /readiness, /metrics; data in ./_data; Ctrl-C stops"
	CONFIG_DIR=$(CURDIR)/conf $(BIN)/contiv-agent

## demo: run a kube-apiserver, its etcd, the Contiv etcd, contiv-ksr and two agents on this machine (tests/demo), create two Nodes and four Pods with kubectl, print each agent's /contiv/v1/ipam and allocations; Ctrl-C stops every process
demo: build kube-bins
	$(GO) build -o $(BIN)/contiv-demo ./tests/demo
	$(BIN)/contiv-demo -bin $(BIN)

# timed runs one make target and prints how long it took.
timed = @start=$$(date +%s); echo "== $(1)"; $(MAKE) --no-print-directory $(1) && echo "== $(1) took $$(( $$(date +%s) - start )) s"

## test: format and vet checks, the whole suite, then the suite again under the race detector (each phase timed)
test:
	$(call timed,test-deps)
	$(call timed,check)
	$(call timed,test-unit)
	$(call timed,test-race)

test-unit: test-deps test-nodeipam-diff test-cilium-diff test-aws-diff test-bench test-node test-monitoring
	$(GO) test -count=1 -timeout 15m $(PKGS)
	$(GO) test -tags faults -count=1 ./infra/kvdb/bolt/
	$(GO) vet -tags contiv_noembed ./cmd/contiv-agent/ ./infra/kvdb/etcd/internal/embedded/
	$(GO) test -tags contiv_noembed -count=1 ./infra/kvdb/etcd/internal/embedded/

## test-nodeipam-diff: the differential test of plugins/nodeipam against Kubernetes' range allocator (tests/nodeipamdiff, a module of its own)
test-nodeipam-diff:
	@cd tests/nodeipamdiff && $(GO) mod tidy -diff >/dev/null 2>&1 || { \
	  echo "tests/nodeipamdiff/go.mod is out of date (it replaces the main module, whose requirements changed): cd tests/nodeipamdiff && go mod tidy" >&2; exit 1; }
	cd tests/nodeipamdiff && $(GO) test -count=1 -timeout 10m ./...

## test-cilium-diff: the differential test of plugins/ipam's Cilium-style allocation surface against Cilium's own pkg/ipam.IPAM (tests/ciliumdiff, a module of its own; without the race detector: pkg/ipam pulls in much of Cilium, and its race build alone took 8 min on 2 cores from an empty cache, the plain one 4 min, which vet shares; plugins/ipam's own tests run under -race)
test-cilium-diff:
	@cd tests/ciliumdiff && $(GO) mod tidy -diff >/dev/null 2>&1 || { \
	  echo "tests/ciliumdiff/go.mod is out of date (it replaces the main module, whose requirements changed): cd tests/ciliumdiff && go mod tidy" >&2; exit 1; }
	cd tests/ciliumdiff && $(GO) vet ./... && $(GO) test -count=1 -timeout 10m ./...

## test-aws-diff: the differential test of plugins/ipam's AWS-style pools, checkpoints and import against the AWS VPC CNI's datastore code (tests/awsdiff, a module of its own)
test-aws-diff:
	@cd tests/awsdiff && $(GO) mod tidy -diff >/dev/null 2>&1 || { \
	  echo "tests/awsdiff/go.mod is out of date (it replaces the main module, whose requirements changed): cd tests/awsdiff && go mod tidy" >&2; exit 1; }
	cd tests/awsdiff && $(GO) vet ./... && $(GO) test -race -count=1 -timeout 10m ./...

## test-bench: the tests of the bench module (tests/bench): the report's, and each scenario's run at a tiny size; no benchmark runs
test-bench:
	@cd tests/bench && $(GO) mod tidy -diff >/dev/null 2>&1 || { \
	  echo "tests/bench/go.mod is out of date (it replaces the main module, whose requirements may have changed): cd tests/bench && go mod tidy" >&2; exit 1; }
	cd tests/bench && $(GO) vet ./... && $(GO) test -count=1 -timeout 15m ./...

test-race: test-deps
	$(GO) test -race -count=1 -timeout 20m $(PKGS)

## test-deps: what the suites of tests/ run: cnitool (go install into ./bin), Debian's containernetworking-plugins (ptp, host-local in /usr/lib/cni; apt-get), kube-apiserver, kubectl and etcd (make kube-bins), the node of tests/node (make node-bins), buildah and busybox-static for the image tests (make image-tools), promtool for k8s/monitoring (make monitoring-deps), and chromium for tests/browser (make browser-deps)
test-deps: $(CNITOOL) cni-plugins kube-bins node-bins image-tools monitoring-deps browser-deps completion-deps

## browser-deps: Debian's chromium for the headless-browser tests (tests/browser; apt-get, when /usr/bin/chromium is missing)
.PHONY: browser-deps
browser-deps:
	@if [ ! -x /usr/bin/chromium ]; then \
	  if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq chromium; \
	fi

## screenshots: the agent's status page and contiv-ksr's cluster page, each served by the real binary and rendered in headless chromium, written to docs/images/agent-status.png (1200x900) and docs/images/ksr-cluster.png (1200x800) (root, make browser-deps)
.PHONY: screenshots
screenshots: browser-deps kube-bins
	CONTIV_SCREENSHOT_DIR=$(CURDIR)/docs/images $(GO) test -count=1 -run 'TestAgentStatusPage$$|TestKSRClusterPage$$' ./tests/browser/

## monitoring-deps: promtool, from Debian's prometheus package (apt-get, when missing), for make test-monitoring
.PHONY: monitoring-deps test-monitoring
monitoring-deps:
	@if ! command -v promtool >/dev/null 2>&1; then \
	  if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq prometheus; \
	fi

## completion-deps: zsh (apt-get, when missing), so that contiv-netctl's zsh completion is checked by zsh itself, as its bash completion is by bash
.PHONY: completion-deps
completion-deps:
	@if ! command -v zsh >/dev/null 2>&1; then \
	  if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq zsh; \
	fi

## test-monitoring: check k8s/monitoring's alerting rules (promtool check rules) and run their unit tests (promtool test rules k8s/monitoring/tests/*.yaml)
test-monitoring: monitoring-deps
	promtool check rules k8s/monitoring/contiv-alerts.yaml
	promtool test rules k8s/monitoring/tests/*.yaml

## kube-bins: build kube-apiserver, kubectl and etcd into _cache/kube/<version>/ (once: 6 to 8 min on 2 cores with an empty Go cache)
kube-bins: $(KUBE_BINS)/.complete

$(KUBE_BINS)/.complete:
	tests/kubebin/build.sh $(KUBE_BINS)

## node-bins: what tests/node runs beside kube-bins: kubelet, kube-scheduler and kube-controller-manager into _cache/kube/<version>/ (tests/kubebin); containerd, containerd-shim-runc-v2, ctr, crictl and ptp (go install, CGO_ENABLED=0) into _cache/node/<versions>/; Debian's runc and busybox-static (apt-get, when missing)
.PHONY: node-bins
node-bins: kube-bins $(KUBE_BINS)/.node-complete $(NODE_BINS)/.complete
	@if [ ! -x /usr/sbin/runc ] || [ ! -x /usr/bin/busybox ]; then \
	  if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq runc busybox-static; \
	fi

$(KUBE_BINS)/.node-complete: | $(KUBE_BINS)/.complete
	tests/kubebin/build.sh $(KUBE_BINS) node

$(NODE_BINS)/.complete:
	@mkdir -p $(NODE_BINS)
	CGO_ENABLED=0 GOBIN=$(NODE_BINS) $(GO) install github.com/containerd/containerd/v2/cmd/containerd@$(CONTAINERD_VERSION) \
	  github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2@$(CONTAINERD_VERSION) github.com/containerd/containerd/v2/cmd/ctr@$(CONTAINERD_VERSION)
	CGO_ENABLED=0 GOBIN=$(NODE_BINS) $(GO) install sigs.k8s.io/cri-tools/cmd/crictl@$(CRICTL_VERSION)
	CGO_ENABLED=0 GOBIN=$(NODE_BINS) $(GO) install github.com/containernetworking/plugins/plugins/main/ptp@$(PTP_VERSION)
	touch $@

## test-node: the real node of tests/node (containerd, runc and kubelet calling contiv-cni; root): its scenarios and its cleanup (a few minutes); make test-unit runs it
.PHONY: test-node
test-node: test-deps
	$(GO) test -tags node -count=1 -timeout 25m ./tests/node/

## node-demo: bring up a real node (tests/node), run a Deployment of 20 pods on it, print the node, the pods with their IPs (kubectl get pods -o wide) beside the agent's allocations, then stop everything and remove what it left
.PHONY: node-demo
node-demo: build node-bins
	$(GO) build -tags node -o $(BIN)/contiv-node-demo ./tests/node/cmd/node-demo
	$(BIN)/contiv-node-demo -bin $(BIN)

$(CNITOOL):
	GOBIN=$(BIN) $(GO) install github.com/containernetworking/cni/cnitool@v1.3.1

cni-plugins:
	@if [ ! -x $(CNI_PLUGINS)/ptp ] || [ ! -x $(CNI_PLUGINS)/host-local ] || ! command -v ping >/dev/null || ! command -v ip >/dev/null; then \
	  if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq containernetworking-plugins iproute2 iputils-ping; \
	fi

## test-flakes: run PKG's tests (default every package) N times (default 10) under -race, P at a time (default 2), with HOGS busy loops loading the CPUs (default 2); RUN limits the tests (a -run pattern); failures are kept in _flakes/ (tests/flakes/hunt.sh)
N    ?= 10
P    ?= 2
HOGS ?= 2
RUN  ?=
test-flakes: test-deps
	tests/flakes/hunt.sh -n $(N) -p $(P) -l $(HOGS) $(if $(RUN),-r '$(RUN)') -o _flakes $(or $(PKG),$(PKGS))

## check: gofmt and go vet (fast, no tools to install)
check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)
	$(GO) vet -tags node ./tests/node/...

## lint: check plus staticcheck and errcheck (installed into ./bin)
lint: check tools
	$(STATICCHECK) $(PKGS)
	$(STATICCHECK) -tags node ./tests/node/...
	$(ERRCHECK) -blank=false -ignoretests $(PKGS)
	cd tests/bench && $(STATICCHECK) ./... && $(ERRCHECK) -blank=false -ignoretests ./...

tools: $(STATICCHECK) $(ERRCHECK)

$(STATICCHECK):
	GOBIN=$(BIN) $(GO) install honnef.co/go/tools/cmd/staticcheck@v0.8.2

$(ERRCHECK):
	GOBIN=$(BIN) $(GO) install github.com/kisielk/errcheck@v1.9.0

## generate: regenerate the committed *.pb.go beside every .proto under plugins/ (installs protoc with apt-get if missing, protoc-gen-go and protoc-gen-go-grpc into ./bin), and the CAPI provider's deepcopy code and CRDs (generate-crds)
generate: generate-crds
	@command -v protoc >/dev/null || { \
	  if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
	  $$SUDO apt-get update && $$SUDO apt-get install -y protobuf-compiler; }
	GOBIN=$(BIN) $(GO) install google.golang.org/protobuf/cmd/protoc-gen-go@$(PROTOC_GEN_GO_VERSION)
	GOBIN=$(BIN) $(GO) install google.golang.org/grpc/cmd/protoc-gen-go-grpc@$(PROTOC_GEN_GO_GRPC_VERSION)
	PATH=$(BIN):$$PATH protoc --go_out=paths=source_relative:. --go-grpc_out=paths=source_relative:. $$(find plugins -name '*.proto' | LC_ALL=C sort)

## generate-crds: controller-gen (go install into ./bin) writes the deepcopy code of plugins/capi/api/v1alpha1, its CRDs into plugins/capi/api/crd/, and the Cluster API CRDs the tests install (IPAddressClaim, IPAddress, Cluster; from the pinned sigs.k8s.io/cluster-api/api) into plugins/capi/api/crd/capi/
generate-crds: $(CONTROLLER_GEN)
	$(CONTROLLER_GEN) object paths=./plugins/capi/api/...
	$(CONTROLLER_GEN) crd paths=./plugins/capi/api/... output:crd:artifacts:config=plugins/capi/api/crd
	$(CONTROLLER_GEN) crd paths=sigs.k8s.io/cluster-api/api/ipam/v1beta2 output:crd:artifacts:config=plugins/capi/api/crd/capi
	rm -rf $(CURDIR)/_cache/capi-core && $(CONTROLLER_GEN) crd paths=sigs.k8s.io/cluster-api/api/core/v1beta2 output:crd:artifacts:config=$(CURDIR)/_cache/capi-core
	cp $(CURDIR)/_cache/capi-core/cluster.x-k8s.io_clusters.yaml plugins/capi/api/crd/capi/
	plugins/capi/capitest/crds.sh $(CONTROLLER_GEN)

$(CONTROLLER_GEN):
	GOBIN=$(BIN) $(GO) install sigs.k8s.io/controller-tools/cmd/controller-gen@$(CONTROLLER_GEN_VERSION)

## chaos: the chaos test for CHAOS_DURATION (default 2m): random Kubernetes state, etcd restarts, agent SIGKILLs
CHAOS_DURATION ?= 2m
chaos:
	CHAOS_DURATION=$(CHAOS_DURATION) $(GO) test -count=1 -run '^TestChaos$$' -v -timeout 30m ./plugins/ipam/

## crash: the CNI crash test with CRASH_CYCLES (default 50) SIGKILL cycles of the agent under 16 gRPC clients
CRASH_CYCLES ?= 50
crash: test-deps
	CRASH_CYCLES=$(CRASH_CYCLES) $(GO) test -count=1 -run '^TestCrash' -v -timeout 60m ./tests/crash/

## bench: the side-by-side benchmarks against the peers (tests/bench, a module of its own): runs every scenario one after the other, keeps each one's go test output in docs/bench/raw/, then writes BENCHMARKS.md and the plots in docs/bench/ (under 20 min on 2 cores); BENCH_ONLY=engine,cni runs those scenarios and reuses the others' last output (`make bench-list` names them)
BENCH_ONLY ?=
bench: test-deps
	cd tests/bench && $(GO) run ./cmd/benchreport $(if $(BENCH_ONLY),-only $(BENCH_ONLY))

## bench-report: rebuild BENCHMARKS.md and the plots from the raw outputs in docs/bench/raw/, running nothing
bench-report:
	cd tests/bench && $(GO) run ./cmd/benchreport -reuse

## bench-list: the scenarios of `make bench` and the go test command of each
bench-list:
	@cd tests/bench && $(GO) run ./cmd/benchreport -list

## bench-micro: every in-tree benchmark of the main module (BENCHTIME each, with allocations), then bench-nodeipam
bench-micro:
	$(GO) test -run '^$$' -bench . -benchmem -benchtime $(BENCHTIME) $(PKGS)
	$(MAKE) --no-print-directory bench-nodeipam

## bench-nodeipam: allocate+release on Kubernetes' cidrset and on ours, at 50, 90 and 99 % full (tests/nodeipamdiff)
bench-nodeipam:
	cd tests/nodeipamdiff && $(GO) test -run '^$$' -bench . -benchmem -benchtime $(BENCHTIME) ./...

## bench-nodeipam-scale: one contiv-ksr gives pod CIDRs to NODEIPAM_SCALE_NODES (default 5000) Nodes created at once on a real API server; prints total time, API writes per node and contiv-ksr's peak RSS (tests/e2e TestNodeIPAMScale; about 100 s for 5000 at ksr.conf's kubeQPS 50; NODEIPAM_SCALE_QPS sets another)
NODEIPAM_SCALE_NODES ?= 5000
NODEIPAM_SCALE_QPS ?=
.PHONY: bench-nodeipam-scale
bench-nodeipam-scale: kube-bins
	NODEIPAM_SCALE_NODES=$(NODEIPAM_SCALE_NODES) NODEIPAM_SCALE_QPS=$(NODEIPAM_SCALE_QPS) $(GO) test -count=1 -run '^TestNodeIPAMScale$$' -v -timeout 60m ./tests/e2e/

## bench-node: the node scenario of make bench alone (root; make node-bins): 30 and then 110 pods created at once on a real node (tests/node BenchmarkPodStartup), contiv-cni against Debian's host-local under the same ptp: create to Running p50/p99/max, the agent's CPU, peak RSS and Add times, where the CPU went; keeps the go test output in docs/bench/raw/node.txt and rewrites BENCHMARKS.md (8 min on 2 cores, up to 20 when other work loads them: each burst waits up to a minute for a quiet machine)
.PHONY: bench-node
bench-node: node-bins cni-plugins
	cd tests/bench && $(GO) run ./cmd/benchreport -only node

## sim: the cluster simulation (tests/sim): SIM_NODES (default 100,500,1000) simulated nodes in one process, each the agent's real plugins with its own etcd client and bolt file, on a fresh 3-member etcd per size; cold start, idle, pod churn, 1 % of the nodes replaced per minute, the etcd leader killed and restarted; prints a table (one column per size) and writes SIM_JSON (default _cache/sim/report.json); SIM_FLAGS passes more flags (go run ./tests/sim/cmd/sim -h); a size that fails stops the larger ones
SIM_NODES ?= 100,500,1000
SIM_JSON  ?= $(CURDIR)/_cache/sim/report.json
SIM_FLAGS ?=
.PHONY: sim
sim: kube-bins
	@mkdir -p $(dir $(SIM_JSON))
	$(GO) build -o $(BIN)/contiv-sim ./tests/sim/cmd/sim
	$(BIN)/contiv-sim -nodes $(SIM_NODES) -json $(SIM_JSON) $(SIM_FLAGS)

## figure-force-delete: the time from a pod's force deletion (no CNI DEL) to its address being free, with the shipped defaults (absentPodGracePeriod 10m, mirrorHeartbeat 10s) on a real API server, contiv-ksr and agent (tests/e2e TestForceDeletedPodIsFreeAfterTheGracePeriod; about 11 minutes)
.PHONY: figure-force-delete
figure-force-delete: kube-bins
	EVIDENCE_FIGURE_DEFAULTS=1 $(GO) test -count=1 -run '^TestForceDeletedPodIsFreeAfterTheGracePeriod$$' -v -timeout 30m ./tests/e2e/

## fuzz: run each fuzz target for FUZZTIME
fuzz:
	@set -e; for pkg in $$($(GO) list $(PKGS)); do \
	  for f in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz' || true); do \
	    echo "== $$pkg $$f"; $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$pkg; \
	  done; done

clean:
	rm -rf $(BIN) _data
	@echo "kept _cache/ (the kube binaries); rm -rf _cache to rebuild them"
	$(GO) clean -testcache
