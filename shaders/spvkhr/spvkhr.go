// Package spvkhr rewrites SPIR-V modules that use SPV_NV_cooperative_matrix
// into their SPV_KHR_cooperative_matrix equivalent. glslang 11 (the glslc
// vkllm builds with) knows only GL_NV_cooperative_matrix, so the
// cooperative-matrix kernels are written against it and shaders/compile.sh
// derives a KHR twin of every such variant with this package
// (tools/spvkhr).
//
// The two extensions differ in a handful of instructions:
//
//	OpCapability CooperativeMatrixNV (5357)  -> CooperativeMatrixKHR (6022)
//	OpExtension "SPV_NV_cooperative_matrix"  -> "SPV_KHR_cooperative_matrix"
//	OpTypeCooperativeMatrixNV (5358)  %comp %scope %rows %cols
//	  -> OpTypeCooperativeMatrixKHR (4456) %comp %scope %rows %cols %use
//	OpCooperativeMatrixLoadNV (5359)  %ptr %stride %colMajor [mem]
//	  -> OpCooperativeMatrixLoadKHR (4457) %ptr %layout %stride [mem]
//	OpCooperativeMatrixStoreNV (5360) %ptr %obj %stride %colMajor [mem]
//	  -> OpCooperativeMatrixStoreKHR (4458) %ptr %obj %layout %stride [mem]
//	OpCooperativeMatrixMulAddNV (5361) -> OpCooperativeMatrixMulAddKHR (4459)
//	OpCooperativeMatrixLengthNV (5362) -> OpCooperativeMatrixLengthKHR (4460)
//
// The KHR type's Use (MatrixA 0, MatrixB 1, MatrixAccumulator 2) is not in
// the NV type; it is inferred from the operands of the multiply-adds: a type
// must appear in exactly one role (A, B, or C and result). The layout
// (RowMajor 0, ColumnMajor 1) replaces the NV boolean, which must be a
// constant. Integer component types, whose KHR multiply-add would need
// signedness operands, are refused.
package spvkhr

import (
	"encoding/binary"
	"fmt"
)

// SPIR-V numbers used here (SPIR-V 1.6 unified headers).
const (
	magic = 0x07230203

	opName              = 5
	opExtension         = 10
	opCapability        = 17
	opTypeInt           = 21
	opTypeFloat         = 22
	opConstantTrue      = 41
	opConstantFalse     = 42
	opConstant          = 43
	opSpecConstantTrue  = 48
	opSpecConstantFalse = 49
	opFunction          = 54
	opTypeCoopMatNV     = 5358
	opCoopMatLoadNV     = 5359
	opCoopMatStoreNV    = 5360
	opCoopMatMulAddNV   = 5361
	opCoopMatLengthNV   = 5362
	opTypeCoopMatKHR    = 4456
	opCoopMatLoadKHR    = 4457
	opCoopMatStoreKHR   = 4458
	opCoopMatMulAddKHR  = 4459
	opCoopMatLengthKHR  = 4460
	capCoopMatNV        = 5357
	capCoopMatKHR       = 6022
	extNV               = "SPV_NV_cooperative_matrix"
	extKHR              = "SPV_KHR_cooperative_matrix"
)

// Use is a KHR cooperative matrix's role in a multiply-add.
type Use uint32

// The uses, as SPIR-V's CooperativeMatrixUse.
const (
	UseA           Use = 0
	UseB           Use = 1
	UseAccumulator Use = 2
)

// String returns the use's SPIR-V name.
func (u Use) String() string {
	switch u {
	case UseA:
		return "MatrixAKHR"
	case UseB:
		return "MatrixBKHR"
	case UseAccumulator:
		return "MatrixAccumulatorKHR"
	}
	return fmt.Sprintf("Use(%d)", uint32(u))
}

// The KHR memory layouts.
const (
	layoutRowMajor    = 0
	layoutColumnMajor = 1
)

// FormatError reports a module that cannot be rewritten: Word is the word
// offset of the instruction at fault (0 for the header or the module as a
// whole).
type FormatError struct {
	Word int
	Msg  string
}

func (e *FormatError) Error() string {
	if e.Word == 0 {
		return "spvkhr: " + e.Msg
	}
	return fmt.Sprintf("spvkhr: word %d: %s", e.Word, e.Msg)
}

