package ops

import (
	"fmt"

	"github.com/vkllm/vkllm/vk"
)

// Qwen3.5's linear-attention layers on the device: SSMConv, the causal
// depthwise convolution of the fused q/k/v projection, and GatedDeltaNet,
// the gated delta rule; both carry a per-slot state from one batch to the
// next and walk the batch as sequence runs (SeqRun: four int32s each in a
// device buffer), one run per slot at most.

// SSMConvMaxKernel is the widest convolution SSMConv takes (MAX_K of
// shaders/ssm_conv.comp).
const SSMConvMaxKernel = 8

// DeltaNetMaxHead is the largest key or value head dimension GatedDeltaNet
// takes: the kernel keeps a state column of HeadK values per invocation
// and one invocation per value (and key) dimension in a workgroup.
const DeltaNetMaxHead = 256

type ssmConvPush struct {
	Channels, Slots, Rows, NRuns uint32
}

type deltaNetPush struct {
	KHeads, VHeads, Slots, Rows, NRuns uint32
	Eps                                float32
}

// runRows returns the batch rows of rowLen f32 values each that every one
// of ranges holds within one binding (the most rows a run may reach).
func (k *Kernels) runRows(rowLen []int, ranges ...vk.Range) int {
	rows := -1
	for i, r := range ranges {
		n := int(min(r.Size, k.dev.MaxBinding()) / (4 * uint64(rowLen[i])))
		if rows < 0 || n < rows {
			rows = n
		}
	}
	return rows
}

// SSMConv records Qwen3.5's causal depthwise convolution with SiLU, as
// RefSSMConv (its CPU reference): for each of the nRuns runs (a device
// buffer of SeqRuns, four int32 each) and each channel c of its rows t of
// x ([rows][Channels] f32), dst[t][c] = SiLU(sum_k in[t-(K-1)+k][c] *
// w[c*K+k]), where in is the slot's state ([Slots][K-1][Channels], zeros
// for a run at position 0) followed by the run's rows; the slot's state
// becomes the last K-1 rows of in. One invocation per channel and run
// walks the run's rows with a window of K-1 inputs in registers. The runs
// must name distinct slots; runs outside the slots or the rows that x and
// dst hold (within one binding) are skipped, as are rows outside every
// run. state may be empty (no buffer) when Kernel is 1.
func (k *Kernels) SSMConv(c *vk.Cmd, dst, x, w, state, runs vk.Range, nRuns int, p SSMConvParams) error {
	const op = "SSMConv"
	switch {
	case p.Channels <= 0:
		return fmt.Errorf("ops: %s: Channels %d, want at least 1", op, p.Channels)
	case p.Kernel < 1 || p.Kernel > SSMConvMaxKernel:
		return fmt.Errorf("ops: %s: Kernel %d, want 1..%d", op, p.Kernel, SSMConvMaxKernel)
	case p.Slots <= 0:
		return fmt.Errorf("ops: %s: Slots %d, want at least 1", op, p.Slots)
	case nRuns <= 0:
		return fmt.Errorf("ops: %s: nRuns %d, want at least 1", op, nRuns)
	case uint64(nRuns)*uint64(p.Channels) > 1<<31:
		return fmt.Errorf("ops: %s: %d runs of %d channels exceed 32-bit indexing", op, nRuns, p.Channels)
	}
	C, K := uint64(p.Channels), uint64(p.Kernel)
	stateN := uint64(p.Slots) * (K - 1) * C
	for _, o := range []struct {
		what string
		r    vk.Range
		n    uint64
	}{{"dst", dst, C}, {"x", x, C}, {"w", w, C * K}, {"runs", runs, 4 * uint64(nRuns)}} {
		if err := k.oneBinding(op, o.what, o.r, 4*o.n); err != nil {
			return err
		}
	}
	if K == 1 && state.Buf == nil {
		state = x // bound, never read or written: there is no state
	} else if err := k.oneBinding(op, "state", state, 4*stateN); err != nil {
		return err
	}
	rows := k.runRows([]int{p.Channels, p.Channels}, x, dst)
	push := ssmConvPush{Channels: uint32(C), Slots: uint32(p.Slots), Rows: uint32(rows), NRuns: uint32(nRuns)}
	return Record(k, c, "ssm_conv", []uint32{k.wg, uint32(K)}, k.Groups(ceilDiv(uint32(nRuns*p.Channels), k.wg)), &push,
		k.window(x, 0, 4*C), k.window(w, 0, 4*C*K), k.window(state, 0, max(4*stateN, 4)), k.window(runs, 0, 16*uint64(nRuns)),
		k.window(dst, 0, 4*C))
}

