package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"strconv"

	"github.com/peterbourgon/ff/v4"
	"github.com/vkllm/vkllm/engine/tokenizer"
	"github.com/vkllm/vkllm/gguf"
)

// cmdTokenize prints the token ids of a text (from -p, else stdin) with the
// tokenizer of a GGUF file. It reads only metadata, so vocabulary-only files
// work and no GPU is touched.
func cmdTokenize(args []string) error {
	fs := newFlagSet("tokenize")
	model := fs.String('m', "model", "", "GGUF `file` whose tokenizer to use, or a stored model's name (required)")
	prompt := fs.StringShort('p', "", "`text` to tokenize (default: read stdin)")
	noBOS := fs.BoolLong("no-bos", "do not add the special tokens (BOS/EOS, CLS/SEP) the model asks for")
	noParse := fs.BoolLong("no-parse-special", "tokenize special-token text such as <|im_start|> as plain text")
	pieces := fs.BoolLong("pieces", "print one id<TAB>piece line per token instead of ids on one line")
	if err := parseFlags(fs, args, false, "vkllm tokenize -m FILE [-p TEXT] [flags]"); err != nil {
		return err
	}
	if len(fs.GetArgs()) > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.GetArgs())
	}
	if *model == "" {
		return fmt.Errorf("-m is required")
	}
	text := *prompt
	if !isFlagSet(fs, "p") {
		b, err := io.ReadAll(os.Stdin)
		if err != nil {
			return fmt.Errorf("read stdin: %w", err)
		}
		text = string(b)
	}
	mf := modelFlags{model: *model}
	if _, err := mf.resolve(context.Background(), nil, nil, false); err != nil {
		return err
	}
	f, err := gguf.Open(mf.model)
	if err != nil {
		return err
	}
	tok, err := tokenizer.New(f)
	f.Close()
	if err != nil {
		return fmt.Errorf("%s: %w", *model, err)
	}
	ids, err := tok.Encode(text, !*noBOS, !*noParse)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(os.Stdout)
	if *pieces {
		for _, id := range ids {
			fmt.Fprintf(w, "%d\t%s\n", id, tok.Piece(id))
		}
		return w.Flush()
	}
	var line []byte
	for i, id := range ids {
		if i > 0 {
			line = append(line, ' ')
		}
		line = strconv.AppendInt(line, int64(id), 10)
	}
	line = append(line, '\n')
	w.Write(line)
	return w.Flush()
}

// isFlagSet reports whether the command line set the flag with short name.
func isFlagSet(fs *ff.FlagSet, short string) bool {
	f, ok := fs.GetFlag(short)
	return ok && f.IsSet()
}
