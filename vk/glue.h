// glue.h declares the small C layer vk uses for what goki/vulkan v1.0.8 does
// not expose: Vulkan 1.1+ queries through pNext chains, the feature chain
// for device creation, and a VK_EXT_debug_utils messenger that collects
// validation messages into a per-instance buffer (no Go callbacks).
#ifndef VKLLM_GLUE_H
#define VKLLM_GLUE_H
#include <stdint.h>
#include <vulkan/vulkan.h>

#ifndef VK_KHR_cooperative_matrix
// VK_KHR_cooperative_matrix (Vulkan headers 1.3.255 and later), for older
// system headers: the values and layouts of the registry.
#define VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_KHR ((VkStructureType)1000506000)
#define VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_KHR ((VkStructureType)1000506001)
#define VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_PROPERTIES_KHR ((VkStructureType)1000506002)
typedef struct VkCooperativeMatrixPropertiesKHR {
	VkStructureType sType;
	void* pNext;
	uint32_t MSize;
	uint32_t NSize;
	uint32_t KSize;
	uint32_t AType; // VkComponentTypeKHR, numbered as VkComponentTypeNV
	uint32_t BType;
	uint32_t CType;
	uint32_t ResultType;
	VkBool32 saturatingAccumulation;
	uint32_t scope; // VkScopeKHR, numbered as VkScopeNV
} VkCooperativeMatrixPropertiesKHR;
typedef struct VkPhysicalDeviceCooperativeMatrixFeaturesKHR {
	VkStructureType sType;
	void* pNext;
	VkBool32 cooperativeMatrix;
	VkBool32 cooperativeMatrixRobustBufferAccess;
} VkPhysicalDeviceCooperativeMatrixFeaturesKHR;
typedef struct VkPhysicalDeviceCooperativeMatrixPropertiesKHR {
	VkStructureType sType;
	void* pNext;
	VkShaderStageFlags cooperativeMatrixSupportedStages;
} VkPhysicalDeviceCooperativeMatrixPropertiesKHR;
typedef VkResult (VKAPI_PTR *PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR)(VkPhysicalDevice, uint32_t*, VkCooperativeMatrixPropertiesKHR*);
#endif

// VKLLM_MAX_COOP_SHAPES bounds the cooperative-matrix shapes reported.
#define VKLLM_MAX_COOP_SHAPES 64
// vkllm_coop_shape is one supported cooperative-matrix shape (KHR or NV):
// component types as VkComponentTypeKHR, scope as VkScopeKHR.
typedef struct vkllm_coop_shape {
	uint32_t m, n, k, a, b, c, result, saturating, scope;
} vkllm_coop_shape;

typedef struct vkllm_info {
	uint32_t api_version, driver_version, vendor_id, device_id, device_type;
	char name[256];
	char driver_name[256];
	char driver_info[256];
	uint32_t subgroup_size, subgroup_ops, subgroup_stages;
	uint32_t storage16, float16, storage8, int8, int_dot, coop_matrix_khr, coop_matrix_nv, bda, push_descriptor, memory_budget, subgroup_size_control;
	// coop_api says which cooperative-matrix extension is usable (its
	// feature set, compute shaders among its stages, a Vulkan 1.2 device):
	// 1 VK_KHR_cooperative_matrix, 2 VK_NV_cooperative_matrix (only where
	// the KHR one is not), 0 none; coop_shapes lists that extension's
	// shapes. vulkan_memory_model is the Vulkan 1.2 feature.
	uint32_t coop_api, coop_shape_count, vulkan_memory_model;
	vkllm_coop_shape coop_shapes[VKLLM_MAX_COOP_SHAPES];
	uint64_t max_storage_buffer_range, max_memory_allocation_size, max_buffer_size, min_storage_offset_align;
	uint64_t max_uniform_buffer_range, min_uniform_offset_align;
	uint64_t max_texel_elements, min_texel_offset_align;
	uint32_t max_wg_size[3], max_wg_invocations, max_wg_count[3], max_shared_memory, max_push_constants;
	// compute_units: NVIDIA's SM count (VK_NV_shader_sm_builtins) or AMD's
	// CU count (VK_AMD_shader_core_properties); 0 when neither is exposed.
	uint32_t compute_units;
	uint32_t heap_count;
	uint64_t heap_size[16], heap_budget[16], heap_usage[16];
	uint32_t heap_flags[16];
	// Subgroup size control (VK_EXT_subgroup_size_control): the features
	// and the range of sizes a compute pipeline may require.
	uint32_t sg_size_control, sg_full_subgroups, sg_min_size, sg_max_size, sg_required_stages;
	// pipeline_cache_uuid is VkPhysicalDeviceProperties.pipelineCacheUUID:
	// pipeline cache data from a device with another one is not usable.
	uint8_t pipeline_cache_uuid[VK_UUID_SIZE];
} vkllm_info;

