#!/usr/bin/env bash
# gpucheck.sh runs vkllm's whole GPU check on a lent machine (an NVIDIA
# H100/H200 with the NVIDIA Vulkan driver, no Go toolchain, no network) in
# two halves:
#
#   here:   bash tools/gpucheck/gpucheck.sh [build]
#           Compiles the shaders, builds vkllm, mkmodel, the report tool
#           and the test binaries of ./vk, ./engine/ops and ./engine
#           (cgo: libc is linked dynamically, the Vulkan loader dlopen'ed)
#           into .gpucheck/bin, downloads the Vulkan loader, GL dispatch
#           and validation-layer .debs into .gpucheck/deb (apt-get
#           download, as /work/.library/device/README.md says), adds
#           /.gpucheck/ to .git/info/exclude, and prints the device-tool
#           calls to make (carry [".gpucheck"]).
#
#   there:  bash tools/gpucheck/gpucheck.sh device [--classes 1b,8b]
#               [--formats Q4_0,Q4_K_M,Q8_0,F16] [--no-tests] [--no-bench]
#           Unpacks the loader (into / when the machine has none, as the
#           device README's recipe does; the validation layer beside, in
#           /tmp), checks glibc against what the binaries need, lists the
#           devices, runs the kernel tests (vk, engine/ops) with validation
#           and the engine's parity tests, then per size class and format
#           generates a random-weight llama with mkmodel (1b: 2048 wide x
#           16 layers, FFN 8192; 8b: 4096 x 32, FFN 14336; both 32 heads,
#           8 KV heads, vocabulary 128256) and runs `vkllm bench` on it:
#           pp512 and tg128 on one sequence, then --parallel 1,16 --profile
#           (-p 64 -n 64) for the decode rates and the weights' GB/s against
#           the measured copy bandwidth. It prints one Markdown table and
#           the profiles. --classes a3b,oss20b --formats Q4_K_M,Q8_0 runs
#           the mixture-of-experts shapes instead (Qwen3-30B-A3B, qwen3moe
#           2048 x 48, 128 experts of 768, 8 used; gpt-oss-20b, 2880 x 24,
#           32 experts of 2880, 4 used, MXFP4 experts); it writes report.md, tests.log, bench.log and
#           results.tar.gz (the bench JSON) to $OUT (.gpucheck/out when
#           unset). The binaries travel gzipped and are unpacked into
#           /tmp/gpucheck-bin; `/tmp/gpucheck-bin/gpucheck DIR...` merges
#           the JSON of several calls into one report.
#
#   local:  bash tools/gpucheck/gpucheck.sh --small
#           Both halves on this machine (lavapipe) with tiny shapes: a
#           minute or two.
#
# One device call has 10 minutes; do it in three (each `run` with
# carry [".gpucheck"], timeout_s 600):
#   bash tools/gpucheck/gpucheck.sh device --classes 1b
#   bash tools/gpucheck/gpucheck.sh device --no-tests --classes 8b --formats Q4_0,Q4_K_M
#   bash tools/gpucheck/gpucheck.sh device --no-tests --classes 8b --formats Q8_0,F16
# and for the mixture-of-experts shapes:
#   bash tools/gpucheck/gpucheck.sh device --no-tests --classes a3b --formats Q4_K_M
#   bash tools/gpucheck/gpucheck.sh device --no-tests --classes oss20b --formats Q8_0
# and the hybrids (Qwen3.5-9B's and Qwen3.5-35B-A3B's shapes):
#   bash tools/gpucheck/gpucheck.sh device --no-tests --classes q35-9b --formats Q4_K_M
#   bash tools/gpucheck/gpucheck.sh device --no-tests --classes q35-a3b --formats Q4_K_M
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
G=.gpucheck
BIN=$ROOT/$G/bin

mode=build
small=0
classes=1b,8b
formats=Q4_0,Q4_K_M,Q8_0,F16
tests=1
bench=1
while [ $# -gt 0 ]; do
	case $1 in
	build | device) mode=$1 ;;
	--small) small=1 ;;
	--classes) classes=$2; shift ;;
	--formats) formats=$2; shift ;;
	--no-tests) tests=0 ;;
	--no-bench) bench=0 ;;
	-h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
	*) echo "gpucheck: unknown argument $1 (see --help)" >&2; exit 2 ;;
	esac
	shift
done
if [ $small = 1 ]; then
	classes=small,moe-small,q35-small
fi

say() { printf '\n== %s\n' "$*"; }

