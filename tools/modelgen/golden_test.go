package modelgen

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"testing"

	"github.com/vkllm/vkllm/gguf"
)

// goldenCases are the option sets the repository's tests generate (every
// architecture with its vocabularies, formats and optional tensors), with
// the sha256 of the file the generator wrote for each before it read the
// architectures' tensor lists from their struct tags. They pin the files
// byte for byte: the tests that load these models compare against
// references computed from them.
var goldenCases = []struct {
	name string
	opts Options
	sha  string
}{
	{"default", Options{Seed: 1}, "151e40d14946684ba13f42701f1c884d2c0f1e120f36db5f928de45d334169ae"},
	{"llama-spm-F32", Options{Arch: "llama", Vocab: "spm", Type: gguf.TypeF32, Embd: 64, Layers: 2, Heads: 4, KVHeads: 2, Seed: 7}, "9533cfaaa575aa92facd4317107afe8e2e01bbb933be0dd99c2d6de65b05e16c"},
	{"llama-spm-F16", Options{Arch: "llama", Vocab: "spm", Type: gguf.TypeF16, Embd: 64, Layers: 2, Heads: 4, KVHeads: 2, Seed: 7}, "c4a6ed8af01b5298395a342c0051d414dd8bcb50dce58b3bc384c719b9a94a03"},
	{"llama-spm-BF16", Options{Arch: "llama", Vocab: "spm", Type: gguf.TypeBF16, Embd: 64, Layers: 2, Heads: 4, KVHeads: 2, Seed: 7}, "3969d598d27da3157375d36810e7cc28c91de97c127dfcb9a931d9cb2b64c244"},
	{"llama-spm-Q8_0", Options{Arch: "llama", Vocab: "spm", Type: gguf.TypeQ8_0, Embd: 64, Layers: 2, Heads: 4, KVHeads: 2, Seed: 7}, "8357549f6139accc2c047dce03417c8f710b0bc063c269c8694e5b2b8f3de9d6"},
	{"llama-spm-Q4_0", Options{Arch: "llama", Vocab: "spm", Type: gguf.TypeQ4_0, Embd: 64, Layers: 2, Heads: 4, KVHeads: 2, Seed: 7}, "0631dafa1102f22effc60dfaa5d8a56416aae4c97d04c9794b4e97dc7ef81517"},
	{"llama-spm-Q4_1", Options{Arch: "llama", Vocab: "spm", Type: gguf.TypeQ4_1, Embd: 64, Layers: 2, Heads: 4, KVHeads: 2, Seed: 7}, "090f18461a503c15ec2cc99c228fc57e7a2abc2f6f64cd9ff1a0665d3825c322"},
	{"llama-spm-Q5_0", Options{Arch: "llama", Vocab: "spm", Type: gguf.TypeQ5_0, Embd: 64, Layers: 2, Heads: 4, KVHeads: 2, Seed: 7}, "0771319895d5ad0a913a09b4fc93d161523422bb356ae6a7a342bae49d2a7e60"},
	{"llama-spm-Q5_1", Options{Arch: "llama", Vocab: "spm", Type: gguf.TypeQ5_1, Embd: 64, Layers: 2, Heads: 4, KVHeads: 2, Seed: 7}, "02bb64651eb3fda6e8a3bab229714120ad27f493b8e7bcedddc752c5a9aa8e2e"},
	{"llama-spm-Q4_K", Options{Arch: "llama", Vocab: "spm", Type: gguf.TypeQ4_K, Embd: 256, Layers: 2, Heads: 4, KVHeads: 2, Seed: 7}, "872ac7831683f0f8693f4c2e63615bdde2b046a1df2b3145f0093b75ef9e2914"},
	{"llama-spm-Q5_K", Options{Arch: "llama", Vocab: "spm", Type: gguf.TypeQ5_K, Embd: 256, Layers: 2, Heads: 4, KVHeads: 2, Seed: 7}, "b8c82565bc08659e5b6edca656cfd960292dfdacf703401cde5826e3083e6061"},
	{"llama-spm-Q6_K", Options{Arch: "llama", Vocab: "spm", Type: gguf.TypeQ6_K, Embd: 256, Layers: 2, Heads: 4, KVHeads: 2, Seed: 7}, "9a087ae001bc540a4daf10ab10a43e3e10ef20a457b96e98a22fb002b7189eb2"},
	{"qwen2-bpe-F32-tied", Options{Arch: "qwen2", Vocab: "bpe", Type: gguf.TypeF32, Embd: 64, Layers: 2, Heads: 4, KVHeads: 2, Tied: true, Seed: 7}, "b2732beffe01949dbfb41cfefb9629d886131b5685e40663fa0efb14fb60ba61"},
	{"qwen2-bpe-Q8_0-tied", Options{Arch: "qwen2", Vocab: "bpe", Type: gguf.TypeQ8_0, Embd: 64, Layers: 2, Heads: 4, KVHeads: 2, Tied: true, Seed: 7}, "5d3c67300b0639b4a42da8b084426a5256e22db31d3b920783718b95254e31cf"},
	{"qwen2-bpe-Q4_K-tied", Options{Arch: "qwen2", Vocab: "bpe", Type: gguf.TypeQ4_K, Embd: 256, Layers: 2, Heads: 4, KVHeads: 2, Tied: true, Seed: 7}, "7139b48d862b1f06b7d38d00cbce819d145518c753cac812491e5be1da706966"},
	{"qwen3-bpe-F32", Options{Arch: "qwen3", Vocab: "bpe", Type: gguf.TypeF32, Embd: 64, Layers: 2, Heads: 4, KVHeads: 2, Seed: 7}, "62c16da9c572ea38a285878a3afe804b3519ed39dcca9702b30f02c3b81c232e"},
	{"qwen3-bpe-Q8_0", Options{Arch: "qwen3", Vocab: "bpe", Type: gguf.TypeQ8_0, Embd: 64, Layers: 2, Heads: 4, KVHeads: 2, Seed: 7}, "0054b7d73b437d63fdcc7585600e8d7c0a2a887027a09efc4a6e122392a10d42"},
	{"qwen3-bpe-Q4_K", Options{Arch: "qwen3", Vocab: "bpe", Type: gguf.TypeQ4_K, Embd: 256, Layers: 2, Heads: 4, KVHeads: 2, Seed: 7}, "3f424388a4d00dfc9b744f14cb5b29f68b453a34a5c02467d12f0da846e82e83"},
	{"llama-bpe-F32-tied-rope_freqs", Options{Arch: "llama", Vocab: "bpe", Type: gguf.TypeF32, Embd: 64, Layers: 2, Heads: 4, KVHeads: 2, Tied: true, RopeFreqs: true, Seed: 7}, "b91211ca9e053e8fae1691b85d6d09deb5c539e61af3540ed8295f094bb54309"},
	{"llama-bpe-Q8_0-tied-rope_freqs", Options{Arch: "llama", Vocab: "bpe", Type: gguf.TypeQ8_0, Embd: 64, Layers: 2, Heads: 4, KVHeads: 2, Tied: true, RopeFreqs: true, Seed: 7}, "653d93cc79b97ed1d110b628fe26a943b5224938b95bcae4ef62a327abfc5be8"},
	{"llama-bpe-Q4_K-tied-rope_freqs", Options{Arch: "llama", Vocab: "bpe", Type: gguf.TypeQ4_K, Embd: 256, Layers: 2, Heads: 4, KVHeads: 2, Tied: true, RopeFreqs: true, Seed: 7}, "3a944952ba1f43452f4e54ca61f01e65331ee4235a4c663519e892c93eafe8f2"},
	{"gemma2-spm-F32-tied", Options{Arch: "gemma2", Vocab: "spm", Type: gguf.TypeF32, Embd: 64, Layers: 2, Heads: 4, KVHeads: 2, Tied: true, Seed: 7}, "2add9760b29f2810b10c82de13f7cd17c5671d06962acfc52ed5210e74349536"},
	{"gemma2-spm-Q8_0-tied", Options{Arch: "gemma2", Vocab: "spm", Type: gguf.TypeQ8_0, Embd: 64, Layers: 2, Heads: 4, KVHeads: 2, Tied: true, Seed: 7}, "1d91102d23ef4d861361ab8f6675edce04bc117c622998729c4b081dacf01d76"},
	{"gemma2-spm-Q4_K-tied", Options{Arch: "gemma2", Vocab: "spm", Type: gguf.TypeQ4_K, Embd: 256, Layers: 2, Heads: 4, KVHeads: 2, Tied: true, Seed: 7}, "346a58c356c05f0f6d014165c206f0b76966052361cec4c7d589456ec45adb52"},
	{"gemma3-spm-F32-tied", Options{Arch: "gemma3", Vocab: "spm", Type: gguf.TypeF32, Embd: 64, Layers: 2, Heads: 4, KVHeads: 2, Tied: true, Seed: 7}, "eff38d620dd8e495f766e80f38374e79b19bccba9d0c2431e2c786137e991a43"},
	{"gemma3-spm-Q8_0-tied", Options{Arch: "gemma3", Vocab: "spm", Type: gguf.TypeQ8_0, Embd: 64, Layers: 2, Heads: 4, KVHeads: 2, Tied: true, Seed: 7}, "f19c428a37aba1c56e11da88e4680da18621c0fb9a8ed0a24fdffcdd54df5758"},
	{"gemma3-spm-Q4_K-tied", Options{Arch: "gemma3", Vocab: "spm", Type: gguf.TypeQ4_K, Embd: 256, Layers: 2, Heads: 4, KVHeads: 2, Tied: true, Seed: 7}, "a139f34b44af23a6adf2d4bbbe9850978cf94bebd6553c80836bc8873bd12d7c"},
	{"phi3-spm-F32", Options{Arch: "phi3", Vocab: "spm", Type: gguf.TypeF32, Embd: 64, Layers: 2, Heads: 4, KVHeads: 2, Seed: 7}, "f0b9a7e500dd262cde6a3f5c5ce80389305f1b97de44e677772e163836a6b148"},
	{"phi3-spm-Q8_0", Options{Arch: "phi3", Vocab: "spm", Type: gguf.TypeQ8_0, Embd: 64, Layers: 2, Heads: 4, KVHeads: 2, Seed: 7}, "220087d3e8ee0aed3418dcd3b98926f82d51c51c8d9ede25c9b553f8d1d09d3b"},
	{"phi3-spm-Q4_K", Options{Arch: "phi3", Vocab: "spm", Type: gguf.TypeQ4_K, Embd: 256, Layers: 2, Heads: 4, KVHeads: 2, Seed: 7}, "bb03322da4e1a932d62b6877bf90dcf937ef32a00a946816e8df2c261b6e0bc5"},
	{"llama-F16", Options{Arch: "llama", Type: gguf.TypeF16, Embd: 64, Layers: 2, Seed: 3}, "7200bc5aad668aa1ffab2e980e451f572a31fd439c0c9803283412ca02d12f1d"},
	{"llama-Q8_0-default-seed", Options{Arch: "llama", Embd: 64, Layers: 2, Type: gguf.TypeQ8_0}, "7d221003e1be32daa9ad8075b55847da513d9ee8001b24faffe4ef454b6d8ec2"},
	{"qwen2-F16", Options{Arch: "qwen2", Type: gguf.TypeF16, Embd: 64, Layers: 2, Seed: 3}, "d6c4cd81232fc007182896fdb4ee4fddd504ba2eb75ca8d6bdfe96cba24608a4"},
	{"qwen2-Q8_0-default-seed", Options{Arch: "qwen2", Embd: 64, Layers: 2, Type: gguf.TypeQ8_0}, "fa8abbfba4d58e99e27202c7b3b58ef0e8ea0a0e74173073640f3a80a9199770"},
	{"qwen3-F16", Options{Arch: "qwen3", Type: gguf.TypeF16, Embd: 64, Layers: 2, Seed: 3}, "2b78ae8c83d557e17eb7345a028ecc008cd815d1b90cd96a0a03962de5ddd4f4"},
	{"qwen3-Q8_0-default-seed", Options{Arch: "qwen3", Embd: 64, Layers: 2, Type: gguf.TypeQ8_0}, "4de47c871fafb6bf61b8da944ac9703b37f42cf7449ec1024e4898b1ded04722"},
	{"gemma2-F16", Options{Arch: "gemma2", Type: gguf.TypeF16, Embd: 64, Layers: 2, Seed: 3}, "534ee22e8316d918ca6ccdfe2bb548897320dd9de49cb694cb1a1102c8aae1de"},
	{"gemma2-Q8_0-default-seed", Options{Arch: "gemma2", Embd: 64, Layers: 2, Type: gguf.TypeQ8_0}, "ad125c1dcd06ef88bd78921e306a63891606bbba7448eb994e9341c1b15d3595"},
	{"gemma3-F16", Options{Arch: "gemma3", Type: gguf.TypeF16, Embd: 64, Layers: 2, Seed: 3}, "6eca560a36ac5c3dbc3377afa1f209e83dbb2d9e124d217eeba35f57ed8afbac"},
	{"gemma3-Q8_0-default-seed", Options{Arch: "gemma3", Embd: 64, Layers: 2, Type: gguf.TypeQ8_0}, "e983987bdbb0a6f0e76cfca4cfd092f85f7f7125999ef5a0864d70b761ace49b"},
	{"phi3-F16", Options{Arch: "phi3", Type: gguf.TypeF16, Embd: 64, Layers: 2, Seed: 3}, "53ddf983e4dd6dbbad3b13498e38b8869f5fbee83ce4cca39b633235c0656096"},
	{"phi3-Q8_0-default-seed", Options{Arch: "phi3", Embd: 64, Layers: 2, Type: gguf.TypeQ8_0}, "06bd483de6420651504b9e4897a8e71621a5ce528f7aeffd24c27ad3242534ce"},
	{"bert-F32", Options{Arch: "bert", Type: gguf.TypeF32, Embd: 64, Layers: 2, Heads: 4, Context: 64, Seed: 5}, "161aedd53e81b9160e02a2838ec6089c1ef09584b50050b2574383bc50f6eea0"},
	{"bert-F32-rerank", Options{Arch: "bert", Type: gguf.TypeF32, Embd: 64, Layers: 2, Heads: 4, Context: 64, Rerank: true, Seed: 5}, "79208deb65f7183a048ca221950fd1c408f7c9797d10d807e069aa5d0995b469"},
	{"bert-F16", Options{Arch: "bert", Type: gguf.TypeF16, Embd: 64, Layers: 2, Heads: 4, Context: 64, Seed: 5}, "27a0bf33fca291960902b5565b9107e7391bf44fc701b25d41cdc58ded0b40ab"},
	{"bert-F16-rerank", Options{Arch: "bert", Type: gguf.TypeF16, Embd: 64, Layers: 2, Heads: 4, Context: 64, Rerank: true, Seed: 5}, "a3e087dfb743e64c4ab936e1f6f4dba11cf1bfb3eb6d197a038c3abf520c2ead"},
	{"bert-Q8_0", Options{Arch: "bert", Type: gguf.TypeQ8_0, Embd: 64, Layers: 2, Heads: 4, Context: 64, Seed: 5}, "f7f6e811a9820d09ae0e3b41b8c7be8e8655befb46015e437de93a3686207f3a"},
	{"bert-Q8_0-rerank", Options{Arch: "bert", Type: gguf.TypeQ8_0, Embd: 64, Layers: 2, Heads: 4, Context: 64, Rerank: true, Seed: 5}, "6f8d726f44458258686326f96eff454f52064ccc2d70acc13b7c9046e7e9c5f2"},
	{"bert-Q4_K", Options{Arch: "bert", Type: gguf.TypeQ4_K, Embd: 256, Layers: 2, Heads: 4, Context: 64, Seed: 5}, "ec0b0deaea79ed9bcf5ce7852346f0346df96b5e2daab24d2d25334063074dc7"},
	{"bert-Q4_K-rerank", Options{Arch: "bert", Type: gguf.TypeQ4_K, Embd: 256, Layers: 2, Heads: 4, Context: 64, Rerank: true, Seed: 5}, "d540b8aa48809bdaac8f8714eca50918d45c4c7b33bea83513f65de3b18406e7"},
	{"bert-defaults", Options{Arch: "bert"}, "af29c05b12c6abfeb6f6f032d25604326be8db80c91ff949b3a02e6dd368399f"},
	{"gemma2-window", Options{Arch: "gemma2", Type: gguf.TypeF32, Embd: 64, Layers: 2, Heads: 4, KVHeads: 2, Window: 520, Seed: 5}, "a5df58087b548ec6abe4d17df5198e6aa9d2f9d5f5648bb7c025a62ef39e1b84"},
	{"qwen2-one-layer", Options{Arch: "qwen2", Embd: 64, Layers: 1}, "bca400fbc4ab7c72fe5724c8ea35d25a84aaa97c10c81069b82893909a257c0a"},
	{"llama-spm-one-layer", Options{Arch: "llama", Vocab: "spm", Embd: 64, Layers: 1, Seed: 5}, "9d8723a8fc8738b06bff1af3ba0b89499f1638d18891dfa6253928bbfd132d83"},
	{"words-specials", Options{Words: []string{"\n\n"}, Specials: []string{"<fake_token_around_image>", "<global-img>"}, Seed: 11}, "805ecaa697054658df0c6fc93d15519c2d2b7563b16f9c9d6b8d908381575bff"},
	{"q4_k_m-workers", Options{Arch: "llama", Type: gguf.TypeQ4_K, Mix: "Q4_K_M", Embd: 256, Layers: 8, FFN: 1024, VocabSize: 600, Workers: 3}, "9427ed2d5f0a6158770001e3dea75f8c02883e9fd1a16f49e21b5b28b91a5979"},
	{"phi3-workers", Options{Arch: "phi3", Embd: 256, Layers: 2, Workers: 4, Seed: 9}, "09ed297ef88f1705ae19c0254623ce7d17fa30020bc63eef1616a28c33b46012"},
	{"odd-widths", Options{Arch: "qwen3", Embd: 96, Heads: 6, KVHeads: 1, HeadDim: 24, FFN: 160, VocabSize: 300, Context: 128, RopeBase: 5e5, Name: "odd", Seed: 13}, "1f4159cd58434ea3e5031c127ed9b57ec212d3de13f00a716851fbf01bcbc256"},
	{"gemma3-head-dim", Options{Arch: "gemma3", Embd: 64, Heads: 2, KVHeads: 1, HeadDim: 48, Layers: 3, Seed: 4}, "f65165ac3b4f726d3e44b78a2f2ca88db27e1811daaf0c2fd4464ddbd24bd01e"},
}

// TestGolden generates each of goldenCases and compares the file's hash
// with the one recorded. VKLLM_GOLDEN=print prints the current hashes
// instead, as table rows.
func TestGolden(t *testing.T) {
	for _, c := range goldenCases {
		t.Run(c.name, func(t *testing.T) {
			w, err := Generate(c.opts)
			if err != nil {
				t.Fatal(err)
			}
			h := sha256.New()
			if _, err := w.WriteTo(h); err != nil {
				t.Fatal(err)
			}
			got := hex.EncodeToString(h.Sum(nil))
			if os.Getenv("VKLLM_GOLDEN") == "print" {
				fmt.Printf("%s %s\n", c.name, got)
				return
			}
			if got != c.sha {
				t.Errorf("Generate(%+v) hashes to %s, want %s", c.opts, got, c.sha)
			}
		})
	}
}
