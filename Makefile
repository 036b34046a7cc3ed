# Meridian. `make run` starts the local mesh; `make test` is what CI runs.
GO        ?= go
BIN       := bin
MERIDIAN  := $(BIN)/meridian
PROXY     := $(BIN)/meridian-proxy
FUZZTIME  ?= 3s
# make fuzz FUZZ=<regexp of package:FuzzX> FUZZFLAGS='...': some targets, with more go test flags (hack/fuzz.sh)
FUZZ      ?=
FUZZFLAGS ?=
GOFLAGS_TEST ?=

.PHONY: all build run test vet unit fuzz bench bench-kube bench-proxy image clean kube-bin

all: build

build: $(MERIDIAN) $(PROXY)

$(MERIDIAN): FORCE
	@mkdir -p $(BIN)
	$(GO) build -o $(MERIDIAN) ./cmd/meridian

# The proxy built alone (what pods run): the same code as `meridian proxy`, a smaller RSS.
$(PROXY): FORCE
	@mkdir -p $(BIN)
	$(GO) build -o $(PROXY) ./cmd/meridian-proxy

FORCE:

# The whole mesh locally on the example cluster under deploy/examples; no Kubernetes needed.
run: build
	./hack/run-local.sh

test: kube-bin vet unit fuzz

# vet: go.mod is tidy, go vet, and staticcheck (pinned; built once through the module proxy
# into .cache/tools, where a repeat is a no-op).
STATICCHECK_VERSION := v0.8.2
STATICCHECK := .cache/tools/staticcheck-$(STATICCHECK_VERSION)/staticcheck

vet: $(STATICCHECK)
	$(GO) mod tidy -diff
	$(GO) vet ./...
	$(STATICCHECK) ./...

$(STATICCHECK):
	GOFLAGS= GOBIN=$(abspath $(dir $(STATICCHECK))) $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)

unit:
	$(GO) test -race -timeout 20m $(GOFLAGS_TEST) ./...

fuzz:
	FUZZTIME=$(FUZZTIME) FUZZ='$(FUZZ)' FUZZFLAGS='$(FUZZFLAGS)' ./hack/fuzz.sh

# Micro-benchmarks, then the full-size harness runs on the feed source (10k services x 100
# endpoints, 1 vs 4 shards), then on a real API server (issue 15: 5,000 services x 100
# endpoints, 5,000 streams, 50 slice patches, scale-ups and scale-downs a second, a storm of
# 5,000 Gets and 5,000 GetProfiles; 1 vs 4 shards), each forwarding and redirecting, then the
# data-plane benchmark.
bench: build kube-bin
	$(GO) test -run '^$$' -bench . -benchmem ./snapshot ./ring ./translator ./shard
	$(MERIDIAN) bench --services 10000 --endpoints-per-service 100 --compare-shards 1,4 \
		--streams 20000 --churn 1000 --duration 60s --json bench.json --report bench.html
	$(MERIDIAN) bench --services 10000 --endpoints-per-service 100 --compare-shards 1,4 --non-owner redirect \
		--streams 20000 --churn 1000 --duration 60s --json bench-redirect.json --report bench-redirect.html
	$(MAKE) bench-kube
	$(MAKE) bench-proxy

# The harness on the kube-apiserver and etcd of `make kube-bin` (--source kubernetes), forward
# and redirect mode. BENCH_KUBE_FLAGS adds flags (e.g. --profile-dir prof).
BENCH_KUBE_FLAGS ?=
BENCH_KUBE_RUN = $(MERIDIAN) bench --source kubernetes --services 5000 --endpoints-per-service 100 \
	--compare-shards 1,4 --streams 5000 --churn 50 --duration 30s --storm 5000 $(BENCH_KUBE_FLAGS)
bench-kube: build kube-bin
	$(BENCH_KUBE_RUN) --json bench-kube.json --report bench-kube.html
	$(BENCH_KUBE_RUN) --non-owner redirect --json bench-kube-redirect.json --report bench-kube-redirect.html

# The data-plane benchmark (issue 13): the proxy pair against direct traffic and a pair of nginx
# (Debian's nginx must be installed), 2,000 requests/s of HTTP/1.1 and of gRPC, interleaved in
# one run; again with the proxy built alone (cmd/meridian-proxy: the same proxy without
# the rest of the binary, whose pages count in a process's RSS); then the proxies'
# micro-benchmarks (allocations per request on the hot paths). BENCH_PROXY_FLAGS adds flags
# (e.g. --profile-dir prof); on a shared machine, run it under nice -n -10 (as root) so that
# other work disturbs it less.
BENCH_PROXY_FLAGS ?=
bench-proxy: build
	$(MERIDIAN) bench proxy --json bench-proxy.json $(BENCH_PROXY_FLAGS)
	$(MERIDIAN) bench proxy --variants direct,meridian --proxy-binary $(PROXY) \
		--json bench-proxy-only.json $(BENCH_PROXY_FLAGS)
	$(GO) test -run '^$$' -bench . -benchmem ./proxy/h1 ./proxy/h2 ./proxy/inbound ./proxy/outbound

# The images (Dockerfile): $(IMAGE) (meridian and meridian-proxy, distroless) and
# $(IMAGE)-proxy-init (meridian with iptables, for linkerd-init), tagged $(VERSION), which is
# also stamped into meridian. The default is the chart's appVersion, the tag a default install
# pulls. Needs docker; not part of test or CI.
IMAGE   ?= ghcr.io/meridian-mesh/meridian
VERSION ?= $(shell sed -n 's/^appVersion: *"\(.*\)"/\1/p' deploy/charts/meridian/Chart.yaml)
image:
	docker build --build-arg VERSION=$(VERSION) -t $(IMAGE):$(VERSION) .
	docker build --build-arg VERSION=$(VERSION) --target proxy-init -t $(IMAGE)-proxy-init:$(VERSION) .

# Builds kube-apiserver, etcd and helm from source into .cache/kube/<version>/bin (a no-op when
# already built); the real-API-server tests use them (internal/kubetest).
kube-bin:
	./hack/kube-bin.sh

clean:
	rm -rf $(BIN)
