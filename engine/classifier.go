package engine

import (
	"math"

	"github.com/vkllm/vkllm/engine/tokenizer"
)

// classifierTensors are the tensors of a cross-encoder's classification
// head: an optional dense layer with tanh (cls.weight, cls.bias), then the
// projection to one score (cls.output.weight, cls.output.bias).
type classifierTensors struct {
	Dense, DenseBias, Out, OutBias *Tensor
}

// classifierModel is an archModel that may carry a classification head.
type classifierModel interface {
	classifier() *classifierTensors
}

// Classifier is a cross-encoder's classification head (pooling type rank):
// it turns the final hidden state of a sequence's first token into its
// relevance score, as the reference's rank pooling:
// score = out . tanh(dense h + b) + outBias. It runs on the CPU, in f64,
// once per scored sequence (a matrix-vector product of embd x embd).
type Classifier struct {
	embd      int
	dense     []float32 // [embd][embd], nil without the dense layer
	denseBias []float32
	out       []float32 // [embd]
	outBias   float32
}

// newClassifier dequantizes w's classification head; nil when it has none.
func newClassifier(w *Weights) (*Classifier, error) {
	cm, ok := w.model.(classifierModel)
	if !ok {
		return nil, nil
	}
	t := cm.classifier()
	if t == nil {
		return nil, nil
	}
	c := &Classifier{embd: t.Out.Cols()}
	var err error
	for _, p := range []struct {
		dst *[]float32
		t   *Tensor
	}{{&c.dense, t.Dense}, {&c.denseBias, t.DenseBias}, {&c.out, t.Out}} {
		if *p.dst, err = dequant(p.t); err != nil {
			return nil, err
		}
	}
	ob, err := dequant(t.OutBias)
	if err != nil {
		return nil, err
	}
	c.outBias = ob[0]
	return c, nil
}

// Score returns the relevance score of the hidden state h ([embd]).
func (c *Classifier) Score(h []float32) float32 {
	x := make([]float64, c.embd)
	for i, v := range h[:c.embd] {
		x[i] = float64(v)
	}
	if c.dense != nil {
		y := make([]float64, c.embd)
		for r := range c.embd {
			s := float64(c.denseBias[r])
			for k, v := range c.dense[r*c.embd : (r+1)*c.embd] {
				s += float64(v) * x[k]
			}
			y[r] = math.Tanh(s)
		}
		x = y
	}
	s := float64(c.outBias)
	for k, v := range c.out {
		s += float64(v) * x[k]
	}
	return float32(s)
}

// RerankTokens returns the sequence a cross-encoder scores for a (query,
// document) pair, as the reference's server builds it: the query with the
// vocabulary's special tokens ([CLS] query [SEP] for WordPiece), then the
// document's tokens, with no trailing separator.
func RerankTokens(tok *tokenizer.Tokenizer, query, document string) ([]int32, error) {
	q, err := tok.Encode(query, true, false)
	if err != nil {
		return nil, err
	}
	d, err := tok.Encode(document, false, false)
	if err != nil {
		return nil, err
	}
	return append(q, d...), nil
}
