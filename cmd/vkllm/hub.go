package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"text/tabwriter"

	"github.com/dustin/go-humanize"
	"github.com/peterbourgon/ff/v4"
	"github.com/vkllm/vkllm/internal/hub"
)

// hubFlags are the flags that get a model from a Hugging Face hub, named
// as llama-server names them (-hf, -hff, -hft), and the store's.
type hubFlags struct {
	hfRepo, hfFile, hfToken string
	modelsDir               string
	offline                 bool
	// storeName is the store name (owner/repo:QUANT) of the model resolve
	// found, "" for a file.
	storeName string
}

func (h *hubFlags) register(fs *ff.FlagSet) {
	fs.StringVar(&h.hfRepo, 0, "hf-repo", "", "(-hf) Hugging Face `owner/repo[:quant]` to download into the store (when not there yet) and load: the quant is matched without regard to case, Q4_K_M by default, else the repository's first GGUF; a vision repository's mmproj file comes too (serve loads it unless --no-mmproj)")
	h.registerPull(fs)
}

// registerPull adds the flags of vkllm pull: all but --hf-repo.
func (h *hubFlags) registerPull(fs *ff.FlagSet) {
	fs.StringVar(&h.hfFile, 0, "hf-file", "", "(-hff) the repository's model `file` to take instead of a quant")
	fs.StringVar(&h.hfToken, 0, "hf-token", "", "(-hft) Hugging Face access `token` for gated and private repositories (default $HF_TOKEN)")
	fs.StringVar(&h.modelsDir, 0, "models-dir", "", "`folder` of the model store (default $HF_HOME/vkllm when $HF_HOME is set, else vkllm/models in the user's cache folder: "+hub.DefaultDir()+")")
	fs.BoolVarDefault(&h.offline, 0, "offline", false, "use the store alone, never the network (as $HF_HUB_OFFLINE=1); $HF_ENDPOINT names another hub")
}

// client returns the hub client the flags and the environment configure.
func (h *hubFlags) client() *hub.Client {
	c := hub.NewFromEnv(h.modelsDir)
	if h.hfToken != "" {
		c.Token = h.hfToken
	}
	if h.offline {
		c.Offline = true
	}
	return c
}

// barFactory makes a progress reporter for a label.
type barFactory func(label string) reporter

// newDownloadProgress returns the factory of download bars on f.
func newDownloadProgress(f *os.File) barFactory {
	return func(label string) reporter {
		p := newProgress(f, label)
		p.verb = "downloaded"
		return p
	}
}

// resolve turns the model's names into a file: with --hf-repo it pulls
// the model into the store (a no-op when it is there) and sets m.model to
// its file; a -m that is no file but reads owner/repo[:quant] is a stored
// model's name (no network). It returns the stored model's projector, ""
// for none or when withMMProj is false. bars follow the downloads; notes
// get remarks for people (nil: stderr).
func (m *modelFlags) resolve(ctx context.Context, bars barFactory, notes func(string), withMMProj bool) (mmproj string, err error) {
	if notes == nil {
		notes = func(s string) { fmt.Fprintln(os.Stderr, s) }
	}
	c := m.client()
	c.Notice = notes
	var model *hub.Model
	switch {
	case m.hfRepo != "":
		if m.model != "" {
			return "", fmt.Errorf("-m %s and --hf-repo %s both name a model: pass one", m.model, m.hfRepo)
		}
		ref, err := hub.ParseRef(m.hfRepo)
		if err != nil {
			return "", fmt.Errorf("--hf-repo: %w", err)
		}
		ref.File = m.hfFile
		model, err = pull(ctx, c, ref, withMMProj, bars)
		if err != nil {
			return "", err
		}
		m.hfRepo, m.hfFile = "", ""
	case m.hfFile != "":
		return "", errors.New("--hf-file needs --hf-repo (-hf owner/repo)")
	case m.model != "" && hub.LooksLikeRef(m.model):
		if _, err := os.Stat(m.model); err == nil {
			return "", nil // a file of that name wins
		}
		ref, _ := hub.ParseRef(m.model)
		model, err = c.Cached(ref)
		if err != nil {
			return "", fmt.Errorf("-m %s: no such file, and %w", m.model, err)
		}
	default:
		return "", nil
	}
	m.model, m.storeName = model.Path(), model.Name()
	if withMMProj {
		mmproj = model.MMProjPath()
	}
	return mmproj, nil
}