// GatedDeltaNet records the gated delta rule of Qwen3.5's linear-attention
// layers, as RefGatedDeltaNet (its CPU reference, which spells out the
// arithmetic): for each of the nRuns runs (a device buffer of SeqRuns,
// four int32 each) and each value head h, the head's state S (HeadK x
// HeadV f32 per slot and head, S[i][j] at j*HeadK+i; zeros for a run at
// position 0) is decayed by exp(softplus(alpha+dtBias)*a), corrected
// towards v along the L2-normalised k of key head h % KHeads with rate
// sigmoid(beta), and read out along the normalised q, row after row of
// the run; the final state is stored back. qkv is [rows][QKVCols()] (q,
// k, then v), beta and alpha [rows][VHeads], dtBias and a [VHeads], out
// [rows][VHeads][HeadV]. One workgroup per value head and run keeps
// column j of S in invocation j's registers across the run. The runs
// must name distinct slots; runs outside the slots or the rows that qkv,
// beta, alpha and out hold (within one binding) are skipped, as are rows
// outside every run.
//
// GatedDeltaNet walks a run's rows one by one, a barrier and a chain of
// dependent dot products per row: the kernel for decoding (runs of one
// row) and short runs. GatedDeltaNetChunked computes the same for runs of
// many rows a chunk at a time; the runs' lengths live on the device, so
// the caller picks: GatedDeltaNetChunked when the batch is prompt-shaped
// (a run of at least 2*DeltaNetChunkRows rows), GatedDeltaNet otherwise.
func (k *Kernels) GatedDeltaNet(c *vk.Cmd, out, qkv, beta, alpha, dtBias, a, state, runs vk.Range, nRuns int, p DeltaNetParams) error {
	wg, push, err := k.deltaNetCheck("GatedDeltaNet", out, qkv, beta, alpha, dtBias, a, state, runs, nRuns, p)
	if err != nil {
		return err
	}
	return k.recordDeltaNet(c, "delta_net", []uint32{wg, uint32(p.HeadK), uint32(p.HeadV)}, &push, out, qkv, beta, alpha, dtBias, a, state, runs, nRuns, p)
}

// DeltaNetChunkMaxHead is the largest key or value head dimension
// GatedDeltaNetChunked runs chunked; larger heads fall back to
// GatedDeltaNet.
const DeltaNetChunkMaxHead = 128

// deltaNetChunkShared is the shared memory of delta_net_chunk.comp with
// chunks of c rows and heads of hk keys, in bytes.
func deltaNetChunkShared(c, hk int) int { return 4 * (2*c*hk + 3*c*c + 4*c) }

// DeltaNetChunkRows is the rows per chunk GatedDeltaNetChunked works on
// together for heads of p's shape on this device: 16, or 0 where
// GatedDeltaNetChunked falls back to GatedDeltaNet (heads over
// DeltaNetChunkMaxHead, or too little shared memory). Chunks of 16 rows of
// heads of 128 take 19.3 KiB of shared memory; 32 rows would take 44.5
// KiB, more than lavapipe's 32 KiB, and its compiler takes minutes over
// the kernel unrolled for 32 rows.
func (k *Kernels) DeltaNetChunkRows(p DeltaNetParams) int {
	if p.HeadK <= 0 || p.HeadV <= 0 || p.HeadK > DeltaNetChunkMaxHead || p.HeadV > DeltaNetChunkMaxHead {
		return 0
	}
	const c = 16
	if wg := (max(p.HeadK, p.HeadV) + 31) &^ 31; c > wg || deltaNetChunkShared(c, p.HeadK) > int(k.dev.Limits().MaxSharedMemory) {
		return 0
	}
	return c
}

