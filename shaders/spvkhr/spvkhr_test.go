package spvkhr

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/vkllm/vkllm/shaders"
)

func readFixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// coopInfo is what checkKHR learns of a rewritten module.
type coopInfo struct {
	// uses maps each matrix type's (component width, rows, columns) to
	// its Use.
	uses map[[3]uint32]Use
	// loads and stores list the layout and stride operands, in order.
	loads, stores [][2]uint32
	mulAdds       int
}

// checkKHR fails t unless m is a well-formed KHR cooperative-matrix
// module in the respects the rewrite touches: no NV instruction,
// capability or extension left; the KHR capability and extension; every
// type and constant id below the bound and defined once; every matrix type's Use a 32-bit
// integer constant of 0, 1 or 2 defined before it, its scope Subgroup; every multiply-add
// taking matrices of Use A, B and accumulator; every load and store with a
// constant layout of 0 or 1. It returns
// what it found, with constants resolved to their values.
func checkKHR(t *testing.T, code []byte) coopInfo {
	t.Helper()
	m, err := Parse(code)
	if err != nil {
		t.Fatalf("Parse(rewritten) = %v", err)
	}
	bound := m.Header[3]
	ints := map[uint32]uint32{}     // OpTypeInt id -> width
	floats := map[uint32]uint32{}   // OpTypeFloat id -> width
	consts := map[uint32]uint32{}   // 32-bit integer OpConstant id -> value
	specs := map[uint32]bool{}      // OpSpecConstant ids (dimensions)
	types := map[uint32][4]uint32{} // matrix type id -> width, rows, columns, use
	valType := map[uint32]uint32{}
	defined := map[uint32]bool{}
	info := coopInfo{uses: map[[3]uint32]Use{}}
	var caps []uint32
	var exts []string
	inFunc := false
	dim := func(id uint32) uint32 {
		if v, ok := consts[id]; ok {
			return v
		}
		if specs[id] {
			return 0 // a specialization constant: unknown here
		}
		t.Errorf("matrix dimension %%%d is not a constant defined before its type", id)
		return 0
	}
	for _, in := range m.Insts {
		a := in.Args
		switch in.Op {
		case opCapability:
			caps = append(caps, a[0])
		case opExtension:
			exts = append(exts, String(a))
		case opFunction:
			inFunc = true
		case opTypeCoopMatNV, opCoopMatLoadNV, opCoopMatStoreNV, opCoopMatMulAddNV, opCoopMatLengthNV:
			t.Errorf("word %d: NV opcode %d left in the module", in.At, in.Op)
		}
		if inFunc && !noResultType[in.Op] && len(a) >= 2 {
			valType[a[1]] = a[0]
		}
		// Types (OpTypeVoid 19 .. OpTypeForwardPointer 39) define their
		// first operand, constants (OpConstantTrue 41 .. OpSpecConstantOp
		// 52) their second.
		if id, ok := uint32(0), false; !inFunc {
			switch {
			case in.Op >= 19 && in.Op <= 38 || in.Op == opTypeCoopMatKHR:
				id, ok = a[0], true
			case in.Op >= 41 && in.Op <= 52:
				id, ok = a[1], true
			}
			if ok && defined[id] {
				t.Errorf("word %d: id %%%d defined twice", in.At, id)
			}
			if ok {
				defined[id] = true
			}
		}
		switch in.Op {
		case opTypeInt:
			ints[a[0]] = a[1]
		case opTypeFloat:
			floats[a[0]] = a[1]
		case opConstant:
			if ints[a[0]] == 32 {
				consts[a[1]] = a[2]
			}
		case 50: // OpSpecConstant
			specs[a[1]] = true
		case 52: // OpSpecConstantOp
			specs[a[1]] = true
		case opTypeCoopMatKHR:
			if len(a) != 6 {
				t.Fatalf("word %d: OpTypeCooperativeMatrixKHR with %d operands, want 6", in.At, len(a))
			}
			use, ok := consts[a[5]]
			if !ok || use > 2 {
				t.Errorf("word %d: matrix type %%%d: Use operand %%%d is not a constant 0, 1 or 2 defined before it", in.At, a[0], a[5])
			}
			if consts[a[2]] != 3 {
				t.Errorf("word %d: matrix type %%%d: scope %d, want Subgroup (3)", in.At, a[0], consts[a[2]])
			}
			k := [3]uint32{floats[a[1]], dim(a[3]), dim(a[4])}
			types[a[0]] = [4]uint32{k[0], k[1], k[2], use}
			info.uses[k] = Use(use)
		case opCoopMatLoadKHR, opCoopMatStoreKHR:
			l := a[3]
			if in.Op == opCoopMatStoreKHR {
				l = a[2]
			}
			v, ok := consts[l]
			if !ok || v > 1 {
				t.Errorf("word %d: layout operand %%%d is not a constant 0 or 1", in.At, l)
			}
			if in.Op == opCoopMatLoadKHR {
				if _, ok := types[a[0]]; !ok {
					t.Errorf("word %d: load of type %%%d, not a matrix type", in.At, a[0])
				}
				info.loads = append(info.loads, [2]uint32{v, consts[a[4]]})
			} else {
				info.stores = append(info.stores, [2]uint32{v, consts[a[3]]})
			}
		case opCoopMatMulAddKHR:
			info.mulAdds++
			for i, want := range []Use{UseA, UseB, UseAccumulator, UseAccumulator} {
				id := a[0] // the result
				if i < 3 {
					id = valType[a[2+i]]
				}
				if tt, ok := types[id]; !ok || Use(tt[3]) != want {
					t.Errorf("word %d: multiply-add operand %d has type %%%d (%v), want a matrix of Use %v", in.At, i, id, tt, want)
				}
			}
		}
	}
	if !contains(caps, capCoopMatKHR) || contains(caps, capCoopMatNV) {
		t.Errorf("capabilities %v, want %d and not %d", caps, capCoopMatKHR, capCoopMatNV)
	}
	if !containsString(exts, extKHR) || containsString(exts, extNV) {
		t.Errorf("extensions %q, want %q and not %q", exts, extKHR, extNV)
	}
	for id := range defined {
		if id >= bound {
			t.Errorf("id %%%d defined at or past the bound %d", id, bound)
		}
	}
	return info
}

