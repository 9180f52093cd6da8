// Package tokenizer turns text into token ids and back exactly as the
// reference implementation (llama.cpp) does for the same GGUF file. It is
// built only from the file's tokenizer.* metadata and supports the three
// vocabulary types in use: SentencePiece BPE with scores ("llama"), byte-level
// BPE with merges and a pre-tokenizer ("gpt2") and WordPiece ("bert").
//
// The byte-level BPE pre-tokenizers (tokenizer.ggml.pre) are hand-written
// splitters, about 20x faster than a regexp engine with look-ahead on the
// same text; an unknown pre value is an error from New, never a silent
// fallback. Supported: default, llama3/llama-v3/llama-bpe/falcon3/falcon-h1/
// pixtral/midm-2.0/lfm2, dbrx, smaug-bpe, chatglm-bpe/glm4, deepseek-llm,
// deepseek-coder, falcon, starcoder, refact, command-r, smollm, codeshell,
// exaone, minerva-7b, gpt-2 (and phi-2, jina-*, gigachat, roberta-bpe, mpt,
// olmo, jais, gpt-neox, a.x-4.0, mellum, exaone4), qwen2/deepseek-r1-qwen/
// kormo, stablelm2, megrez, poro-chat, bloom, gpt3-finnish, viking, tekken,
// gpt-4o/llama4/minimax-m2.
//
// A Tokenizer is immutable after New and safe for concurrent use. A Decoder
// belongs to one goroutine.
package tokenizer

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/vkllm/vkllm/gguf"
)

// Metadata keys read by New.
const (
	keyModel        = "tokenizer.ggml.model"
	keyPre          = "tokenizer.ggml.pre"
	keyTokens       = "tokenizer.ggml.tokens"
	keyScores       = "tokenizer.ggml.scores"
	keyTokenType    = "tokenizer.ggml.token_type"
	keyMerges       = "tokenizer.ggml.merges"
	keyAddBOS       = "tokenizer.ggml.add_bos_token"
	keyAddEOS       = "tokenizer.ggml.add_eos_token"
	keyAddPrefix    = "tokenizer.ggml.add_space_prefix"
	keyRemoveExtra  = "tokenizer.ggml.remove_extra_whitespaces"
	keyChatTemplate = "tokenizer.chat_template"
	keyGeneralName  = "general.name"
)

// Token attributes, derived from tokenizer.ggml.token_type as the reference
// does.
const (
	attrUnknown uint16 = 1 << iota
	attrUnused
	attrNormal
	attrControl
	attrUserDefined
	attrByte
	attrNormalized
	attrLStrip
	attrRStrip
)

// GGUF token types.
const (
	typeNormal      = 1
	typeUnknown     = 2
	typeControl     = 3
	typeUserDefined = 4
	typeUnused      = 5
	typeByte        = 6
)

type kind int

const (
	kindSPM kind = iota
	kindBPE
	kindWPM
)

// Tokenizer encodes and decodes text for one vocabulary. Build it with New.
type Tokenizer struct {
	model string
	kind  kind

	text     []string // token id -> vocabulary string
	scores   []float32
	attr     []uint16
	ids      map[string]int32
	pieces   [][]byte // token_to_piece with special text rendered
	spmSplit bool     // SPM merges can run word by word (see spm)
	maxLen   int      // longest token in bytes

	merges map[uint64]int32 // (left id, right id) -> rank
	pre    *preTokenizer
	bu     *byteUnicode

	bos, eos, eot, eom, unk, sep, pad, cls, mask int32
	// fim are the fill-in-the-middle tokens in fimKeys order (pre, suf,
	// mid, pad, rep, sep), null when absent.
	fim     [6]int32
	eog     []int32
	special []int32 // partitioned before tokenizing, longest first

	addBOS, addEOS, addSpacePrefix, cleanSpaces bool
	// removeExtraWS is read for completeness: the reference applies
	// tokenizer.ggml.remove_extra_whitespaces only to Unigram (T5)
	// vocabularies, which are not supported.
	removeExtraWS bool

	chatTemplate string
}

const null int32 = -1