// GatedDeltaNetChunked records the same as GatedDeltaNet (same arguments,
// same semantics for any runs, RefGatedDeltaNet its CPU reference, equal
// up to f32 rounding) in the chunked form of the gated delta rule (the
// Gated DeltaNet paper's, as llama.cpp's build_delta_net_chunking): per
// value head and chunk of C = DeltaNetChunkRows(p) rows of a run, with G_t
// the cumulative sum of the chunk's log decays g, b_t the rates, k_t and
// q_t the normalised keys and queries (q scaled by 1/sqrt(HeadK)) and S
// the incoming state,
//
//	A[t][s] = b_t exp(G_t-G_s) k_t.k_s (s < t),  T = (I + A)^-1
//	D       = T diag(b) (V - diag(exp G) K S)     (the rows' corrections)
//	o_t     = exp(G_t) q_t^T S + sum_{s<=t} exp(G_t-G_s) (q_t.k_s) d_s
//	S'      = exp(G_C) S + sum_s exp(G_C-G_s) k_s d_s^T
//
// so that the dot products of a chunk's rows are independent of each
// other and one chunk needs a handful of barriers instead of one per row.
// It pays for runs of many rows (prompts); a run shorter than a chunk
// costs a whole chunk's work, so decoding batches belong to
// GatedDeltaNet. Heads whose chunk does not fit the device
// (DeltaNetChunkRows(p) == 0) are recorded as GatedDeltaNet. On lavapipe,
// which ends a shader's loops after 65535 iterations in all, runs may
// have up to about 16000 rows (GatedDeltaNet's up to 65535).
func (k *Kernels) GatedDeltaNetChunked(c *vk.Cmd, out, qkv, beta, alpha, dtBias, a, state, runs vk.Range, nRuns int, p DeltaNetParams) error {
	wg, push, err := k.deltaNetCheck("GatedDeltaNetChunked", out, qkv, beta, alpha, dtBias, a, state, runs, nRuns, p)
	if err != nil {
		return err
	}
	chunk := k.DeltaNetChunkRows(p)
	if chunk == 0 {
		return k.recordDeltaNet(c, "delta_net", []uint32{wg, uint32(p.HeadK), uint32(p.HeadV)}, &push, out, qkv, beta, alpha, dtBias, a, state, runs, nRuns, p)
	}
	return k.recordDeltaNet(c, "delta_net_chunk", []uint32{wg, uint32(p.HeadK), uint32(p.HeadV), uint32(chunk)}, &push, out, qkv, beta, alpha, dtBias, a, state, runs, nRuns, p)
}

