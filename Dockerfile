# Multi-stage, static, distroless, non-root. The build flags are make build's
# (keep the two in step). Not built on the project's machines: they run no
# Docker engine.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
ARG COMMIT=dev
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION} -X main.commit=${COMMIT}" \
    -o /out/gpu-upgrade-gate ./cmd/gpu-upgrade-gate

FROM gcr.io/distroless/static:nonroot
COPY --from=build /out/gpu-upgrade-gate /gpu-upgrade-gate
USER 65532:65532
ENTRYPOINT ["/gpu-upgrade-gate"]
CMD ["serve"]