// New builds the tokenizer described by f's tokenizer.* metadata. Errors
// name the key that is missing or malformed; an unknown tokenizer.ggml.model
// or tokenizer.ggml.pre is an error.
func New(f *gguf.File) (*Tokenizer, error) {
	model, err := f.String(keyModel)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	t := &Tokenizer{
		model: model,
		bos:   null, eos: null, eot: null, eom: null, unk: null, sep: null, pad: null, cls: null, mask: null,
		fim: [6]int32{null, null, null, null, null, null},
	}
	pre := ""
	if f.Has(keyPre) {
		if pre, err = f.String(keyPre); err != nil {
			return nil, fmt.Errorf("tokenizer: %w", err)
		}
	}
	switch model {
	case "llama":
		t.kind = kindSPM
		t.bos, t.eos, t.unk = 1, 2, 0
		t.addSpacePrefix, t.addBOS = true, true
	case "bert":
		t.kind = kindWPM
		t.bos, t.unk, t.sep, t.pad, t.mask = 101, 100, 102, 0, 103
		t.addBOS, t.cleanSpaces = true, true
	case "gpt2":
		t.kind = kindBPE
		t.bos, t.eos = 11, 11
		if t.pre, err = newPreTokenizer(pre); err != nil {
			return nil, err
		}
		t.cleanSpaces, t.addBOS = t.pre.cleanSpaces, t.pre.addBOS
		if t.pre.noBOS {
			t.bos = null
		}
		t.bu = newByteUnicode()
	default:
		return nil, fmt.Errorf("tokenizer: key %q: unsupported tokenizer model %q (want llama, gpt2 or bert)", keyModel, model)
	}
	if err := t.optBool(f, keyAddPrefix, &t.addSpacePrefix); err != nil {
		return nil, err
	}
	if err := t.optBool(f, keyRemoveExtra, &t.removeExtraWS); err != nil {
		return nil, err
	}
	if err := t.loadVocab(f); err != nil {
		return nil, err
	}
	if t.kind == kindBPE {
		if err := t.loadMerges(f); err != nil {
			return nil, err
		}
	}
	if err := t.loadSpecial(f); err != nil {
		return nil, err
	}
	if f.Has(keyChatTemplate) {
		if t.chatTemplate, err = f.String(keyChatTemplate); err != nil {
			return nil, fmt.Errorf("tokenizer: %w", err)
		}
	}
	if t.kind == kindSPM {
		t.spmSplit = spmSplittable(t.text)
	}
	t.pieces = make([][]byte, len(t.text))
	for id := range t.text {
		t.pieces[id] = t.tokenToPiece(int32(id))
	}
	return t, nil
}

func (t *Tokenizer) optBool(f *gguf.File, key string, dst *bool) error {
	if !f.Has(key) {
		return nil
	}
	v, err := f.Bool(key)
	if err != nil {
		return fmt.Errorf("tokenizer: %w", err)
	}
	*dst = v
	return nil
}

func (t *Tokenizer) loadVocab(f *gguf.File) error {
	tokens, err := f.Strings(keyTokens)
	if err != nil {
		return fmt.Errorf("tokenizer: %w", err)
	}
	n := len(tokens)
	if n == 0 || n > 1<<30 {
		return fmt.Errorf("tokenizer: key %q: %d tokens", keyTokens, n)
	}
	if f.Has(keyScores) {
		if t.scores, err = f.Float32s(keyScores); err != nil {
			return fmt.Errorf("tokenizer: %w", err)
		}
		if len(t.scores) != n {
			return fmt.Errorf("tokenizer: key %q has %d scores for %d tokens", keyScores, len(t.scores), n)
		}
	} else {
		t.scores = make([]float32, n)
	}
	var types []int32
	if f.Has(keyTokenType) {
		if types, err = f.Int32s(keyTokenType); err != nil {
			return fmt.Errorf("tokenizer: %w", err)
		}
		if len(types) != n {
			return fmt.Errorf("tokenizer: key %q has %d types for %d tokens", keyTokenType, len(types), n)
		}
	}
	t.text = make([]string, n)
	t.attr = make([]uint16, n)
	t.ids = make(map[string]int32, n)
	for i, w := range tokens {
		if w == "" {
			w = fmt.Sprintf("[EMPTY_%d]", i)
		}
		t.text[i] = w
		t.ids[w] = int32(i)
		t.maxLen = max(t.maxLen, len(w))
		t.attr[i] = attrNormal
		if types != nil {
			switch types[i] {
			case typeNormal:
				t.attr[i] = attrNormal
			case typeUnknown:
				t.attr[i] = attrUnknown
			case typeControl:
				t.attr[i] = attrControl
			case typeUserDefined:
				t.attr[i] = attrUserDefined
			case typeUnused:
				t.attr[i] = attrUnused
			case typeByte:
				t.attr[i] = attrByte
			default:
				t.attr[i] = 0
			}
		}
	}
	return nil
}

