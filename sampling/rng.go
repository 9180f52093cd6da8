package sampling

// mt19937 is the 32-bit Mersenne Twister (Matsumoto and Nishimura 1998),
// the generator llama.cpp's samplers use (std::mt19937). With the same
// seed, the same candidates in the same order and the same uniform
// construction (canonical below), a chain draws the same tokens as
// llama.cpp does.
type mt19937 struct {
	state [mtN]uint32
	index int
}

const (
	mtN = 624
	mtM = 397
)

// seed initializes the state from a 32-bit seed as std::mt19937(seed) does.
func (mt *mt19937) seed(s uint32) {
	mt.state[0] = s
	for i := 1; i < mtN; i++ {
		prev := mt.state[i-1]
		mt.state[i] = 1812433253*(prev^(prev>>30)) + uint32(i)
	}
	mt.index = mtN
}

// next returns the next 32-bit output.
func (mt *mt19937) next() uint32 {
	if mt.index >= mtN {
		mt.twist()
	}
	y := mt.state[mt.index]
	mt.index++
	y ^= y >> 11
	y ^= (y << 7) & 0x9d2c5680
	y ^= (y << 15) & 0xefc60000
	y ^= y >> 18
	return y
}

func (mt *mt19937) twist() {
	const upper, lower, matrix = 0x80000000, 0x7fffffff, 0x9908b0df
	for i := 0; i < mtN; i++ {
		y := mt.state[i]&upper | mt.state[(i+1)%mtN]&lower
		v := mt.state[(i+mtM)%mtN] ^ y>>1
		if y&1 != 0 {
			v ^= matrix
		}
		mt.state[i] = v
	}
	mt.index = 0
}

// canonical returns a float64 in [0, 1) built from two outputs the way
// libstdc++'s std::generate_canonical<double, 53> does for a 32-bit engine
// (and so std::uniform_real_distribution<double>(0, 1)): (a + b·2^32)/2^64
// rounded to double, with 1 replaced by the largest double below 1.
func (mt *mt19937) canonical() float64 {
	a := float64(mt.next())
	b := float64(mt.next())
	r := (a + b*0x1p32) / 0x1p64
	if r >= 1 {
		r = 1 - 0x1p-53
	}
	return r
}