build() {
	say "build into $G (Go $(go env GOVERSION))"
	exclude=$(git rev-parse --git-path info/exclude)
	rm -rf "$BIN" # no binaries (or .gz) of an earlier build
	mkdir -p "$(dirname "$exclude")" "$BIN"
	grep -qxF "/$G/" "$exclude" 2>/dev/null || echo "/$G/" >>"$exclude"
	bash shaders/compile.sh
	export CGO_ENABLED=1
	flags=(-trimpath -ldflags=-s\ -w)
	go build "${flags[@]}" -o "$BIN/vkllm" ./cmd/vkllm
	go build "${flags[@]}" -o "$BIN/mkmodel" ./tools/mkmodel
	go build "${flags[@]}" -o "$BIN/gpucheck" ./tools/gpucheck
	for p in vk engine/ops engine; do
		go test -c "${flags[@]}" -o "$BIN/${p//\//_}.test" "./$p"
	done
	# cgo links libc dynamically: the machine there needs a glibc at least
	# as new as the newest symbol version the binaries use.
	need=$(for f in "$BIN"/*; do objdump -T "$f" 2>/dev/null; done | grep -o 'GLIBC_[0-9.]*' | sed 's/GLIBC_//' | sort -V | tail -1)
	echo "$need" >"$G/glibc"
	for f in "$BIN"/*; do
		printf '%-16s %6s  needs %s\n' "${f##*/}" "$(du -h "$f" | cut -f1)" "$(readelf -d "$f" | grep -o 'NEEDED.*\[.*\]' | grep -o '\[.*\]' | tr -d '[]' | tr '\n' ' ')"
	done
	echo "newest glibc symbol version needed: $need (here: $(ldd --version | head -1 | grep -o '[0-9.]*$'))"
	# Compressed, the binaries travel in a third of the room (66 MiB
	# uncompressed on 2026-11-24, past what one carry holds); device
	# unpacks them into /tmp.
	gzip -9f "$BIN"/*
	if [ $small = 0 ]; then
		say "Vulkan loader, GL dispatch and validation layer .debs (amd64) into $G/deb"
		mkdir -p "$G/deb" /tmp/gpucheck-apt/partial
		o=(-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 -oDir::State::Lists=/tmp/gpucheck-apt)
		if ! ls "$G"/deb/libvulkan1_*.deb >/dev/null 2>&1; then
			apt-get "${o[@]}" update -qq
			(cd "$G/deb" && apt-get "${o[@]}" download libvulkan1 libegl1 libglvnd0 libopengl0 libgl1 libglx0 libgles2 vulkan-validationlayers)
		fi
		ls "$G/deb"
	fi
	size=$(du -sm "$G" | cut -f1)
	echo "$G holds ${size} MiB (the device tool carries at most 64 MiB with the tree)"
	if [ "$size" -gt 56 ]; then
		echo "gpucheck: $G is too large to carry" >&2
		exit 1
	fi
}

# vulkan makes the Vulkan loader, the validation layer and the NVIDIA
# driver's manifest reachable.
vulkan() {
	if ! ldconfig -p | grep -q 'libvulkan\.so\.1'; then
		say "unpacking the Vulkan loader into /"
		for f in "$G"/deb/*.deb; do
			case $f in *vulkan-validationlayers*) ;; *) dpkg -x "$f" / ;; esac
		done
		ldconfig
	fi
	if ! ls /usr/share/vulkan/explicit_layer.d/VkLayer_khronos_validation.json >/dev/null 2>&1; then
		for f in "$G"/deb/vulkan-validationlayers_*.deb; do
			[ -f "$f" ] || continue
			mkdir -p /tmp/gpucheck/vl
			dpkg -x "$f" /tmp/gpucheck/vl
			export VK_LAYER_PATH=/tmp/gpucheck/vl/usr/share/vulkan/explicit_layer.d
			export LD_LIBRARY_PATH=/tmp/gpucheck/vl/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
		done
	fi
	nv=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
	if [ -f $nv ] && ! grep -qs nvidia /usr/share/vulkan/icd.d/*.json /etc/vulkan/icd.d/*.json; then
		export VK_DRIVER_FILES=$nv
		export __EGL_VENDOR_LIBRARY_FILENAMES=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json
	fi
	need=$(cat "$G/glibc" 2>/dev/null || echo 0)
	have=$(ldd --version | head -1 | grep -o '[0-9.]*$')
	if [ "$(printf '%s\n%s\n' "$need" "$have" | sort -V | head -1)" != "$need" ]; then
		echo "gpucheck: the binaries need glibc $need, this machine has $have: build them on an older system" >&2
		exit 1
	fi
	echo "glibc $have (binaries need $need)"
}

# gotest runs one test binary in its package's directory with validation
# on and logs it; it prints one line per package.
gotest() {
	local pkg=$1
	shift
	local t0=$SECONDS rc=0
	(cd "$ROOT/$pkg" && VKLLM_VALIDATION=1 "$BIN/${pkg//\//_}.test" -test.v -test.timeout 9m "$@") >"$R/test-${pkg//\//_}.log" 2>&1 || rc=$?
	cat "$R/test-${pkg//\//_}.log" >>"$OUT/tests.log"
	local pass fail skip novl
	pass=$(grep -c '^--- PASS' "$R/test-${pkg//\//_}.log" || true)
	fail=$(grep -c '^--- FAIL' "$R/test-${pkg//\//_}.log" || true)
	skip=$(grep -c '^--- SKIP' "$R/test-${pkg//\//_}.log" || true)
	novl=$(grep -c 'running without validation' "$R/test-${pkg//\//_}.log" || true)
	printf '%-12s %s: %d passed, %d failed, %d skipped, %s in %ds\n' "$pkg" "$([ $rc = 0 ] && echo PASS || echo "FAIL (exit $rc)")" \
		"$pass" "$fail" "$skip" "$([ "$novl" = 0 ] && echo "validation on" || echo "VALIDATION MISSING in $novl")" $((SECONDS - t0))
	grep -E '^\s*--- FAIL|^panic' "$R/test-${pkg//\//_}.log" | head -20 || true
	[ $rc = 0 ] || failed=1
}

# shape prints mkmodel's flags for a size class.
shape() {
	case $1 in
	small) echo "-embd 256 -layers 2 -heads 4 -kv-heads 2 -ffn 768 -vocab-pad 2048" ;;
	1b) echo "-embd 2048 -layers 16 -heads 32 -kv-heads 8 -ffn 8192 -vocab-pad 128256" ;;
	8b) echo "-embd 4096 -layers 32 -heads 32 -kv-heads 8 -ffn 14336 -vocab-pad 128256" ;;
	# Mixture-of-experts shapes: Qwen3-30B-A3B (128 experts, 8 used) and
	# gpt-oss-20b (32 experts, 4 used, MXFP4 experts whatever -type says).
	moe-small) echo "-arch qwen3moe -embd 256 -layers 2 -heads 4 -kv-heads 2 -head-dim 64 -ffn 768 -experts 16 -experts-used 4 -expert-ffn 256 -vocab-pad 2048" ;;
	a3b) echo "-arch qwen3moe -embd 2048 -layers 48 -heads 32 -kv-heads 4 -head-dim 128 -ffn 6144 -experts 128 -experts-used 8 -expert-ffn 768 -vocab-pad 151936" ;;
	q35-small) echo "-arch qwen35 -embd 256 -layers 4 -heads 4 -kv-heads 2 -head-dim 64 -ffn 768 -ssm-groups 2 -ssm-heads 4 -ssm-state 64 -full-attn-interval 4 -vocab-pad 2048" ;;
	# Qwen3.5-9B: 32 layers, every 4th full attention (16 heads of 256, 4 KV
	# heads), the others Gated DeltaNet (16 key heads, 32 value heads of 128).
	q35-9b) echo "-arch qwen35 -embd 4096 -layers 32 -heads 16 -kv-heads 4 -head-dim 256 -ffn 12288 -ssm-groups 16 -ssm-heads 32 -ssm-state 128 -full-attn-interval 4 -vocab-pad 248320" ;;
	# Qwen3.5-35B-A3B: the hybrid stack with 256 experts of 512 (8 used)
	# and a shared expert.
	q35-a3b) echo "-arch qwen35moe -embd 2048 -layers 40 -heads 16 -kv-heads 2 -head-dim 256 -ffn 512 -experts 256 -experts-used 8 -expert-ffn 512 -ssm-groups 16 -ssm-heads 32 -ssm-state 128 -full-attn-interval 4 -vocab-pad 248320" ;;
	oss20b) echo "-arch gpt-oss -embd 2880 -layers 24 -heads 64 -kv-heads 8 -head-dim 64 -ffn 2880 -experts 32 -experts-used 4 -expert-ffn 2880 -expert-type MXFP4 -vocab-pad 201088" ;;
	*) echo "gpucheck: unknown size class $1 (small, 1b, 8b, moe-small, a3b, oss20b, q35-small, q35-9b, q35-a3b)" >&2; exit 2 ;;
	esac
}

benchModel() {
	local class=$1 format=$2 name=$1-$2
	local m=$MODELS/$name.gguf flags t0=$SECONDS
	flags=$(shape "$class")
	say "$name: mkmodel $flags -type $format"
	# shellcheck disable=SC2086
	"$BIN/mkmodel" -arch llama $flags -type "$format" -workers "$(nproc)" -o "$m"
	local gen=$((SECONDS - t0))
	local bytes
	bytes=$(stat -c %s "$m")
	local desc
	desc=$(echo "$flags" | sed -E 's/-embd ([0-9]+) -layers ([0-9]+) -heads ([0-9]+) -kv-heads ([0-9]+) -ffn ([0-9]+) -vocab-pad ([0-9]+)/\1x\2, \3\/\4 heads, ffn \5, vocab \6/')
	printf '{"name":"%s","class":"%s","format":"%s","shape":"%s","bytes":%d,"gen":"%ds"}\n' "$name" "$class" "$format" "$desc" "$bytes" "$gen" >"$R/$name.info.json"
	local single parallel
	if [ $small = 1 ] || [ "$class" = moe-small ] || [ "$class" = q35-small ]; then
		single=(-p 32 -n 8 -r 2)
		parallel=(-p 8 -n 4 -r 1)
	else
		single=(-p 512 -n 128 -r 3)
		parallel=(-p 64 -n 64 -r 2)
	fi
	{
		echo "== $name ($((bytes >> 20)) MiB, generated in ${gen}s)"
		"$BIN/vkllm" bench -m "$m" "${single[@]}" --json >"$R/$name.single.json"
		"$BIN/vkllm" bench -m "$m" "${parallel[@]}" --parallel 1,16 --profile --json >"$R/$name.parallel.json"
	} 2>&1 | tee -a "$OUT/bench.log" | grep -E '^(==|loaded|memory)' || true
	if [ ! -s "$R/$name.parallel.json" ]; then
		echo "gpucheck: $name: bench failed (see bench.log)"
		tail -5 "$OUT/bench.log"
		failed=1
	fi
	rm -f "$m"
	echo "$name done in $((SECONDS - t0))s"
}

# unpack gunzips the binaries build compressed into /tmp/gpucheck-bin (once
# per build) and points BIN there.
unpack() {
	local dst=/tmp/gpucheck-bin f n
	mkdir -p "$dst"
	for f in "$BIN"/*.gz; do
		n=${f##*/}
		n=${n%.gz}
		if [ ! "$dst/$n" -nt "$f" ]; then
			gunzip -c "$f" >"$dst/$n"
			chmod +x "$dst/$n"
		fi
	done
	BIN=$dst
}