func (t *Tokenizer) loadMerges(f *gguf.File) error {
	merges, err := f.Strings(keyMerges)
	if err != nil {
		return fmt.Errorf("tokenizer: %w", err)
	}
	t.merges = make(map[uint64]int32, len(merges))
	for i, m := range merges {
		// The reference splits at the first space after the first byte.
		if len(m) < 2 {
			continue
		}
		k := strings.IndexByte(m[1:], ' ')
		if k < 0 {
			continue
		}
		a, okA := t.ids[m[:k+1]]
		b, okB := t.ids[m[k+2:]]
		if !okA || !okB {
			continue // cannot fire: both sides of a merge are vocabulary tokens
		}
		key := pairKey(a, b)
		if _, dup := t.merges[key]; !dup {
			t.merges[key] = int32(i)
		}
	}
	return nil
}

func pairKey(a, b int32) uint64 { return uint64(uint32(a))<<32 | uint64(uint32(b)) }

type specialKey struct {
	key   string
	field func(t *Tokenizer) *int32
}

func specialKeys() []specialKey {
	return []specialKey{
		{"tokenizer.ggml.bos_token_id", func(t *Tokenizer) *int32 { return &t.bos }},
		{"tokenizer.ggml.eos_token_id", func(t *Tokenizer) *int32 { return &t.eos }},
		{"tokenizer.ggml.eot_token_id", func(t *Tokenizer) *int32 { return &t.eot }},
		{"tokenizer.ggml.eom_token_id", func(t *Tokenizer) *int32 { return &t.eom }},
		{"tokenizer.ggml.unknown_token_id", func(t *Tokenizer) *int32 { return &t.unk }},
		{"tokenizer.ggml.seperator_token_id", func(t *Tokenizer) *int32 { return &t.sep }},
		{"tokenizer.ggml.padding_token_id", func(t *Tokenizer) *int32 { return &t.pad }},
		{"tokenizer.ggml.cls_token_id", func(t *Tokenizer) *int32 { return &t.cls }},
		{"tokenizer.ggml.mask_token_id", func(t *Tokenizer) *int32 { return &t.mask }},
	}
}

type fimKey struct {
	key   string
	texts []string
	eog   bool
}

func fimKeys() []fimKey {
	return []fimKey{
		{"tokenizer.ggml.fim_pre_token_id", []string{"<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<｜fim▁begin｜>", "<PRE>", "▁<PRE>", "<|code_prefix|>"}, false},
		{"tokenizer.ggml.fim_suf_token_id", []string{"<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<｜fim▁hole｜>", "<SUF>", "▁<SUF>", "<|code_suffix|>"}, false},
		{"tokenizer.ggml.fim_mid_token_id", []string{"<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<｜fim▁end｜>", "<MID>", "▁<MID>", "<|code_middle|>"}, false},
		{"tokenizer.ggml.fim_pad_token_id", []string{"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>"}, true},
		{"tokenizer.ggml.fim_rep_token_id", []string{"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"}, true},
		{"tokenizer.ggml.fim_sep_token_id", []string{"<|file_sep|>"}, true},
	}
}