func contains(s []uint32, v uint32) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

func containsString(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// TestNVToKHR rewrites the fixture testdata/coop.spv (coop.comp) and checks
// the result instruction by instruction: A (16 x 8 f16) of Use A, B (8 x 16
// f16) of Use B, C (16 x 16 f32) an accumulator; the loads' layouts
// row-major, column-major, column-major with strides 8, 8, 16; the store
// column-major with stride 16.
func TestNVToKHR(t *testing.T) {
	nv := readFixture(t, "coop.spv")
	khr, err := NVToKHR(nv)
	if err != nil {
		t.Fatalf("NVToKHR(coop.spv) = %v", err)
	}
	info := checkKHR(t, khr)
	wantUses := map[[3]uint32]Use{{16, 16, 8}: UseA, {16, 8, 16}: UseB, {32, 16, 16}: UseAccumulator}
	if len(info.uses) != len(wantUses) {
		t.Errorf("matrix types %v, want %v", info.uses, wantUses)
	}
	for k, want := range wantUses {
		if got, ok := info.uses[k]; !ok || got != want {
			t.Errorf("matrix type f%d %dx%d: Use %v (present %v), want %v", k[0], k[1], k[2], got, ok, want)
		}
	}
	wantLoads := [][2]uint32{{layoutRowMajor, 8}, {layoutColumnMajor, 8}, {layoutColumnMajor, 16}}
	if !equalPairs(info.loads, wantLoads) {
		t.Errorf("loads (layout, stride) = %v, want %v", info.loads, wantLoads)
	}
	if want := [][2]uint32{{layoutColumnMajor, 16}}; !equalPairs(info.stores, want) {
		t.Errorf("stores (layout, stride) = %v, want %v", info.stores, want)
	}
	if info.mulAdds != 1 {
		t.Errorf("%d multiply-adds, want 1", info.mulAdds)
	}
	// Everything else is the NV module's: the same instructions but for
	// the rewritten ones and the constants added before the first type.
	mn, _ := Parse(nv)
	mk, _ := Parse(khr)
	if len(mk.Insts) < len(mn.Insts) || len(mk.Insts) > len(mn.Insts)+5 {
		t.Errorf("%d instructions rewritten from %d, want the same plus at most 5 constants", len(mk.Insts), len(mn.Insts))
	}
	// A second rewrite finds no NV capability.
	if _, err := NVToKHR(khr); err == nil || !strings.Contains(err.Error(), "CooperativeMatrixNV") {
		t.Errorf("NVToKHR(its own output) = %v, want the missing NV capability", err)
	}
}

func equalPairs(a, b [][2]uint32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestNVToKHRShaders checks every *_nv variant compiled into the shaders
// package: its _khr twin exists, equals what NVToKHR makes of it now (the
// build ran this code) and passes checkKHR.
func TestNVToKHRShaders(t *testing.T) {
	n := 0
	for _, name := range shaders.Names() {
		base, ok := strings.CutSuffix(name, "_nv")
		if !ok {
			continue
		}
		n++
		t.Run(base, func(t *testing.T) {
			nv, _ := shaders.SPIRV(name)
			built, err := shaders.SPIRV(base + "_khr")
			if err != nil {
				t.Fatalf("no KHR twin: %v", err)
			}
			khr, err := NVToKHR(nv)
			if err != nil {
				t.Fatalf("NVToKHR(%s) = %v", name, err)
			}
			if !bytes.Equal(khr, built) {
				t.Errorf("NVToKHR(%s) differs from the built %s_khr (rerun shaders/compile.sh)", name, base)
			}
			info := checkKHR(t, khr)
			if info.mulAdds == 0 || len(info.loads) == 0 || len(info.stores) == 0 {
				t.Errorf("%d multiply-adds, %d loads, %d stores; want some of each", info.mulAdds, len(info.loads), len(info.stores))
			}
		})
	}
	if n == 0 {
		t.Fatal("no *_nv variant among the shaders")
	}
}

func TestNVToKHRErrors(t *testing.T) {
	coop := readFixture(t, "coop.spv")
	noCap := bytes.Clone(coop)
	m, _ := Parse(noCap)
	for _, in := range m.Insts {
		if in.Op == opCapability && in.Args[0] == capCoopMatNV {
			binary.LittleEndian.PutUint32(noCap[4*(in.At+1):], 1) // Shader
		}
	}
	badMagic := bytes.Clone(coop)
	badMagic[0] ^= 0xff
	// The last instruction (OpFunctionEnd) claims two words.
	overrun := bytes.Clone(coop)
	binary.LittleEndian.PutUint32(overrun[len(overrun)-4:], 2<<16|56)
	zeroWords := bytes.Clone(coop)
	binary.LittleEndian.PutUint32(zeroWords[20:], 0)
	cases := []struct {
		name string
		code []byte
		want string
	}{
		{"ambiguous", readFixture(t, "ambiguous.spv"), "more than one role"},
		{"integer", readFixture(t, "int8.spv"), "not a float type"},
		{"spec layout", readFixture(t, "speclayout.spv"), "specialization constant"},
		{"no capability", noCap, "does not declare the CooperativeMatrixNV capability"},
		{"magic", badMagic, "magic"},
		{"overrun", overrun, "overruns"},
		{"zero word count", zeroWords, "word 5: instruction of 0 words"},
		{"short", coop[:12], "not a SPIR-V module"},
		{"odd length", coop[:len(coop)-1], "not a SPIR-V module"},
		{"empty", nil, "not a SPIR-V module"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, err := NVToKHR(c.code)
			var fe *FormatError
			if err == nil || !errors.As(err, &fe) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("NVToKHR = %d bytes, %v; want a *FormatError containing %q", len(out), err, c.want)
			}
		})
	}
}

func TestParseBytesRoundTrip(t *testing.T) {
	for _, name := range []string{"coop.spv", "ambiguous.spv", "int8.spv"} {
		code := readFixture(t, name)
		m, err := Parse(code)
		if err != nil {
			t.Fatalf("Parse(%s) = %v", name, err)
		}
		if got := m.Bytes(); !bytes.Equal(got, code) {
			t.Errorf("Parse(%s).Bytes() differs from the input (%d bytes, want %d)", name, len(got), len(code))
		}
	}
}

func TestString(t *testing.T) {
	for _, s := range []string{"", "abc", "abcd", extKHR, extNV} {
		if got := String(encodeString(s)); got != s {
			t.Errorf("String(encodeString(%q)) = %q", s, got)
		}
		if n := len(encodeString(s)); n != len(s)/4+1 {
			t.Errorf("encodeString(%q) is %d words, want %d", s, n, len(s)/4+1)
		}
	}
}
