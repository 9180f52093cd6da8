package sampling

import (
	"math"
	"testing"
)

func TestExpNonPos(t *testing.T) {
	xs := []float64{0, -1e-9, -0.3, -0.35, -0.5, -1, -2.5, -10, -33.3, -87.3, -103.9, -700, -744, -746, 0.5, 3, 80, 709.5, math.Inf(-1)}
	for i := 0; i < 20000; i++ {
		xs = append(xs, -float64(i)*0.00517, float64(i)*0.0001)
	}
	for _, x := range xs {
		got, want := expNonPos(x), math.Exp(x)
		if want == 0 || math.IsInf(want, 0) {
			if got != want {
				t.Errorf("expNonPos(%v) = %v, want %v", x, got, want)
			}
			continue
		}
		// Subnormal results keep fewer digits; elsewhere 1e-14 relative.
		tol := 1e-14
		if want < 0x1p-1022 {
			tol = 1e-3
		}
		if rel := math.Abs(got-want) / want; !(rel <= tol) {
			t.Errorf("expNonPos(%v) = %v, want %v (relative error %.2g)", x, got, want, rel)
		}
		if f32, w32 := float32(got), float32(want); x > -87 && f32 != w32 && !(math.Abs(float64(f32-w32)) <= float64(w32)*1.2e-7) {
			t.Errorf("float32(expNonPos(%v)) = %v, want %v within 1 ulp", x, f32, w32)
		}
	}
	for j, v := range exp2Table {
		if want := math.Exp2(float64(j) / 32); !(math.Abs(v-want) <= want*0x1p-52) {
			t.Errorf("exp2Table[%d] = %v, want %v", j, v, want)
		}
	}
	if got := expNonPos(math.NaN()); !math.IsNaN(got) {
		t.Errorf("expNonPos(NaN) = %v, want NaN", got)
	}
}