func (t *Tokenizer) loadSpecial(f *gguf.File) error {
	n := int64(len(t.text))
	for _, sk := range specialKeys() {
		if !f.Has(sk.key) {
			continue
		}
		v, err := f.Int(sk.key)
		if err != nil {
			return fmt.Errorf("tokenizer: %w", err)
		}
		if v >= 0 && v < n { // the reference keeps the default for an id out of range
			*sk.field(t) = int32(v)
		}
	}
	if err := t.optBool(f, keyAddBOS, &t.addBOS); err != nil {
		return err
	}
	if err := t.optBool(f, keyAddEOS, &t.addEOS); err != nil {
		return err
	}
	// Clamp defaults that do not exist in a small vocabulary.
	for _, p := range []*int32{&t.bos, &t.eos, &t.eot, &t.eom, &t.unk, &t.sep, &t.pad, &t.cls, &t.mask} {
		if *p >= int32(n) {
			*p = null
		}
	}

	// Auto-detect EOT and EOM by text, lowest id first, and mark them
	// control as the reference does.
	eotTexts := []string{"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|end_of_text|>",
		"<EOT>", "_<EOT>", "<｜end▁of▁sentence｜>", "<end_of_utterance>"}
	if t.eot == null {
		if t.eot = t.firstOf(eotTexts); t.eot != null {
			t.attr[t.eot] = attrControl
		}
	}
	if t.eom == null {
		if t.eom = t.firstOf([]string{"<|eom_id|>"}); t.eom != null {
			t.attr[t.eom] = attrControl
		}
	}
	// FIM tokens: by key, else by text; all are control, and pad, repo and
	// file-separator end generation.
	var fimEOG []int32
	for i, fk := range fimKeys() {
		id := null
		if f.Has(fk.key) {
			v, err := f.Int(fk.key)
			if err != nil {
				return fmt.Errorf("tokenizer: %w", err)
			}
			if v >= 0 && v < n {
				id = int32(v)
			}
		}
		if id == null {
			id = t.firstOf(fk.texts)
			if id != null {
				t.attr[id] = attrControl
			}
		}
		t.fim[i] = id
		if id != null && fk.eog {
			fimEOG = append(fimEOG, id)
		}
	}
	eog := map[int32]bool{}
	for _, id := range fimEOG {
		eog[id] = true
	}
	for _, s := range []string{"<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<end_of_turn>",
		"<|endoftext|>", "<|eom_id|>", "<EOT>", "_<EOT>", "<|end_of_text|>", "<end_of_utterance>"} {
		if id, ok := t.ids[s]; ok {
			eog[id] = true
			t.attr[id] = attrControl
		}
	}
	// gpt-oss (o200k_harmony) structure tokens are always rendered.
	for _, s := range []string{"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"} {
		if id, ok := t.ids[s]; ok {
			t.attr[id] = attrUserDefined
		}
	}
	for _, id := range []int32{t.eos, t.eot, t.eom} {
		if id != null {
			eog[id] = true
		}
	}
	// Harmony: with <|return|> and <|call|> ending generation, <|end|> only
	// ends a message.
	ret, okR := t.ids["<|return|>"]
	call, okC := t.ids["<|call|>"]
	end, okE := t.ids["<|end|>"]
	if okR && okC && okE && eog[ret] && eog[call] && eog[end] {
		delete(eog, end)
		t.attr[end] = attrUserDefined
	}
	for id := range eog {
		t.eog = append(t.eog, id)
	}
	sort.Slice(t.eog, func(i, j int) bool { return t.eog[i] < t.eog[j] })

	for id, a := range t.attr {
		if a&(attrControl|attrUserDefined|attrUnknown) != 0 {
			t.special = append(t.special, int32(id))
		}
	}
	sort.SliceStable(t.special, func(i, j int) bool {
		return len(t.text[t.special[i]]) > len(t.text[t.special[j]])
	})

	// Per-model attributes the reference sets by name.
	name := ""
	if f.Has(keyGeneralName) {
		name, _ = f.String(keyGeneralName)
	}
	name = strings.ToLower(name)
	if p := preOf(f); p == "jina-v2-de" || p == "jina-v2-es" || p == "jina-v2-code" {
		if id, ok := t.ids["<mask>"]; ok {
			t.attr[id] |= attrLStrip
		}
	} else if strings.Contains(name, "phi-3") || strings.Contains(name, "phi3") {
		for _, id := range t.special {
			t.attr[id] |= attrRStrip
		}
		if id, ok := t.ids["</s>"]; ok {
			t.attr[id] |= attrRStrip
		}
		for _, s := range []string{"<unk>", "<s>", "<|endoftext|>"} {
			if id, ok := t.ids[s]; ok {
				t.attr[id] &^= attrRStrip
			}
		}
	}
	return nil
}

