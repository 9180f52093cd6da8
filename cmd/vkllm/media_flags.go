package main

import (
	"fmt"

	"github.com/peterbourgon/ff/v4"
)

// mediaFlags are serve's image-input flags.
type mediaFlags struct {
	mmproj, mediaDir               string
	maxImageBytes                  int
	maxImagePixels, maxImagesPerRq int
	maxDecodes                     int
	maxDecodeBytes                 int
}

func (f *mediaFlags) register(fs *ff.FlagSet) {
	fs.StringVar(&f.mmproj, 0, "mmproj", "", "vision projector `file` (GGUF, the reference's mmproj): chat messages may then carry images (image_url parts; builds with the mtmd feature)")
	fs.StringVar(&f.mediaDir, 0, "media-dir", "", "`folder` image_url paths and file:// URLs are read from, symlinks and .. resolved and confined to it (default none: only data: URLs)")
	fs.IntVar(&f.maxImageBytes, 0, "max-image-bytes", 10<<20, "largest image file in `bytes` (data URL decoded or file)")
	fs.IntVar(&f.maxImagePixels, 0, "max-image-pixels", 40_000_000, "most `pixels` (width x height, read from the header before decoding) of one image")
	fs.IntVar(&f.maxImagesPerRq, 0, "max-images", 8, "most `images` in one request")
	fs.IntVar(&f.maxDecodes, 0, "max-image-decodes", 2, "most images decoded at once, all requests together (others wait while their client stays)")
	fs.IntVar(&f.maxDecodeBytes, 0, "max-image-decode-bytes", 1<<30, "most `bytes` of memory the images being decoded hold, all requests together, each counted from its header before it is decoded (an image needing more is a 400)")
}

// validate refuses limits that would otherwise fall back to a default.
func (f *mediaFlags) validate() error {
	if f.maxImageBytes <= 0 || f.maxImagePixels <= 0 || f.maxImagesPerRq <= 0 {
		return fmt.Errorf("--max-image-bytes, --max-image-pixels and --max-images must be positive (got %d, %d, %d)", f.maxImageBytes, f.maxImagePixels, f.maxImagesPerRq)
	}
	if f.maxDecodes <= 0 || f.maxDecodeBytes <= 0 {
		return fmt.Errorf("--max-image-decodes and --max-image-decode-bytes must be positive (got %d, %d)", f.maxDecodes, f.maxDecodeBytes)
	}
	if f.mmproj != "" && !mtmdBuilt {
		return fmt.Errorf("--mmproj: this vkllm was built without multimodal support (the mtmd feature: build with -tags mtmd, as make build does)")
	}
	return nil
}
