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
func (k *Kernels) GatedDeltaNet(c *vk.Cmd, out, qkv, beta, alpha, dtBias, a, state, runs vk.Range, nRuns int, p DeltaNetParams) error {
	const op = "GatedDeltaNet"
	switch {
	case p.KHeads <= 0:
		return fmt.Errorf("ops: %s: KHeads %d, want at least 1", op, p.KHeads)
	case p.VHeads <= 0 || p.VHeads%p.KHeads != 0:
		return fmt.Errorf("ops: %s: VHeads %d, want a positive multiple of KHeads %d", op, p.VHeads, p.KHeads)
	case p.HeadK <= 0 || p.HeadK > DeltaNetMaxHead:
		return fmt.Errorf("ops: %s: HeadK %d, want 1..%d", op, p.HeadK, DeltaNetMaxHead)
	case p.HeadV <= 0 || p.HeadV > DeltaNetMaxHead:
		return fmt.Errorf("ops: %s: HeadV %d, want 1..%d", op, p.HeadV, DeltaNetMaxHead)
	case p.Slots <= 0:
		return fmt.Errorf("ops: %s: Slots %d, want at least 1", op, p.Slots)
	case !(p.Eps >= 0):
		return fmt.Errorf("ops: %s: Eps %g, want at least 0", op, p.Eps)
	case nRuns <= 0:
		return fmt.Errorf("ops: %s: nRuns %d, want at least 1", op, nRuns)
	case uint64(nRuns)*uint64(p.VHeads) > 1<<31:
		return fmt.Errorf("ops: %s: %d runs of %d heads exceed 32-bit indexing", op, nRuns, p.VHeads)
	}
	wg := uint32(max(p.HeadK, p.HeadV)+31) &^ 31
	if lim := k.dev.Limits(); wg > lim.MaxWorkgroupSize[0] || wg > lim.MaxWorkgroupInvocations {
		return fmt.Errorf("ops: %s: heads of %d keys and %d values need a workgroup of %d, more than the device's %d", op, p.HeadK, p.HeadV, wg,
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
			return err
		}
	}
	rows := k.runRows([]int{int(cols), int(vw), p.VHeads, p.VHeads}, qkv, out, beta, alpha)
	push := deltaNetPush{KHeads: uint32(p.KHeads), VHeads: uint32(p.VHeads), Slots: uint32(p.Slots), Rows: uint32(rows),
		NRuns: uint32(nRuns), Eps: p.Eps}
	return Record(k, c, "delta_net", []uint32{wg, uint32(p.HeadK), uint32(p.HeadV)}, k.Groups(uint32(nRuns*p.VHeads)), &push,
		k.window(qkv, 0, 4*cols), k.window(beta, 0, 4*vh), k.window(alpha, 0, 4*vh), k.window(dtBias, 0, 4*vh),
		k.window(a, 0, 4*vh), k.window(state, 0, 4*stateN), k.window(runs, 0, 16*uint64(nRuns)), k.window(out, 0, 4*vw))
}