// pull pulls ref with a progress bar per file.
func pull(ctx context.Context, c *hub.Client, ref hub.Ref, withMMProj bool, bars barFactory) (*hub.Model, error) {
	var bar reporter
	var current string
	c.Progress = func(file string, done, total int64) {
		if file != current {
			if bar != nil {
				bar.done()
			}
			bar, current = bars("downloading "+file), file
		}
		bar.update(done, total)
	}
	m, err := c.Pull(ctx, ref, withMMProj)
	if bar != nil {
		bar.done()
	}
	return m, err
}

// cmdPull downloads a model into the store.
func cmdPull(args []string) error {
	fs := newFlagSet("pull")
	var h hubFlags
	h.registerPull(fs)
	noMMProj := fs.BoolLong("no-mmproj", "leave a vision repository's projector out")
	names, args := leadingArgs(args)
	if err := parseFlags(fs, args, false, "vkllm pull [flags] owner/repo[:quant]"); err != nil {
		return err
	}
	names = append(names, fs.GetArgs()...)
	if len(names) != 1 {
		return fmt.Errorf("want one model: vkllm pull owner/repo[:quant]")
	}
	ref, err := hub.ParseRef(names[0])
	if err != nil {
		return err
	}
	ref.File = h.hfFile
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	c := h.client()
	c.Notice = func(s string) { fmt.Fprintln(os.Stderr, s) }
	m, err := pull(ctx, c, ref, !*noMMProj, newDownloadProgress(os.Stderr))
	if err != nil {
		return err
	}
	fmt.Printf("%s  %s  %s\n", m.Name(), humanize.IBytes(uint64(m.Size())), m.Path())
	if p := m.MMProjPath(); p != "" {
		fmt.Printf("mmproj  %s\n", p)
	}
	return nil
}

// cmdList lists the store's models.
func cmdList(args []string) error {
	fs := newFlagSet("list")
	var h hubFlags
	fs.StringVar(&h.modelsDir, 0, "models-dir", "", "`folder` of the model store (default "+hub.DefaultDir()+")")
	if err := parseFlags(fs, args, false, "vkllm list [--models-dir DIR]"); err != nil {
		return err
	}
	if len(fs.GetArgs()) > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.GetArgs())
	}
	return listModels(os.Stdout, h.client())
}

func listModels(w io.Writer, c *hub.Client) error {
	models, err := c.List()
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tQUANT\tSIZE\tMMPROJ\tPATH")
	for _, m := range models {
		proj := "-"
		if m.MMProj != nil {
			proj = "yes"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", m.Name(), m.Quant, humanize.IBytes(uint64(m.Size())), proj, m.Path())
	}
	return tw.Flush()
}

// cmdRm removes models from the store.
func cmdRm(args []string) error {
	fs := newFlagSet("rm")
	var h hubFlags
	fs.StringVar(&h.modelsDir, 0, "models-dir", "", "`folder` of the model store (default "+hub.DefaultDir()+")")
	names, args := leadingArgs(args)
	if err := parseFlags(fs, args, false, "vkllm rm [--models-dir DIR] owner/repo[:quant]..."); err != nil {
		return err
	}
	names = append(names, fs.GetArgs()...)
	if len(names) == 0 {
		return errors.New("want the name of a stored model: vkllm rm owner/repo[:quant] (see vkllm list)")
	}
	c := h.client()
	for _, name := range names {
		removed, err := c.Remove(name)
		if err != nil {
			return err
		}
		fmt.Printf("removed %s (%d files)\n", name, len(removed))
	}
	return nil
}

// leadingArgs splits off the arguments before the first flag (vkllm pull
// NAME --models-dir DIR): flag parsing stops at the first argument that
// is no flag.
func leadingArgs(args []string) (names, rest []string) {
	for len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		names, args = append(names, args[0]), args[1:]
	}
	return names, args
}