typedef struct vkllm_ctx vkllm_ctx;

// vkllm_ctx_new loads libvulkan.so.1 and returns a context, or NULL.
vkllm_ctx* vkllm_ctx_new(void);
void vkllm_ctx_set_instance(vkllm_ctx* c, VkInstance inst);
VkResult vkllm_ctx_messenger(vkllm_ctx* c);
// vkllm_ctx_drain copies up to cap bytes of pending messages (separated by
// '\n') into out, clears them and returns the number of messages drained.
int vkllm_ctx_drain(vkllm_ctx* c, char* out, int cap, int* written);
void vkllm_ctx_free(vkllm_ctx* c);
void vkllm_query(vkllm_ctx* c, VkPhysicalDevice pd, vkllm_info* out);
// vkllm_feature_chain returns a malloc'd pNext chain enabling the features
// that are supported (flags from vkllm_info), with the cooperative-matrix
// feature of info->coop_api and the Vulkan memory model (which glslang's
// cooperative-matrix modules declare) where coop_api is set; free with
// vkllm_free_chain.
void* vkllm_feature_chain(const vkllm_info* info);
void vkllm_free_chain(void* chain);
// vkllm_chain_subgroup_size links a malloc'd
// VkPhysicalDeviceSubgroupSizeControlFeaturesEXT enabling what info
// reports into chain (from vkllm_feature_chain) and returns it, or NULL;
// free it with free() after device creation.
void* vkllm_chain_subgroup_size(void* chain, const vkllm_info* info);


// vkllm_barrier records one global memory barrier (goki's wrapper allocates
// C memory with finalizers on every call; this is the hot path).
void vkllm_barrier(vkllm_ctx* c, VkCommandBuffer cb, VkPipelineStageFlags src_stage, VkPipelineStageFlags dst_stage, VkAccessFlags src_access, VkAccessFlags dst_access);
// vkllm_copy records vkCmdCopyBuffer of n regions (C memory: no Go
// pointers, no per-call allocation).
void vkllm_copy(vkllm_ctx* c, VkCommandBuffer cb, VkBuffer src, VkBuffer dst, uint32_t n, const VkBufferCopy* regions);
// vkllm_submit submits one command buffer signalling fence.
VkResult vkllm_submit(vkllm_ctx* c, VkQueue q, VkCommandBuffer cb, VkFence fence);
// vkllm_begin begins a one-time-submit command buffer.
VkResult vkllm_begin(vkllm_ctx* c, VkCommandBuffer cb);
VkResult vkllm_begin_reusable(vkllm_ctx* c, VkCommandBuffer cb);
// vkllm_wait waits for fence without a timeout; vkllm_reset resets it.
VkResult vkllm_wait(vkllm_ctx* c, VkDevice dev, VkFence fence);
VkResult vkllm_reset(vkllm_ctx* c, VkDevice dev, VkFence fence);
// vkllm_validation_features returns a VkValidationFeaturesEXT (owned by c)
// that turns on synchronization validation, for VkInstanceCreateInfo.pNext.
void* vkllm_validation_features(vkllm_ctx* c);
// vkllm_loader_gipa dlopens libvulkan.so.1 (not the -dev symlink
// libvulkan.so that goki/vulkan's default loader wants) for the life of the
// process and returns its vkGetInstanceProcAddr, or NULL.
void* vkllm_loader_gipa(void);

// The calls below replace goki/vulkan wrappers that must not be used:
// for slices (and structs holding slices) goki copies the data into C
// memory that a finalizer frees, and that finalizer may run while the
// driver is still reading or writing it (a use after free that corrupted
// the C heap under garbage-collector load). Every struct here lives on the
// C stack. Name lists are n NUL-terminated strings laid end to end.

// vkllm_has_layer reports whether the loader offers instance layer name.
int vkllm_has_layer(vkllm_ctx* c, const char* name);
// vkllm_has_instance_ext reports whether instance extension name is
// offered by the loader or, when layer is not NULL, by that layer.
int vkllm_has_instance_ext(vkllm_ctx* c, const char* name, const char* layer);
VkResult vkllm_create_instance(vkllm_ctx* c, uint32_t api_version, const char* layers, uint32_t n_layers,
	const char* exts, uint32_t n_exts, const void* next, VkInstance* out);