// deltaNetCheck validates GatedDeltaNet's arguments for op and returns the
// workgroup size (both kernels') and the push constants.
func (k *Kernels) deltaNetCheck(op string, out, qkv, beta, alpha, dtBias, a, state, runs vk.Range, nRuns int, p DeltaNetParams) (uint32, deltaNetPush, error) {
	switch {
	case p.KHeads <= 0:
		return 0, deltaNetPush{}, fmt.Errorf("ops: %s: KHeads %d, want at least 1", op, p.KHeads)
	case p.VHeads <= 0 || p.VHeads%p.KHeads != 0:
		return 0, deltaNetPush{}, fmt.Errorf("ops: %s: VHeads %d, want a positive multiple of KHeads %d", op, p.VHeads, p.KHeads)
	case p.HeadK <= 0 || p.HeadK > DeltaNetMaxHead:
		return 0, deltaNetPush{}, fmt.Errorf("ops: %s: HeadK %d, want 1..%d", op, p.HeadK, DeltaNetMaxHead)
	case p.HeadV <= 0 || p.HeadV > DeltaNetMaxHead:
		return 0, deltaNetPush{}, fmt.Errorf("ops: %s: HeadV %d, want 1..%d", op, p.HeadV, DeltaNetMaxHead)
	case p.Slots <= 0:
		return 0, deltaNetPush{}, fmt.Errorf("ops: %s: Slots %d, want at least 1", op, p.Slots)
	case !(p.Eps >= 0):
		return 0, deltaNetPush{}, fmt.Errorf("ops: %s: Eps %g, want at least 0", op, p.Eps)
	case nRuns <= 0:
		return 0, deltaNetPush{}, fmt.Errorf("ops: %s: nRuns %d, want at least 1", op, nRuns)
	case uint64(nRuns)*uint64(p.VHeads) > 1<<31:
		return 0, deltaNetPush{}, fmt.Errorf("ops: %s: %d runs of %d heads exceed 32-bit indexing", op, nRuns, p.VHeads)
	}
	wg := uint32(max(p.HeadK, p.HeadV)+31) &^ 31
	if lim := k.dev.Limits(); wg > lim.MaxWorkgroupSize[0] || wg > lim.MaxWorkgroupInvocations {
		return 0, deltaNetPush{}, fmt.Errorf("ops: %s: heads of %d keys and %d values need a workgroup of %d, more than the device's %d", op, p.HeadK, p.HeadV, wg,
			min(lim.MaxWorkgroupSize[0], lim.MaxWorkgroupInvocations))
	}
	cols, vw := uint64(p.QKVCols()), uint64(p.VHeads*p.HeadV)
	vh := uint64(p.VHeads)
	stateN := uint64(p.Slots) * uint64(p.StateLen())
	for _, o := range []struct {
		what string
		r    vk.Range
		n    uint64
	}{{"out", out, vw}, {"qkv", qkv, cols}, {"beta", beta, vh}, {"alpha", alpha, vh}, {"dtBias", dtBias, vh}, {"a", a, vh},
		{"state", state, stateN}, {"runs", runs, 4 * uint64(nRuns)}} {
		if err := k.oneBinding(op, o.what, o.r, 4*o.n); err != nil {
			return 0, deltaNetPush{}, err
		}
	}
	rows := k.runRows([]int{int(cols), int(vw), p.VHeads, p.VHeads}, qkv, out, beta, alpha)
	return wg, deltaNetPush{KHeads: uint32(p.KHeads), VHeads: uint32(p.VHeads), Slots: uint32(p.Slots), Rows: uint32(rows),
		NRuns: uint32(nRuns), Eps: p.Eps}, nil
}

// recordDeltaNet records one of the gated delta rule's kernels (their
// bindings are the same): one workgroup per value head and run.
func (k *Kernels) recordDeltaNet(c *vk.Cmd, name string, spec []uint32, push *deltaNetPush, out, qkv, beta, alpha, dtBias, a, state, runs vk.Range, nRuns int, p DeltaNetParams) error {
	cols, vw := uint64(p.QKVCols()), uint64(p.VHeads*p.HeadV)
	vh := uint64(p.VHeads)
	stateN := uint64(p.Slots) * uint64(p.StateLen())
	return Record(k, c, name, spec, k.Groups(uint32(nRuns*p.VHeads)), push,
		k.window(qkv, 0, 4*cols), k.window(beta, 0, 4*vh), k.window(alpha, 0, 4*vh), k.window(dtBias, 0, 4*vh),
		k.window(a, 0, 4*vh), k.window(state, 0, 4*stateN), k.window(runs, 0, 16*uint64(nRuns)), k.window(out, 0, 4*vw))
}
