package ops

import "testing"

func TestPlanRowChunks(t *testing.T) {
	tests := []struct {
		name                     string
		offset, rowBytes         uint64
		rows                     int
		bufSize, maxRange, align uint64
	}{
		{"fits one binding", 0, 2048, 100, 2048 * 100, 1 << 27, 16},
		{"f16 embedding over 128 MiB", 64, 2048, 150000, 64 + 2048*150000, 1 << 27, 16},
		{"q4_0 rows unaligned", 18, 18 * 3, 1000, 18 + 54*1000 + 2, 4096, 16},
		{"q6_k odd offset align 64", 210, 210 * 5, 777, 210 + 1050*777 + 4, 10000, 64},
		{"one row per binding", 6, 1000, 9, 6 + 9000 + 2, 1020, 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			chunks, err := planRowChunks(tt.offset, tt.rowBytes, tt.rows, tt.bufSize, tt.maxRange, tt.align)
			if err != nil {
				t.Fatalf("planRowChunks = %v, want success", err)
			}
			next := 0
			for i, c := range chunks {
				if c.rowBegin != next || c.rowEnd <= c.rowBegin {
					t.Fatalf("chunk %d rows [%d, %d), want to start at %d and be non-empty", i, c.rowBegin, c.rowEnd, next)
				}
				next = c.rowEnd
				if c.bindOffset%tt.align != 0 || c.bindOffset%4 != 0 {
					t.Errorf("chunk %d offset %d, want a multiple of %d and 4", i, c.bindOffset, tt.align)
				}
				if c.bindRange > tt.maxRange || c.bindRange%4 != 0 || c.bindOffset+c.bindRange > tt.bufSize {
					t.Errorf("chunk %d range %d at %d, want a word multiple <= %d inside %d bytes", i, c.bindRange, c.bindOffset, tt.maxRange, tt.bufSize)
				}
				first := tt.offset + uint64(c.rowBegin)*tt.rowBytes
				if c.bindOffset+uint64(c.wOff) != first {
					t.Errorf("chunk %d addresses byte %d, want %d", i, c.bindOffset+uint64(c.wOff), first)
				}
				if uint64(c.wOff)+uint64(c.rowEnd-c.rowBegin)*tt.rowBytes > c.bindRange {
					t.Errorf("chunk %d rows end past its binding", i)
				}
			}
			if next != tt.rows {
				t.Errorf("chunks cover %d rows, want %d", next, tt.rows)
			}
		})
	}
	if _, err := planRowChunks(0, 4096, 4, 1<<20, 2048, 16); err == nil {
		t.Error("planRowChunks(row larger than a binding) succeeded, want an error")
	}
	if _, err := planRowChunks(0, 18, 3, 54, 1<<20, 16); err == nil {
		t.Error("planRowChunks(buffer not padded to a word) succeeded, want an error")
	}
}