func errorf(word int, format string, args ...any) error {
	return &FormatError{Word: word, Msg: fmt.Sprintf(format, args...)}
}

// Inst is one instruction: its opcode, its operand words (after the first
// word) and its word offset in the module.
type Inst struct {
	Op   uint16
	Args []uint32
	At   int
}

// Module is a parsed SPIR-V module.
type Module struct {
	Header [5]uint32 // magic, version, generator, id bound, schema
	Insts  []Inst
}

// Parse splits a little-endian SPIR-V binary into instructions.
func Parse(code []byte) (*Module, error) {
	if len(code)%4 != 0 || len(code) < 20 {
		return nil, errorf(0, "%d bytes is not a SPIR-V module (want a whole number of words, at least 5)", len(code))
	}
	words := make([]uint32, len(code)/4)
	for i := range words {
		words[i] = binary.LittleEndian.Uint32(code[4*i:])
	}
	if words[0] != magic {
		return nil, errorf(0, "magic %#x, want %#x (a little-endian SPIR-V module)", words[0], magic)
	}
	m := &Module{}
	copy(m.Header[:], words[:5])
	for at := 5; at < len(words); {
		wc := int(words[at] >> 16)
		if wc == 0 || at+wc > len(words) {
			return nil, errorf(at, "instruction of %d words overruns the %d-word module", wc, len(words))
		}
		m.Insts = append(m.Insts, Inst{Op: uint16(words[at]), Args: words[at+1 : at+wc], At: at})
		at += wc
	}
	return m, nil
}

// Bytes encodes the module.
func (m *Module) Bytes() []byte {
	n := 5
	for _, in := range m.Insts {
		n += 1 + len(in.Args)
	}
	out := make([]byte, 0, 4*n)
	for _, w := range m.Header {
		out = binary.LittleEndian.AppendUint32(out, w)
	}
	for _, in := range m.Insts {
		out = binary.LittleEndian.AppendUint32(out, uint32(1+len(in.Args))<<16|uint32(in.Op))
		for _, w := range in.Args {
			out = binary.LittleEndian.AppendUint32(out, w)
		}
	}
	return out
}

// String decodes a literal string operand (nul-terminated, packed four
// bytes a word).
func String(args []uint32) string {
	b := make([]byte, 0, 4*len(args))
	for _, w := range args {
		for i := 0; i < 4; i++ {
			c := byte(w >> (8 * i))
			if c == 0 {
				return string(b)
			}
			b = append(b, c)
		}
	}
	return string(b)
}

// encodeString encodes s as a literal string operand.
func encodeString(s string) []uint32 {
	b := append([]byte(s), 0)
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	w := make([]uint32, len(b)/4)
	for i := range w {
		w[i] = binary.LittleEndian.Uint32(b[4*i:])
	}
	return w
}

// noResultType lists the opcodes that may appear in function bodies without
// a result type: everything else there has a result type in its first
// operand and a result id in its second.
var noResultType = map[uint16]bool{
	0: true, 8: true, 56: true, 62: true, 63: true, 64: true, // Nop, Line, FunctionEnd, Store, CopyMemory, CopyMemorySized
	224: true, 225: true, 228: true, // ControlBarrier, MemoryBarrier, AtomicStore
	246: true, 247: true, 248: true, 249: true, 250: true, 251: true, // LoopMerge, SelectionMerge, Label, Branch, BranchConditional, Switch
	252: true, 253: true, 254: true, 255: true, 256: true, 257: true, // Kill, Return, ReturnValue, Unreachable, LifetimeStart, LifetimeStop
	317: true, 4416: true, 5360: true, 4458: true, // NoLine, TerminateInvocation, the cooperative stores
}

// NVToKHR rewrites an SPV_NV_cooperative_matrix module into an
// SPV_KHR_cooperative_matrix one (see the package comment). A module
// without the NV capability is an error: there is nothing to rewrite.
func NVToKHR(code []byte) ([]byte, error) {
	m, err := Parse(code)
	if err != nil {
		return nil, err
	}
	if err := m.nvToKHR(); err != nil {
		return nil, err
	}
	return m.Bytes(), nil
}

type intType struct{ width, signed uint32 }

