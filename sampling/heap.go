package sampling

// siftUp and siftDown restore a binary heap h whose root is its worst
// element by worse after h[i] changed: the top-n selections keep the n best
// seen so far, so one comparison with the root rejects most candidates.

func siftUp[T any](h []T, i int, worse func(a, b *T) bool) {
	for i > 0 {
		parent := (i - 1) / 2
		if !worse(&h[i], &h[parent]) {
			return
		}
		h[i], h[parent] = h[parent], h[i]
		i = parent
	}
}

func siftDown[T any](h []T, i int, worse func(a, b *T) bool) {
	n := len(h)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		w := l
		if r := l + 1; r < n && worse(&h[r], &h[l]) {
			w = r
		}
		if !worse(&h[w], &h[i]) {
			return
		}
		h[i], h[w] = h[w], h[i]
		i = w
	}
}
