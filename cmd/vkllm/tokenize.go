package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"

	"github.com/vkllm/vkllm/engine/tokenizer"
	"github.com/vkllm/vkllm/gguf"
)

// cmdTokenize prints the token ids of a text (from -p, else stdin) with the
// tokenizer of a GGUF file. It reads only metadata, so vocabulary-only files
// work and no GPU is touched.
func cmdTokenize(args []string) error {
	fs := flag.NewFlagSet("tokenize", flag.ContinueOnError)
	model := fs.String("m", "", "GGUF `file` whose tokenizer to use (required)")
	prompt := fs.String("p", "", "`text` to tokenize (default: read stdin)")
	noBOS := fs.Bool("no-bos", false, "do not add the special tokens (BOS/EOS, CLS/SEP) the model asks for")
	noParse := fs.Bool("no-parse-special", false, "tokenize special-token text such as <|im_start|> as plain text")
	pieces := fs.Bool("pieces", false, "print one id<TAB>piece line per token instead of ids on one line")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
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
	f, err := gguf.Open(*model)
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

func isFlagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) {
		if f.Name == name {
			set = true
		}
	})
	return set
}