device() {
	unpack
	OUT=${OUT:-$ROOT/$G/out}
	mkdir -p "$OUT"
	R=$(mktemp -d /tmp/gpucheck-results.XXXXXX)
	MODELS=$(mktemp -d /tmp/gpucheck-models.XXXXXX)
	: >"$OUT/tests.log"
	: >"$OUT/bench.log"
	failed=0
	vulkan
	say "devices"
	"$BIN/vkllm" devices
	if [ $tests = 1 ]; then
		say "kernel tests (validation on) and engine parity tests"
		if [ $small = 1 ]; then
			# lavapipe on a shared CPU: the vk tests, the matrix kernels,
			# greedy decoding against the CPU reference.
			gotest vk
			gotest engine/ops -test.run 'TestMatVec|TestMatMul'
			gotest engine -test.run 'TestGreedyIdentical|TestDeviceLocalFallback|TestDoesNotFit'
		else
			gotest vk
			gotest engine/ops
			gotest engine -test.run 'TestGPUMatchesCPU|TestGreedyIdentical|TestParity|TestDeviceLocalFallback|TestDoesNotFit|TestKeptGraphs|TestForwardArgmax|TestForwardTopK|TestSchedulerTopKSampling|TestSplitAttention|TestGPUIntDot|TestGPUMatVecLayout|TestSchedulerGreedy'
		fi
	fi
	if [ $bench = 1 ]; then
		for class in ${classes//,/ }; do
			for format in ${formats//,/ }; do
				benchModel "$class" "$format"
			done
		done
		say "report"
		"$BIN/gpucheck" "$R" | tee "$OUT/report.md"
		tar czf "$OUT/results.tar.gz" -C "$R" .
	fi
	rm -rf "$MODELS"
	if [ $failed = 1 ]; then
		echo "gpucheck: FAILED (logs in $OUT)"
		exit 1
	fi
	echo "gpucheck: all passed (logs in $OUT)"
}

case $mode in
build)
	build
	if [ $small = 1 ]; then
		device
	else
		say "now make these device-tool calls (run, carry [\".gpucheck\"], timeout_s 600), one after another:"
		echo 'bash tools/gpucheck/gpucheck.sh device --classes 1b'
		echo 'bash tools/gpucheck/gpucheck.sh device --no-tests --classes 8b --formats Q4_0,Q4_K_M'
		echo 'bash tools/gpucheck/gpucheck.sh device --no-tests --classes 8b --formats Q8_0,F16'
		echo 'bash tools/gpucheck/gpucheck.sh device --no-tests --classes a3b --formats Q4_K_M'
		echo 'bash tools/gpucheck/gpucheck.sh device --no-tests --classes oss20b --formats Q8_0'
		echo "then: tar xzf each call's results.tar.gz into its own folder and run gunzip -c $G/bin/gpucheck.gz >/tmp/gpucheck; /tmp/gpucheck on the folders for one table"
	fi
	;;
device) device ;;
esac
