package ops

import "github.com/vkllm/vkllm/vk"

// Output tile of shaders/matmul.comp: matmulBM weight rows by matmulBN
// activation columns per workgroup.
const (
	matmulBM = 64
	matmulBN = 64
	matmulWG = 64 // the tile code assumes exactly this workgroup size
)

// MatMul records y = W x for any number n of activation columns with the
// tiled kernel (prompt processing, large batches): x holds n columns of
// w.Cols f32 ([n][Cols]) and y receives n columns of w.Rows f32
// ([n][Rows]), y[c*Rows+r] = sum_k W[r][k]*x[c][k]. The kernel dequantizes
// 64x32 weight tiles into shared memory and accumulates in f32; where
// CoopMatrix is on it does so on the matrix units, from f16 tiles
// (matmul_coop.go). The same range rules as MatVec apply.
func (k *Kernels) MatMul(c *vk.Cmd, w Weight, x vk.Range, n int, y vk.Range) error {
	return k.mulMat(c, w, x, n, y, mulOpts{tiled: true, coop: k.coopOn})
}