func preOf(f *gguf.File) string {
	s, _ := f.String(keyPre)
	return s
}

func (t *Tokenizer) firstOf(texts []string) int32 {
	best := null
	for _, s := range texts {
		if id, ok := t.ids[s]; ok && (best == null || id < best) {
			best = id
		}
	}
	return best
}

// VocabSize returns the number of tokens in the vocabulary.
func (t *Tokenizer) VocabSize() int { return len(t.text) }

// Model returns tokenizer.ggml.model: "llama", "gpt2" or "bert".
func (t *Tokenizer) Model() string { return t.model }

// ChatTemplate returns tokenizer.chat_template, or "" when the file has none.
func (t *Tokenizer) ChatTemplate() string { return t.chatTemplate }

// BOS returns the beginning-of-sequence id and whether the vocabulary has one.
func (t *Tokenizer) BOS() (int32, bool) { return t.bos, t.bos != null }

// EOS returns the end-of-sequence id and whether the vocabulary has one.
func (t *Tokenizer) EOS() (int32, bool) { return t.eos, t.eos != null }

// EOT returns the end-of-turn id and whether the vocabulary has one.
func (t *Tokenizer) EOT() (int32, bool) { return t.eot, t.eot != null }

// AddBOS reports whether Encode with addSpecial prepends BOS.
func (t *Tokenizer) AddBOS() bool { return t.addBOS }

// AddEOS reports whether Encode with addSpecial appends EOS.
func (t *Tokenizer) AddEOS() bool { return t.addEOS }

// IsEOG reports whether id ends generation (EOS, EOT, EOM and the tokens the
// reference recognises by text, such as "<|im_end|>").
func (t *Tokenizer) IsEOG(id int32) bool {
	for _, e := range t.eog {
		if e == id {
			return true
		}
	}
	return false
}

// EOGIDs returns the end-of-generation ids in ascending order. The caller
// must not modify the slice.
func (t *Tokenizer) EOGIDs() []int32 { return t.eog }

// FIMTokens are a vocabulary's fill-in-the-middle tokens; -1 when absent.
type FIMTokens struct {
	Pre, Suf, Mid, Pad, Rep, Sep int32
}

// FIM returns the fill-in-the-middle tokens: those the GGUF names
// (tokenizer.ggml.fim_pre_token_id and so on), else found by their usual
// texts, as the reference finds them.
func (t *Tokenizer) FIM() FIMTokens {
	return FIMTokens{Pre: t.fim[0], Suf: t.fim[1], Mid: t.fim[2], Pad: t.fim[3], Rep: t.fim[4], Sep: t.fim[5]}
}

// IsControl reports whether id is a control token (such as BOS or
// "<|im_end|>"), which Decode does not render.
func (t *Tokenizer) IsControl(id int32) bool {
	return id >= 0 && int(id) < len(t.attr) && t.attr[id]&attrControl != 0
}

// TokenText returns the vocabulary string of id ("" when out of range).
func (t *Tokenizer) TokenText(id int32) string {
	if id < 0 || int(id) >= len(t.text) {
		return ""
	}
	return t.text[id]
}

// TokenID returns the id of the vocabulary string s.
func (t *Tokenizer) TokenID(s string) (int32, bool) {
	id, ok := t.ids[s]
	return id, ok
}

// ErrNoToken is wrapped by the errors of Encode when the vocabulary lacks a
// token the encoding needs (BOS, EOS, SEP).
var ErrNoToken = errors.New("vocabulary has no such token")

// fragment is a piece of the input: raw text [s, e) or a special token.
type fragment struct {
	tok  int32 // null for raw text
	s, e int
}

