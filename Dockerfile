# vkllm container image: `make docker` (docker build -t vkllm:latest .).
#
# Build stage: glslc compiles the compute shaders to SPIR-V, Go (with cgo)
# builds the binary, which embeds them.
FROM golang:1.26-trixie AS build
RUN apt-get update \
 && apt-get install -y --no-install-recommends glslc libvulkan-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN bash shaders/compile.sh \
 && CGO_ENABLED=1 go build -tags mtmd -trimpath -ldflags="-s -w" -o /out/vkllm ./cmd/vkllm

# Runtime stage: the Vulkan loader and Mesa's Vulkan drivers (RADV for AMD,
# ANV for Intel, lavapipe on the CPU when no GPU is passed in), so the image
# runs on any machine. Debian 13 (trixie) has Mesa 25.0, which drives
# current GPUs (AMD RDNA 3 and 4, Intel Arc, Meteor Lake, Lunar Lake and
# Battlemage); Debian 12's Mesa 22.3 predates them and its loader falls
# back to lavapipe on them without a word. NVIDIA's driver is mounted by
# the NVIDIA container toolkit; NVIDIA_DRIVER_CAPABILITIES must include
# "graphics" for its Vulkan ICD to be mounted.
FROM debian:trixie-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends libvulkan1 mesa-vulkan-drivers \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /out/vkllm /usr/local/bin/vkllm
COPY LICENSE /usr/share/doc/vkllm/LICENSE
ENV NVIDIA_VISIBLE_DEVICES=all \
    NVIDIA_DRIVER_CAPABILITIES=compute,utility,graphics \
    VKLLM_HOST=0.0.0.0 \
    VKLLM_PORT=8080 \
    MESA_SHADER_CACHE_DIR=/var/cache/mesa \
    HF_HOME=/var/cache/huggingface
# An unprivileged user; pass the host's render group with --group-add for
# /dev/dri (see the README).
RUN useradd --system --uid 10001 --user-group --no-create-home --shell /usr/sbin/nologin vkllm \
 && install -d -o 10001 -g 10001 /var/cache/mesa /var/cache/huggingface
USER 10001:10001
# Mesa's shader cache: the compiled kernels, kept across containers when a
# named volume is mounted here (-v vkllm-shaders:/var/cache/mesa), so a
# restart skips most of the compilation. Writable without a volume too.
VOLUME /var/cache/mesa
# The model store of -hf and vkllm pull is $HF_HOME/vkllm: mount a named
# volume at /var/cache/huggingface to keep the downloads.
EXPOSE 8080
# Healthy once the model is loaded (/health answers 200; 503 while it
# loads, which the start period allows for: a large model on a CPU driver
# takes minutes). vkllm health reads VKLLM_HOST and VKLLM_PORT, as serve.
HEALTHCHECK --interval=30s --timeout=5s --start-period=15m --start-interval=5s --retries=3 \
    CMD ["/usr/local/bin/vkllm", "health"]
ENTRYPOINT ["/usr/local/bin/vkllm"]
CMD ["serve", "--help"]
