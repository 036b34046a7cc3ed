# Meridian's images, built by `make image` (docker build; not part of `make test` or CI).
#
#   default target  ghcr.io/meridian-mesh/meridian: the control plane, the CLI and the proxy.
#                   /usr/local/bin/meridian (the entrypoint: the chart's components run
#                   `meridian <component>`) and /usr/local/bin/meridian-proxy (the proxy built
#                   alone, which the injector gives pods as their linkerd-proxy command: half
#                   the RSS of `meridian proxy`), on distroless/static as nonroot.
#   proxy-init      ghcr.io/meridian-mesh/meridian-proxy-init: the linkerd-init container's
#                   image, `meridian proxy-init`, which runs iptables-save/iptables-restore
#                   (none in distroless): meridian on Debian with iptables.
#
# VERSION is stamped into meridian (`meridian version`); released images carry it as their
# tag, which makes the injector give pods proxies of the same version.

FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
ENV CGO_ENABLED=0
RUN go build -trimpath -ldflags "-X main.version=${VERSION}" -o /out/meridian ./cmd/meridian \
 && go build -trimpath -o /out/meridian-proxy ./cmd/meridian-proxy

FROM debian:bookworm-slim AS proxy-init
RUN apt-get update \
 && apt-get install -y --no-install-recommends iptables \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /out/meridian /usr/local/bin/meridian
ENTRYPOINT ["meridian"]

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/meridian /out/meridian-proxy /usr/local/bin/
ENTRYPOINT ["meridian"]
