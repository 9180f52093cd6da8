// Package ops records the compute kernels (shaders/*.comp) into a vk.Cmd and
// holds their pure-Go CPU references (Ref*), which the engine's CPU
// reference forward pass reuses.
//
// # Tensors
//
// Kernels see vk.Ranges: byte ranges of device buffers, one per binding.
// Activations are f32, row-major, [row][col]; q/k/v are [row][head][dim].
// The KV cache is paged: per layer one K and one V pool of pages laid out
// [page][position in page][kv_head][head_dim] (f16, or q8_0/q4_0 blocks of
// 32 values: KVType), and a page table [slot][position / page size] of
// int32 page ids (KVParams); every batch row carries its slot and position
// in int32 buffers, so one dispatch serves rows of different sequences,
// and slots whose tables name the same pages share them. A range may hold more bytes than the op needs; only the first
// are touched.
//
// A binding can cover at most Device.Limits().MaxStorageBufferRange bytes
// (128 MiB on lavapipe). Element-wise ops split larger tensors into chunks
// of Device.MaxBinding() bytes and dispatch once per chunk (see Scale); row
// kernels bind a window per group of rows (see engine/ops matvec_plan.go).
// A dispatch that starts at the beginning of a caller's range binds from
// that offset to the end of the buffer, up to one binding (Kernels.window),
// so descriptor sets are cached per buffer and offset and reused whatever
// the step's batch size; kernels bound their work by the counts in their
// push constants and touch nothing past the caller's range.
//
// # Barriers and submission
//
// vk.Cmd puts a compute/transfer memory barrier between consecutive
// commands, so kernels may be recorded in program order without thinking
// about hazards; tests run with synchronization validation, which reports a
// missing barrier. A step records everything into one Cmd and calls Submit
// once (one vkQueueSubmit, one fence wait). Recording and submitting a step
// allocates nothing once pipelines and descriptor sets exist
// (TestStepRecordAllocs).
//
// # Adding a kernel
//
//  1. Write shaders/NAME.comp. Start with "#version 450" and
//     "#include \"common.glsl\"", which declares the workgroup size as
//     specialization constant 0 (WG), the local size from it, and
//     group_id() for 2-D grids. List variants as
//     "// variant: op_src_dst -DDEFINE=1" lines; put reductions in
//     reduce.glsl's wg_sum/wg_max (subgroup arithmetic under -DUSE_SUBGROUP,
//     shared memory otherwise; variants named op_src_dst_sg). Bindings are
//     set 0, binding 0..n-1, storage buffers; scalars go in one
//     push_constant block of 4-byte fields. Bounds-check first. Run
//     bash shaders/compile.sh.
//  2. Mirror the push block in a Go struct of uint32/int32/float32 fields in
//     the same order (e.g. RMSNormPush).
//  3. Record it: ops.Record(k, c, "op_src_dst", []uint32{k.WG()},
//     k.Groups(n), &push, src, dst) gets or creates the pipeline from
//     shaders.SPIRV(name) (cached by name, bindings, push size and spec
//     constants) and calls c.Dispatch, which checks binding count, push
//     size, range sizes and alignment, reuses a cached descriptor set for
//     the same ranges, and inserts a compute->compute barrier after the
//     previous command. Use c.NoBarrier() before a dispatch that does not
//     depend on the previous one. One c.Submit() per graph: one queue
//     submit and one fence wait.
//  4. Write the CPU reference (RefOp) over []float32, exported, mirroring
//     the shader's math.
//  5. Test it (helpers in helpers_test.go; norm_test.go is a small
//     example): newRig opens the device with vktest.Open, which enables
//     VK_LAYER_KHRONOS_validation with synchronization validation and fails
//     the test on any message, and seeds an RNG from the time or
//     $VKLLM_SEED (logged); fill inputs over odd shapes (not multiples of the
//     workgroup); allocate outputs with rig.buf, which poisons them with NaN;
//     dispatch with rig.run; compare with the reference by closeTo within a
//     tolerance fitted to the arithmetic (f32 ~1e-5, f16 ~1e-3). both() runs
//     a test over the shared-memory and subgroup variants.
//     VKLLM_FORCE_STAGING=1 runs a suite through the discrete-GPU (staging)
//     buffer path on a UMA device.
//
// # Kernels
//
// RMSNorm (optionally times a weight), LayerNorm, RoPE (normal and NeoX,
// per-row positions, partial rotary dims, linear frequency scaling,
// optional frequency factors), SoftMax (scale, optional mask), SwiGLU, GELU,
// Add/Mul (with row broadcast, so Add is also bias add), Scale, Copy between
// f32 and f16, KVWrite, Attention (flash-style: online softmax over tiles
// of keys held in shared memory, causal or not, GQA with up to 8 query
// heads per workgroup sharing each K/V read, optional key splits merged by
// a second kernel for decoding on GPUs (AttentionSplits sizes them from the
// longest row's keys and the device's compute units); for prefill-sized batches a
// query-tiled kernel serves 4-16 consecutive rows of one slot per
// workgroup, each K/V tile read once for all of them, and the per-row
// kernel the tiles whose rows belong to several slots), Argmax, TopK and
// Fill. Qwen3.5's linear attention takes SSMConv (a causal depthwise
// convolution with SiLU), GatedDeltaNet (the gated delta rule) and
// Sigmoid; the first two walk the batch as sequence runs (SeqRun) and
// carry a state per slot from one batch to the next.
//
// Weight kernels read matrices in their GGUF format and dequantize inside
// the shader: GetRows (embedding lookup, any supported format to f32),
// MatVec (up to MatVecMaxCols activation columns per read of the weight,
// one or several threads per row depending on its width), MatMul (tiled
// through shared memory for larger batches) and MulMat, which picks one of
// the two by the number of rows (the crossover and the threads per row
// differ on CPU devices, see Kernels); MulMatAdd adds the product to its
// output (residual connections). PrepareWeight compiles the pipelines of
// one weight shape ahead of time; the engine calls it at load for each
// distinct (format, width, add).
package ops
