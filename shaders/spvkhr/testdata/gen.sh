#!/usr/bin/env bash
# gen.sh compiles the fixtures of shaders/spvkhr's tests with glslc (as
# shaders/compile.sh does); their .spv files are committed.
set -euo pipefail
cd "$(dirname "$0")"
for f in *.comp; do
	"${GLSLC:-glslc}" --target-env=vulkan1.2 -O -fshader-stage=compute -o "${f%.comp}.spv" "$f"
done
