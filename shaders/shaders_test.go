package shaders

import (
	"encoding/binary"
	"testing"
)

func TestEveryVariantIsSPIRV(t *testing.T) {
	names := Names()
	if len(names) == 0 {
		t.Fatal("Names() is empty; make shaders compiled nothing")
	}
	for _, name := range names {
		code, err := SPIRV(name)
		if err != nil {
			t.Fatal(err)
		}
		if len(code) < 20 || len(code)%4 != 0 {
			t.Errorf("SPIRV(%q): %d bytes, want a whole number of words >= 20", name, len(code))
			continue
		}
		if magic := binary.LittleEndian.Uint32(code); magic != 0x07230203 {
			t.Errorf("SPIRV(%q) magic = %#x, want 0x07230203", name, magic)
		}
	}
	if _, err := SPIRV("no_such_kernel"); err == nil {
		t.Error(`SPIRV("no_such_kernel") succeeded, want an error`)
	}
}