type coopType struct {
	at   int // index in m.Insts
	comp uint32
	use  uint8 // bit set of 1<<Use
}

func (m *Module) nvToKHR() error {
	ints := map[uint32]intType{}   // OpTypeInt id -> type
	floats := map[uint32]bool{}    // OpTypeFloat ids
	bools := map[uint32]uint32{}   // OpConstantTrue/False id -> 1/0
	specBools := map[uint32]bool{} // OpSpecConstantTrue/False ids
	consts := map[[2]uint32]uint32{}
	constType := map[uint32]uint32{} // OpConstant id -> its type
	coop := map[uint32]*coopType{}
	valType := map[uint32]uint32{} // result id -> result type, in function bodies
	var coopOrder []uint32
	hasCap := false
	inFunc := false
	for i, in := range m.Insts {
		a := in.Args
		switch {
		case in.Op == opCapability && len(a) == 1 && a[0] == capCoopMatNV:
			hasCap = true
		case in.Op == opFunction:
			inFunc = true
		}
		if inFunc {
			if !noResultType[in.Op] && len(a) >= 2 {
				valType[a[1]] = a[0]
			}
			continue
		}
		switch in.Op {
		case opTypeInt:
			if len(a) == 3 {
				ints[a[0]] = intType{a[1], a[2]}
			}
		case opTypeFloat:
			if len(a) >= 1 {
				floats[a[0]] = true
			}
		case opConstantTrue, opConstantFalse:
			if len(a) == 2 {
				bools[a[1]] = b2u(in.Op == opConstantTrue)
			}
		case opSpecConstantTrue, opSpecConstantFalse:
			if len(a) == 2 {
				specBools[a[1]] = true
			}
		case opConstant:
			if len(a) == 3 {
				if _, seen := consts[[2]uint32{a[0], a[2]}]; !seen {
					consts[[2]uint32{a[0], a[2]}] = a[1]
				}
				constType[a[1]] = a[0]
			}
		case opTypeCoopMatNV:
			if len(a) != 5 {
				return errorf(in.At, "OpTypeCooperativeMatrixNV has %d operands, want 5", len(a))
			}
			if !floats[a[1]] {
				return errorf(in.At, "cooperative matrix type %%%d: component type %%%d is not a float type (integer matrices are not supported)", a[0], a[1])
			}
			coop[a[0]] = &coopType{at: i, comp: a[1]}
			coopOrder = append(coopOrder, a[0])
		}
	}
	if !hasCap {
		return errorf(0, "module does not declare the CooperativeMatrixNV capability")
	}
	if len(coopOrder) == 0 {
		return errorf(0, "module declares no OpTypeCooperativeMatrixNV")
	}

	// Infer each type's use from the multiply-adds.
	for _, in := range m.Insts {
		if in.Op != opCoopMatMulAddNV {
			continue
		}
		a := in.Args
		if len(a) != 5 {
			return errorf(in.At, "OpCooperativeMatrixMulAddNV has %d operands, want 5", len(a))
		}
		roles := [4]struct {
			id  uint32
			use Use
		}{{valType[a[2]], UseA}, {valType[a[3]], UseB}, {valType[a[4]], UseAccumulator}, {a[0], UseAccumulator}}
		for _, r := range roles {
			t := coop[r.id]
			if t == nil {
				return errorf(in.At, "OpCooperativeMatrixMulAddNV operand of type %%%d is not a cooperative matrix", r.id)
			}
			t.use |= 1 << r.use
		}
	}
	uses := map[uint32]Use{}
	for _, id := range coopOrder {
		t := coop[id]
		switch t.use {
		case 1 << UseA:
			uses[id] = UseA
		case 1 << UseB:
			uses[id] = UseB
		case 1 << UseAccumulator:
			uses[id] = UseAccumulator
		case 0:
			return errorf(m.Insts[t.at].At, "cannot infer the use of cooperative matrix type %%%d: no OpCooperativeMatrixMulAddNV takes it", id)
		default:
			return errorf(m.Insts[t.at].At, "cooperative matrix type %%%d is used in more than one role of OpCooperativeMatrixMulAddNV (A, B, accumulator): give the A and B matrices distinct dimension constants", id)
		}
	}

	// The Use and layout operands are ids of 32-bit integer constants: of
	// the type of the first matrix's scope constant, which precedes it.
	first := coop[coopOrder[0]]
	scope := m.Insts[first.at].Args[2]
	it, ok := constType[scope]
	if !ok || ints[it].width != 32 {
		return errorf(m.Insts[first.at].At, "the scope of cooperative matrix type %%%d is not a 32-bit integer OpConstant", coopOrder[0])
	}
	bound := m.Header[3]
	var added []Inst
	constant := func(v uint32) uint32 {
		if id, ok := consts[[2]uint32{it, v}]; ok && id != 0 {
			return id
		}
		id := bound
		bound++
		consts[[2]uint32{it, v}] = id
		added = append(added, Inst{Op: opConstant, Args: []uint32{it, id, v}})
		return id
	}
	// Reuse only constants declared before the first matrix type.
	for key, id := range consts {
		if defAt(m, id) > first.at {
			delete(consts, key)
		}
	}
	useConst := [3]uint32{constant(uint32(UseA)), constant(uint32(UseB)), constant(uint32(UseAccumulator))}
	layoutConst := [2]uint32{constant(layoutRowMajor), constant(layoutColumnMajor)}

	out := make([]Inst, 0, len(m.Insts)+len(added))
	for i, in := range m.Insts {
		a := in.Args
		if i == first.at {
			out = append(out, added...)
		}
		switch in.Op {
		case opCapability:
			if len(a) == 1 && a[0] == capCoopMatNV {
				in = Inst{Op: opCapability, Args: []uint32{capCoopMatKHR}, At: in.At}
			}
		case opExtension:
			if String(a) == extNV {
				in = Inst{Op: opExtension, Args: encodeString(extKHR), At: in.At}
			}
		case opTypeCoopMatNV:
			in = Inst{Op: opTypeCoopMatKHR, Args: []uint32{a[0], a[1], a[2], a[3], a[4], useConst[uses[a[0]]]}, At: in.At}
		case opCoopMatLoadNV:
			if len(a) < 5 {
				return errorf(in.At, "OpCooperativeMatrixLoadNV has %d operands, want at least 5", len(a))
			}
			l, err := layout(in, a[4], bools, specBools)
			if err != nil {
				return err
			}
			args := append([]uint32{a[0], a[1], a[2], layoutConst[l], a[3]}, a[5:]...)
			in = Inst{Op: opCoopMatLoadKHR, Args: args, At: in.At}
		case opCoopMatStoreNV:
			if len(a) < 4 {
				return errorf(in.At, "OpCooperativeMatrixStoreNV has %d operands, want at least 4", len(a))
			}
			l, err := layout(in, a[3], bools, specBools)
			if err != nil {
				return err
			}
			args := append([]uint32{a[0], a[1], layoutConst[l], a[2]}, a[4:]...)
			in = Inst{Op: opCoopMatStoreKHR, Args: args, At: in.At}
		case opCoopMatMulAddNV:
			in = Inst{Op: opCoopMatMulAddKHR, Args: a, At: in.At}
		case opCoopMatLengthNV:
			in = Inst{Op: opCoopMatLengthKHR, Args: a, At: in.At}
		}
		out = append(out, in)
	}
	m.Insts = out
	m.Header[3] = bound
	return nil
}

// layout returns the KHR layout for the NV ColumnMajor operand id.
func layout(in Inst, id uint32, bools map[uint32]uint32, spec map[uint32]bool) (uint32, error) {
	if v, ok := bools[id]; ok {
		return v, nil
	}
	if spec[id] {
		return 0, errorf(in.At, "the ColumnMajor operand %%%d is a specialization constant; the KHR layout must be known", id)
	}
	return 0, errorf(in.At, "the ColumnMajor operand %%%d is not a boolean constant", id)
}

// defAt returns the index of the instruction before the first function
// that defines id (its result in the second operand, as constants do), or
// len(m.Insts).
func defAt(m *Module, id uint32) int {
	for i, in := range m.Insts {
		if in.Op == opFunction {
			break
		}
		if len(in.Args) >= 2 && in.Args[1] == id && in.Op != opName {
			return i
		}
	}
	return len(m.Insts)
}

func b2u(b bool) uint32 {
	if b {
		return 1
	}
	return 0
}
