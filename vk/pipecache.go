package vk

/*
#include "glue.h"
*/
import "C"

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"unsafe"

	gv "github.com/goki/vulkan"
)

// A persisted pipeline cache. Drivers that compile SPIR-V to machine code
// when a pipeline is created keep the result in a VkPipelineCache, whose
// data a later process hands back to skip the compile. The file holds one
// device's data behind a header of vkllm's own:
//
//	offset  size  field
//	0       8     magic "VKLLMPC\x01"
//	8       4     the driver version (VkPhysicalDeviceProperties.driverVersion)
//	12      4     zero
//	16      8     n, the bytes of driver data that follow
//	24      32    SHA-256 of the driver data
//	56      n     the driver data (vkGetPipelineCacheData), which opens
//	              with Vulkan's header: its size (>= 32), version 1, the
//	              vendor id, the device id and the pipelineCacheUUID
//
// All numbers are little-endian. A file that is short, fails its checksum
// or comes from another driver (vendor, device, driver version or UUID) is
// ignored: the device starts with an empty cache and the next save
// replaces the file. A save writes a temporary file in the same folder and
// renames it over the old one, so a reader, another process included,
// sees the old file or the new one, never half of one.

// pipelineCacheMagic opens a pipeline-cache file.
const pipelineCacheMagic = "VKLLMPC\x01"

// pipelineCacheHeader is the size of the file's own header.
const pipelineCacheHeader = 56

// DefaultPipelineCacheMaxBytes is the bound of a pipeline-cache file when
// Options.PipelineCacheMaxBytes is 0.
const DefaultPipelineCacheMaxBytes = 256 << 20

// PipelineCacheInfo describes a device's persisted pipeline cache
// (Options.PipelineCacheDir).
type PipelineCacheInfo struct {
	// Path is the cache file ("" when the device has no persisted cache).
	Path string
	// LoadedBytes is the driver data Open loaded from the file (0 when it
	// was absent or ignored).
	LoadedBytes int
	// Ignored says why an existing file was not loaded ("" when it was, or
	// when there was none).
	Ignored string
	// SavedBytes is the driver data the last SavePipelineCache wrote (0
	// before any, or when nothing had changed since the load).
	SavedBytes int
}

// pipelineCache is a Device's VkPipelineCache and where it persists.
type pipelineCache struct {
	cache C.VkPipelineCache // VK_NULL_HANDLE without Options.PipelineCacheDir
	max   int64
	info  PipelineCacheInfo
	sum   [sha256.Size]byte // of the driver data last loaded or saved
}

// PipelineCacheFile returns the name of the pipeline-cache file of a
// device in dir: one file per vendor and device id, so that another
// driver's data for the same device is replaced, not kept beside it.
func PipelineCacheFile(dir string, info DeviceInfo) string {
	return filepath.Join(dir, fmt.Sprintf("pipelines-%04x-%04x.vkcache", info.VendorID, info.DeviceID))
}

// openPipelineCache creates d's pipeline cache from the file in dir, or
// empty where the file is absent or unusable (d.pcache.info.Ignored says
// why). With dir empty the device has none.
func (d *Device) openPipelineCache(dir string, max int64) error {
	if dir == "" {
		return nil
	}
	if max <= 0 {
		max = DefaultPipelineCacheMaxBytes
	}
	pc := &d.pcache
	pc.max = max
	pc.info.Path = PipelineCacheFile(dir, d.info)
	data, err := readPipelineCache(pc.info.Path, d.info, max)
	if err != nil {
		pc.info.Ignored = err.Error()
		data = nil
	}
	if len(data) > 0 {
		r := C.vkllm_create_pipeline_cache(d.in.ctx, C.VkDevice(unsafe.Pointer(d.dev)), unsafe.Pointer(&data[0]), C.size_t(len(data)), &pc.cache)
		if r == C.VK_SUCCESS {
			pc.info.LoadedBytes, pc.sum = len(data), sha256.Sum256(data)
			return nil
		}
		pc.info.Ignored = fmt.Sprintf("the driver refused its %d bytes (%v)", len(data), gv.Result(r))
	}
	r := C.vkllm_create_pipeline_cache(d.in.ctx, C.VkDevice(unsafe.Pointer(d.dev)), nil, 0, &pc.cache)
	return check("vkCreatePipelineCache", gv.Result(r))
}

// readPipelineCache returns the driver data of the pipeline-cache file at
// path, checked against the device; nil and no error when there is no
// file.
func readPipelineCache(path string, info DeviceInfo, max int64) ([]byte, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if st.Size() > max+pipelineCacheHeader {
		return nil, fmt.Errorf("%d bytes, over the bound of %d", st.Size(), max)
	}
	buf := make([]byte, st.Size())
	n, err := f.ReadAt(buf, 0)
	if n < len(buf) {
		return nil, fmt.Errorf("read %d of %d bytes: %v", n, len(buf), err)
	}
	return parsePipelineCache(buf, info)
}

