# vkllm container image: `make docker` (docker build -t vkllm:latest .).
#
# Build stage: glslc compiles the compute shaders to SPIR-V, Go (with cgo)
# builds the binary, which embeds them.
FROM golang:1.26-bookworm AS build
RUN apt-get update \
 && apt-get install -y --no-install-recommends glslc libvulkan-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN bash shaders/compile.sh \
 && CGO_ENABLED=1 go build -trimpath -ldflags="-s -w" -o /out/vkllm ./cmd/vkllm

# Runtime stage: the Vulkan loader and Mesa's Vulkan drivers (RADV for AMD,
# ANV for Intel, lavapipe on the CPU when no GPU is passed in), so the image
# runs on any machine. NVIDIA's driver is mounted by the NVIDIA container
# toolkit; NVIDIA_DRIVER_CAPABILITIES must include "graphics" for its Vulkan
# ICD to be mounted.
FROM debian:bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends libvulkan1 mesa-vulkan-drivers \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /out/vkllm /usr/local/bin/vkllm
COPY LICENSE /usr/share/doc/vkllm/LICENSE
ENV NVIDIA_VISIBLE_DEVICES=all \
    NVIDIA_DRIVER_CAPABILITIES=compute,utility,graphics \
    VKLLM_HOST=0.0.0.0 \
    VKLLM_PORT=8080
# An unprivileged user; pass the host's render group with --group-add for
# /dev/dri (see the README).
RUN useradd --system --uid 10001 --user-group --no-create-home --shell /usr/sbin/nologin vkllm
USER 10001:10001
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/vkllm"]
CMD ["serve", "--help"]
