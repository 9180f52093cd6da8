#!/usr/bin/env bash
# compile.sh compiles every shaders/*.comp into shaders/spv/.
#
# A .comp file names its variants in lines of the form
#   // variant: NAME -DDEFINE=VALUE ...
# and each variant becomes spv/NAME.spv, compiled with those defines. A file
# without variant lines becomes spv/<basename>.spv. Any glslc error fails the
# build. Only outdated outputs are rebuilt (a .comp or any .glsl newer than
# the .spv).
#
# Every variant named NAME_nv (written with GL_NV_cooperative_matrix, the
# only cooperative-matrix extension glslang 11 knows) also gets a twin
# spv/NAME_khr.spv for VK_KHR_cooperative_matrix devices, rewritten from
# the NV module by tools/spvkhr (package shaders/spvkhr); that step needs Go.
set -euo pipefail
cd "$(dirname "$0")"
GLSLC=${GLSLC:-glslc}
command -v "$GLSLC" >/dev/null || { echo "compile.sh: glslc not found; run 'make deps'" >&2; exit 1; }
mkdir -p spv
newest_include=0
for inc in *.glsl; do
	[ -e "$inc" ] || continue
	t=$(stat -c %Y "$inc"); [ "$t" -gt "$newest_include" ] && newest_include=$t
done
jobs=()
build() { # name src defines...
	local name=$1 src=$2; shift 2
	local out=spv/$name.spv
	if [ -e "$out" ]; then
		local to; to=$(stat -c %Y "$out")
		if [ "$to" -ge "$(stat -c %Y "$src")" ] && [ "$to" -ge "$newest_include" ] && [ "$to" -ge "$(stat -c %Y compile.sh)" ]; then
			return 0
		fi
	fi
	"$GLSLC" --target-env=vulkan1.2 -O -fshader-stage=compute "$@" -o "$out.tmp" "$src"
	mv "$out.tmp" "$out"
}
pids=()
n=0
for src in *.comp; do
	[ -e "$src" ] || continue
	variants=$(grep -E '^// variant: ' "$src" | sed -E 's#^// variant: ##' || true)
	if [ -z "$variants" ]; then
		variants=$(basename "$src" .comp)
	fi
	while IFS= read -r line; do
		# shellcheck disable=SC2086
		set -- $line
		build "$1" "$src" "${@:2}" &
		pids+=($!)
		n=$((n+1))
		if [ ${#pids[@]} -ge "${SHADER_JOBS:-4}" ]; then
			wait "${pids[0]}" || exit 1
			pids=("${pids[@]:1}")
		fi
	done <<<"$variants"
done
for p in "${pids[@]}"; do wait "$p" || exit 1; done
# The KHR twins of the NV cooperative-matrix variants.
khr_tool=$(stat -c %Y ../tools/spvkhr/main.go spvkhr/spvkhr.go | sort -n | tail -1)
stale=()
for f in spv/*_nv.spv; do
	[ -e "$f" ] || continue
	k=${f%_nv.spv}_khr.spv
	if [ ! -e "$k" ] || [ "$(stat -c %Y "$k")" -lt "$(stat -c %Y "$f")" ] || [ "$(stat -c %Y "$k")" -lt "$khr_tool" ]; then
		stale+=("shaders/$f")
	fi
	n=$((n+1))
done
if [ ${#stale[@]} -gt 0 ]; then
	command -v "${GO:-go}" >/dev/null || { echo "compile.sh: go not found (needed for the *_khr variants)" >&2; exit 1; }
	(cd .. && "${GO:-go}" run ./tools/spvkhr "${stale[@]}")
fi
# Remove outputs whose variant no longer exists.
for f in spv/*.spv; do
	[ -e "$f" ] || continue
	name=$(basename "$f" .spv)
	case $name in *_khr) name=${name%_khr}_nv ;; esac
	if ! grep -qE "^// variant: $name( |\$)" *.comp 2>/dev/null && [ ! -e "$name.comp" ]; then rm -f "$f"; fi
done
echo "shaders: $n variants up to date"