// partition splits text on special-token strings, as the reference does
// before tokenizing. Control and unknown tokens are matched only when
// parseSpecial is set; user-defined tokens always are.
func (t *Tokenizer) partition(text string, match specialMatch) []fragment {
	frags := []fragment{{tok: null, s: 0, e: len(text)}}
	if len(text) == 0 {
		return nil
	}
	if match == matchNone {
		return frags
	}
	var next []fragment
	for _, id := range t.special {
		a := t.attr[id]
		if match == matchUserDefined && a&(attrControl|attrUnknown) != 0 {
			continue
		}
		tok := t.text[id]
		if !strings.Contains(text, tok) {
			continue
		}
		next = next[:0]
		for _, fr := range frags {
			if fr.tok != null {
				next = append(next, fr)
				continue
			}
			s, e := fr.s, fr.e
			for s < e {
				k := strings.Index(text[s:e], tok)
				if k < 0 {
					break
				}
				m := s + k
				left := m
				if a&attrLStrip != 0 {
					for left > s && isSpaceC(text[left-1]) {
						left--
					}
				}
				if left > s {
					next = append(next, fragment{tok: null, s: s, e: left})
				}
				next = append(next, fragment{tok: id})
				s = m + len(tok)
				if a&attrRStrip != 0 {
					for s < e && isSpaceC(text[s]) {
						s++
					}
				}
			}
			if s < e {
				next = append(next, fragment{tok: null, s: s, e: e})
			}
		}
		frags, next = next, frags
	}
	return frags
}

// isSpaceC is C's isspace in the "C" locale.
func isSpaceC(c byte) bool { return c == ' ' || c >= '\t' && c <= '\r' }

// Encode returns the token ids of text. With addSpecial it adds BOS/EOS as
// the vocabulary asks (CLS/SEP for WordPiece). With parseSpecial the text of
// control tokens such as "<|im_start|>" becomes those tokens; without it such
// text is tokenized as ordinary text, so user content cannot inject them.
func (t *Tokenizer) Encode(text string, addSpecial, parseSpecial bool) ([]int32, error) {
	match := matchUserDefined
	if parseSpecial {
		match = matchAll
	}
	return t.encode(text, addSpecial, match)
}

// EncodeText returns the token ids of text as plain text: no special token
// is matched in it, neither control tokens nor the user-defined ones that
// Encode matches even without parseSpecial (as the reference does), some
// of which act as control tokens (Phi-3 marks its EOS "</s>" so). A chat
// message's content is tokenized so, that a user cannot type one.
func (t *Tokenizer) EncodeText(text string) ([]int32, error) {
	return t.encode(text, false, matchNone)
}

// specialMatch says which special tokens partition finds in a text.
type specialMatch int

const (
	matchAll         specialMatch = iota // control and user-defined tokens
	matchUserDefined                     // user-defined tokens only (Encode without parseSpecial)
	matchNone                            // none: plain text
)

func (t *Tokenizer) encode(text string, addSpecial bool, match specialMatch) ([]int32, error) {
	frags := t.partition(text, match)
	out := make([]int32, 0, len(text)/3+4)
	// The special tokens around the text: BOS and EOS as the metadata
	// asks; WordPiece always wraps in CLS (its BOS) and SEP.
	addBOS, addEOS := addSpecial && t.addBOS, addSpecial && t.addEOS
	bosName, eos, eosName := "BOS", t.eos, "EOS"
	if t.kind == kindWPM {
		addBOS, addEOS = addSpecial, addSpecial
		bosName, eos, eosName = "BOS (CLS)", t.sep, "SEP"
	}
	if addBOS {
		if err := t.need(t.bos, bosName); err != nil {
			return nil, err
		}
		out = append(out, t.bos)
	}
	switch t.kind {
	case kindSPM:
		out = t.encodeSPM(out, text, frags)
	case kindBPE:
		out = t.encodeBPE(out, text, frags)
	case kindWPM:
		out = t.encodeWPM(out, text, frags)
	}
	if addEOS {
		if err := t.need(eos, eosName); err != nil {
			return nil, err
		}
		out = append(out, eos)
	}
	return out, nil
}

func (t *Tokenizer) need(id int32, what string) error {
	if id == null {
		return fmt.Errorf("tokenizer: %s token: %w", what, ErrNoToken)
	}
	return nil
}