// vkllm_queue_families writes up to cap families' queue flags, queue
// counts and timestamp valid bits and returns the number of families.
uint32_t vkllm_queue_families(vkllm_ctx* c, VkPhysicalDevice pd, uint32_t cap, uint32_t* flags, uint32_t* counts, uint32_t* ts_bits);
// vkllm_create_device creates a device with one queue of family, the
// feature chain (or NULL), layers and extensions.
VkResult vkllm_create_device(vkllm_ctx* c, VkPhysicalDevice pd, uint32_t family, const void* chain,
	const char* layers, uint32_t n_layers, const char* exts, uint32_t n_exts, VkDevice* out);
// vkllm_create_descriptor_pool creates a pool of max_sets sets holding the
// given numbers of storage, uniform and uniform-texel descriptors (pool
// sizes of 0 are left out).
VkResult vkllm_create_descriptor_pool(vkllm_ctx* c, VkDevice dev, uint32_t max_sets, uint32_t n_storage, uint32_t n_uniform, uint32_t n_texel, VkDescriptorPool* out);
VkResult vkllm_alloc_set(vkllm_ctx* c, VkDevice dev, VkDescriptorPool pool, VkDescriptorSetLayout layout, VkDescriptorSet* out);
// vkllm_binding is one descriptor of vkllm_write_set: binding i of the set
// gets buffer [offset, offset+range) or, for a texel type, view.
typedef struct vkllm_binding {
	uint32_t type; // VkDescriptorType
	VkBuffer buffer;
	VkBufferView view;
	uint64_t offset, range;
} vkllm_binding;
// vkllm_write_set writes bindings 0..n-1 of set (n <= VKLLM_MAX_BINDINGS).
void vkllm_write_set(vkllm_ctx* c, VkDevice dev, VkDescriptorSet set, uint32_t n, const vkllm_binding* b);

#define VKLLM_MAX_BINDINGS 32
#define VKLLM_MAX_SPEC 32
// vkllm_pipeline is what vkllm_create_pipeline made; step counts the objects
// created (module, set layout, layout, pipeline) so that a failure can be
// cleaned up.
typedef struct vkllm_pipeline {
	VkShaderModule module;
	VkDescriptorSetLayout set_layout;
	VkPipelineLayout layout;
	VkPipeline pipeline;
	int step;
} vkllm_pipeline;
// vkllm_create_pipeline creates a compute pipeline with its shader module,
// a set layout of `bindings` storage buffers (uniform buffers where
// uniform_mask has their bit) and a pipeline layout with
// push_size bytes of push constants; spec holds n_spec 4-byte
// specialization constants (ids 0..n_spec-1); a nonzero subgroup_size is
// the stage's VkPipelineShaderStageRequiredSubgroupSizeCreateInfoEXT, and
// full_subgroups sets REQUIRE_FULL_SUBGROUPS; cache (or VK_NULL_HANDLE) is
// the pipeline cache the driver looks the pipeline up in. Every create-info lives on
// the C stack: goki/vulkan's wrappers attach finalizers to C copies of the
// structs, which the garbage collector could free while the driver still
// reads them.
VkResult vkllm_create_pipeline(vkllm_ctx* c, VkDevice dev, const uint32_t* code, size_t code_size,
	uint32_t bindings, uint32_t uniform_mask, uint32_t texel_mask, uint32_t push_size, const uint32_t* spec, uint32_t n_spec,
	uint32_t subgroup_size, uint32_t full_subgroups, VkPipelineCache cache, vkllm_pipeline* out);
// vkllm_create_pipeline_cache creates a pipeline cache holding size bytes
// of initial data (none when size is 0).
VkResult vkllm_create_pipeline_cache(vkllm_ctx* c, VkDevice dev, const void* data, size_t size, VkPipelineCache* out);
// vkllm_pipeline_cache_data is vkGetPipelineCacheData: with data NULL it
// sets *size to the bytes the cache's data takes.
VkResult vkllm_pipeline_cache_data(vkllm_ctx* c, VkDevice dev, VkPipelineCache cache, size_t* size, void* data);
void vkllm_destroy_pipeline_cache(vkllm_ctx* c, VkDevice dev, VkPipelineCache cache);
#endif
