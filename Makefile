# Meridian. `make run` starts the local mesh; `make test` is what CI runs.
GO        ?= go
BIN       := bin
MERIDIAN  := $(BIN)/meridian
FUZZTIME  ?= 3s
GOFLAGS_TEST ?=

.PHONY: all build run test vet unit fuzz bench clean kube-bin

all: build

build: $(MERIDIAN)

$(MERIDIAN): FORCE
	@mkdir -p $(BIN)
	$(GO) build -o $(MERIDIAN) ./cmd/meridian

FORCE:

# The whole mesh locally on the example cluster under deploy/examples; no Kubernetes needed.
run: build
	./hack/run-local.sh

test: kube-bin vet unit fuzz

vet:
	$(GO) vet ./...

unit:
	$(GO) test -race -timeout 20m $(GOFLAGS_TEST) ./...

fuzz:
	FUZZTIME=$(FUZZTIME) ./hack/fuzz.sh

bench: build
	$(GO) test -run '^$$' -bench . -benchmem ./...

kube-bin:
	@true

clean:
	rm -rf $(BIN)