// parsePipelineCache checks a pipeline-cache file's contents against the
// device and returns its driver data.
func parsePipelineCache(buf []byte, info DeviceInfo) ([]byte, error) {
	if len(buf) < pipelineCacheHeader || string(buf[:8]) != pipelineCacheMagic {
		return nil, errors.New("not a vkllm pipeline cache")
	}
	le := binary.LittleEndian
	n := le.Uint64(buf[16:])
	if have := uint64(len(buf) - pipelineCacheHeader); n != have {
		return nil, fmt.Errorf("truncated or extended: header says %d bytes of data, the file holds %d", n, have)
	}
	data := buf[pipelineCacheHeader:]
	if sum := sha256.Sum256(data); !bytes.Equal(sum[:], buf[24:56]) {
		return nil, errors.New("checksum mismatch (corrupt)")
	}
	if len(data) < 32 || le.Uint32(data[0:]) < 32 || le.Uint32(data[4:]) != 1 {
		return nil, errors.New("the driver data has no Vulkan pipeline-cache header")
	}
	if v, dv, id := le.Uint32(data[8:]), le.Uint32(data[12:]), data[16:32]; v != info.VendorID || dv != info.DeviceID ||
		!bytes.Equal(id, info.PipelineCacheUUID[:]) || le.Uint32(buf[8:]) != info.DriverVersion {
		return nil, fmt.Errorf("written by another driver or device (vendor %#x, device %#x, driver version %#x, cache UUID %x; this one: %#x, %#x, %#x, %x)",
			v, dv, le.Uint32(buf[8:]), id, info.VendorID, info.DeviceID, info.DriverVersion, info.PipelineCacheUUID)
	}
	return data, nil
}

// PipelineCache describes the device's persisted pipeline cache.
func (d *Device) PipelineCache() PipelineCacheInfo { return d.pcache.info }

// SavePipelineCache writes the compiled pipelines the device's pipeline
// cache holds to its file (Options.PipelineCacheDir), creating the folder
// where needed: to a temporary file in that folder, renamed over the old
// one. It writes nothing when the device has no persisted cache or when
// the data has not changed since it was loaded or last saved, and fails
// without writing when the data is over Options.PipelineCacheMaxBytes.
// Call it from the goroutine that uses the device, before Close.
func (d *Device) SavePipelineCache() error {
	pc := &d.pcache
	if pc.cache == nil || d.dev == nil {
		return nil
	}
	dev := C.VkDevice(unsafe.Pointer(d.dev))
	var data []byte
	for {
		var size C.size_t
		if err := check("vkGetPipelineCacheData", gv.Result(C.vkllm_pipeline_cache_data(d.in.ctx, dev, pc.cache, &size, nil))); err != nil {
			return err
		}
		if int64(size) > pc.max {
			return fmt.Errorf("vk: pipeline cache %s: %d bytes of compiled pipelines, over the bound of %d; not saved", pc.info.Path, size, pc.max)
		}
		if size == 0 {
			return nil
		}
		data = make([]byte, size)
		r := C.vkllm_pipeline_cache_data(d.in.ctx, dev, pc.cache, &size, unsafe.Pointer(&data[0]))
		if gv.Result(r) == gv.Incomplete {
			continue // grew between the calls
		}
		if err := check("vkGetPipelineCacheData", gv.Result(r)); err != nil {
			return err
		}
		data = data[:size]
		break
	}
	sum := sha256.Sum256(data)
	if sum == pc.sum {
		return nil
	}
	var head [pipelineCacheHeader]byte
	copy(head[:], pipelineCacheMagic)
	le := binary.LittleEndian
	le.PutUint32(head[8:], d.info.DriverVersion)
	le.PutUint64(head[16:], uint64(len(data)))
	copy(head[24:], sum[:])
	if err := writeFileAtomic(pc.info.Path, head[:], data); err != nil {
		return fmt.Errorf("vk: saving the pipeline cache: %w", err)
	}
	pc.sum, pc.info.SavedBytes = sum, len(data)
	return nil
}

// writeFileAtomic writes parts to path through a temporary file in the
// same folder renamed over it.
func writeFileAtomic(path string, parts ...[]byte) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	err = f.Chmod(0o644) // CreateTemp's 0600 would hide the cache from the service's other users
	for _, p := range parts {
		if err != nil {
			break
		}
		_, err = f.Write(p)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
	}
	return err
}

// closePipelineCache destroys the device's VkPipelineCache.
func (d *Device) closePipelineCache() {
	if d.pcache.cache != nil {
		C.vkllm_destroy_pipeline_cache(d.in.ctx, C.VkDevice(unsafe.Pointer(d.dev)), d.pcache.cache)
		d.pcache.cache = nil
	}
}
