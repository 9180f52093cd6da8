#include "glue.h"
#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

struct vkllm_ctx {
	void* lib;
	PFN_vkGetInstanceProcAddr gipa;
	VkInstance inst;
	PFN_vkDestroyDebugUtilsMessengerEXT destroy_messenger;
	VkDebugUtilsMessengerEXT messenger;
	PFN_vkCmdPipelineBarrier barrier;
	PFN_vkQueueSubmit submit;
	PFN_vkBeginCommandBuffer begin;
	PFN_vkWaitForFences wait;
	PFN_vkResetFences reset;
	PFN_vkCmdCopyBuffer copy;
	PFN_vkUpdateDescriptorSets update_sets;
	VkValidationFeaturesEXT vf;
	VkValidationFeatureEnableEXT vf_enable[1];
	pthread_mutex_t mu;
	char* buf;
	size_t len, cap;
	int count;
};

vkllm_ctx* vkllm_ctx_new(void) {
	void* lib = dlopen("libvulkan.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!lib) lib = dlopen("libvulkan.so", RTLD_NOW | RTLD_LOCAL);
	if (!lib) return NULL;
	PFN_vkGetInstanceProcAddr gipa = (PFN_vkGetInstanceProcAddr)dlsym(lib, "vkGetInstanceProcAddr");
	if (!gipa) { dlclose(lib); return NULL; }
	vkllm_ctx* c = calloc(1, sizeof(*c));
	if (!c) { dlclose(lib); return NULL; }
	c->lib = lib;
	c->gipa = gipa;
	pthread_mutex_init(&c->mu, NULL);
	return c;
}

void vkllm_ctx_set_instance(vkllm_ctx* c, VkInstance inst) {
	c->inst = inst;
	c->barrier = (PFN_vkCmdPipelineBarrier)c->gipa(inst, "vkCmdPipelineBarrier");
	c->submit = (PFN_vkQueueSubmit)c->gipa(inst, "vkQueueSubmit");
	c->begin = (PFN_vkBeginCommandBuffer)c->gipa(inst, "vkBeginCommandBuffer");
	c->wait = (PFN_vkWaitForFences)c->gipa(inst, "vkWaitForFences");
	c->reset = (PFN_vkResetFences)c->gipa(inst, "vkResetFences");
	c->copy = (PFN_vkCmdCopyBuffer)c->gipa(inst, "vkCmdCopyBuffer");
	c->update_sets = (PFN_vkUpdateDescriptorSets)c->gipa(inst, "vkUpdateDescriptorSets");
}

static VKAPI_ATTR VkBool32 VKAPI_CALL on_message(VkDebugUtilsMessageSeverityFlagBitsEXT sev,
		VkDebugUtilsMessageTypeFlagsEXT type, const VkDebugUtilsMessengerCallbackDataEXT* data, void* user) {
	vkllm_ctx* c = user;
	const char* msg = data && data->pMessage ? data->pMessage : "(no message)";
	const char* kind = (sev & VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT) ? "error: " : "warning: ";
	size_t need = strlen(kind) + strlen(msg) + 2;
	pthread_mutex_lock(&c->mu);
	if (c->len + need > c->cap && c->len + need < (1u << 24)) {
		size_t nc = (c->cap ? c->cap * 2 : 4096);
		while (nc < c->len + need) nc *= 2;
		char* nb = realloc(c->buf, nc);
		if (nb) { c->buf = nb; c->cap = nc; }
	}
	if (c->len + need <= c->cap) {
		memcpy(c->buf + c->len, kind, strlen(kind));
		c->len += strlen(kind);
		memcpy(c->buf + c->len, msg, strlen(msg));
		c->len += strlen(msg);
		c->buf[c->len++] = '\n';
	}
	c->count++;
	pthread_mutex_unlock(&c->mu);
	(void)type;
	return VK_FALSE;
}

VkResult vkllm_ctx_messenger(vkllm_ctx* c) {
	PFN_vkCreateDebugUtilsMessengerEXT create = (PFN_vkCreateDebugUtilsMessengerEXT)c->gipa(c->inst, "vkCreateDebugUtilsMessengerEXT");
	c->destroy_messenger = (PFN_vkDestroyDebugUtilsMessengerEXT)c->gipa(c->inst, "vkDestroyDebugUtilsMessengerEXT");
	if (!create || !c->destroy_messenger) return VK_ERROR_EXTENSION_NOT_PRESENT;
	VkDebugUtilsMessengerCreateInfoEXT ci = {0};
	ci.sType = VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT;
	ci.messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT;
	ci.messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT;
	ci.pfnUserCallback = on_message;
	ci.pUserData = c;
	return create(c->inst, &ci, NULL, &c->messenger);
}

int vkllm_ctx_drain(vkllm_ctx* c, char* out, int cap, int* written) {
	pthread_mutex_lock(&c->mu);
	int n = c->count;
	size_t w = c->len < (size_t)cap ? c->len : (size_t)cap;
	if (w) memcpy(out, c->buf, w);
	*written = (int)w;
	c->len = 0;
	c->count = 0;
	pthread_mutex_unlock(&c->mu);
	return n;
}

void vkllm_ctx_free(vkllm_ctx* c) {
	if (!c) return;
	if (c->messenger && c->destroy_messenger) c->destroy_messenger(c->inst, c->messenger, NULL);
	free(c->buf);
	pthread_mutex_destroy(&c->mu);
	dlclose(c->lib);
	free(c);
}

static int has_ext(VkExtensionProperties* e, uint32_t n, const char* name) {
	for (uint32_t i = 0; i < n; i++) if (strcmp(e[i].extensionName, name) == 0) return 1;
	return 0;
}

// query_coop_shapes fills out's cooperative-matrix shapes for
// out->coop_api, clearing coop_api when the query fails or finds none.
static void query_coop_shapes(vkllm_ctx* c, VkPhysicalDevice pd, vkllm_info* out) {
	uint32_t n = 0;
	if (out->coop_api == 1) {
		PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR get = (PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR)c->gipa(c->inst, "vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR");
		VkCooperativeMatrixPropertiesKHR* p = NULL;
		if (get && get(pd, &n, NULL) == VK_SUCCESS && n > 0 && (p = calloc(n, sizeof(*p)))) {
			for (uint32_t i = 0; i < n; i++) p[i].sType = VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_KHR;
			VkResult r = get(pd, &n, p);
			if (r != VK_SUCCESS && r != VK_INCOMPLETE) n = 0;
			for (uint32_t i = 0; i < n && i < VKLLM_MAX_COOP_SHAPES; i++) {
				vkllm_coop_shape s = {p[i].MSize, p[i].NSize, p[i].KSize, p[i].AType, p[i].BType, p[i].CType, p[i].ResultType, p[i].saturatingAccumulation, p[i].scope};
				out->coop_shapes[out->coop_shape_count++] = s;
			}
		}
		free(p);
	} else if (out->coop_api == 2) {
		PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesNV get = (PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesNV)c->gipa(c->inst, "vkGetPhysicalDeviceCooperativeMatrixPropertiesNV");
		VkCooperativeMatrixPropertiesNV* p = NULL;
		if (get && get(pd, &n, NULL) == VK_SUCCESS && n > 0 && (p = calloc(n, sizeof(*p)))) {
			for (uint32_t i = 0; i < n; i++) p[i].sType = VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_NV;
			VkResult r = get(pd, &n, p);
			if (r != VK_SUCCESS && r != VK_INCOMPLETE) n = 0;
			// NV's D is the result; it has no saturating accumulation.
			for (uint32_t i = 0; i < n && i < VKLLM_MAX_COOP_SHAPES; i++) {
				vkllm_coop_shape s = {p[i].MSize, p[i].NSize, p[i].KSize, p[i].AType, p[i].BType, p[i].CType, p[i].DType, 0, p[i].scope};
				out->coop_shapes[out->coop_shape_count++] = s;
			}
		}
		free(p);
	}
	if (out->coop_shape_count == 0) out->coop_api = 0;
}

// query_subgroup_size fills the sg_* fields of out for a device with
// VK_EXT_subgroup_size_control. The instance asks for Vulkan 1.2, so a 1.3
// device's core subgroupSizeControl is reachable only through the
// extension, which Device.create enables with the features.
static void query_subgroup_size(PFN_vkGetPhysicalDeviceProperties2 props2, PFN_vkGetPhysicalDeviceFeatures2 feats2,
		VkPhysicalDevice pd, vkllm_info* out) {
	if (!props2 || !feats2) return;
	VkPhysicalDeviceSubgroupSizeControlFeaturesEXT f = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_FEATURES_EXT};
	VkPhysicalDeviceFeatures2 f2 = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
	f2.pNext = &f;
	feats2(pd, &f2);
	VkPhysicalDeviceSubgroupSizeControlPropertiesEXT p = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_PROPERTIES_EXT};
	VkPhysicalDeviceProperties2 p2 = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2};
	p2.pNext = &p;
	props2(pd, &p2);
	out->sg_size_control = f.subgroupSizeControl;
	out->sg_full_subgroups = f.computeFullSubgroups;
	out->sg_min_size = p.minSubgroupSize;
	out->sg_max_size = p.maxSubgroupSize;
	out->sg_required_stages = p.requiredSubgroupSizeStages;
}

void vkllm_query(vkllm_ctx* c, VkPhysicalDevice pd, vkllm_info* out) {
	memset(out, 0, sizeof(*out));
	PFN_vkEnumerateDeviceExtensionProperties enum_ext = (PFN_vkEnumerateDeviceExtensionProperties)c->gipa(c->inst, "vkEnumerateDeviceExtensionProperties");
	PFN_vkGetPhysicalDeviceProperties2 props2 = (PFN_vkGetPhysicalDeviceProperties2)c->gipa(c->inst, "vkGetPhysicalDeviceProperties2");
	PFN_vkGetPhysicalDeviceFeatures2 feats2 = (PFN_vkGetPhysicalDeviceFeatures2)c->gipa(c->inst, "vkGetPhysicalDeviceFeatures2");
	PFN_vkGetPhysicalDeviceMemoryProperties2 mem2 = (PFN_vkGetPhysicalDeviceMemoryProperties2)c->gipa(c->inst, "vkGetPhysicalDeviceMemoryProperties2");
	uint32_t n = 0;
	VkExtensionProperties* exts = NULL;
	if (enum_ext && enum_ext(pd, NULL, &n, NULL) == VK_SUCCESS && n > 0) {
		exts = calloc(n, sizeof(*exts));
		if (!exts || enum_ext(pd, NULL, &n, exts) != VK_SUCCESS) n = 0;
	}
	out->coop_matrix_khr = has_ext(exts, n, "VK_KHR_cooperative_matrix");
	out->coop_matrix_nv = has_ext(exts, n, "VK_NV_cooperative_matrix");
	out->push_descriptor = has_ext(exts, n, "VK_KHR_push_descriptor");
	out->memory_budget = has_ext(exts, n, "VK_EXT_memory_budget");
	int has_int_dot = has_ext(exts, n, "VK_KHR_shader_integer_dot_product");
	int has_sm = has_ext(exts, n, "VK_NV_shader_sm_builtins");
	int has_amd_core = has_ext(exts, n, "VK_AMD_shader_core_properties");
	int has_sg_size = has_ext(exts, n, "VK_EXT_subgroup_size_control");
	free(exts);
	// Cooperative matrices: the KHR extension where the device has it,
	// else NVIDIA's older one.
	VkPhysicalDeviceCooperativeMatrixPropertiesKHR coop_khr_props = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_PROPERTIES_KHR};
	VkPhysicalDeviceCooperativeMatrixPropertiesNV coop_nv_props = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_PROPERTIES_NV};
	VkPhysicalDeviceCooperativeMatrixFeaturesKHR coop_khr_feat = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_KHR};
	VkPhysicalDeviceCooperativeMatrixFeaturesNV coop_nv_feat = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_NV};

	VkPhysicalDeviceDriverProperties drv = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES};
	VkPhysicalDeviceSubgroupProperties sg = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES};
	VkPhysicalDeviceMaintenance3Properties m3 = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_3_PROPERTIES};
	// Core Vulkan has no count of compute units; two vendor extensions do.
	VkPhysicalDeviceShaderSMBuiltinsPropertiesNV sm = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_SM_BUILTINS_PROPERTIES_NV};
	VkPhysicalDeviceShaderCorePropertiesAMD amd = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_CORE_PROPERTIES_AMD};
	sg.pNext = &drv;
	m3.pNext = &sg;
	void* vendor = &m3;
	if (has_sm) {
		sm.pNext = vendor;
		vendor = &sm;
	}
	if (has_amd_core) {
		amd.pNext = vendor;
		vendor = &amd;
	}
	if (out->coop_matrix_khr) {
		coop_khr_props.pNext = vendor;
		vendor = &coop_khr_props;
	} else if (out->coop_matrix_nv) {
		coop_nv_props.pNext = vendor;
		vendor = &coop_nv_props;
	}
	VkPhysicalDeviceProperties2 p2 = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2};
	p2.pNext = vendor;
	if (props2) props2(pd, &p2);
	if (has_sm && sm.shaderSMCount > 0) {
		out->compute_units = sm.shaderSMCount;
	} else if (has_amd_core) {
		out->compute_units = amd.shaderEngineCount * amd.shaderArraysPerEngineCount * amd.computeUnitsPerShaderArray;
	}
	VkPhysicalDeviceProperties* p = &p2.properties;
	out->api_version = p->apiVersion;
	out->driver_version = p->driverVersion;
	out->vendor_id = p->vendorID;
	out->device_id = p->deviceID;
	out->device_type = p->deviceType;
	memcpy(out->pipeline_cache_uuid, p->pipelineCacheUUID, VK_UUID_SIZE);
	memcpy(out->name, p->deviceName, sizeof(out->name) - 1);
	memcpy(out->driver_name, drv.driverName, sizeof(out->driver_name) - 1);
	memcpy(out->driver_info, drv.driverInfo, sizeof(out->driver_info) - 1);
	out->subgroup_size = sg.subgroupSize;
	out->subgroup_ops = sg.supportedOperations;
	out->subgroup_stages = sg.supportedStages;
	out->max_storage_buffer_range = p->limits.maxStorageBufferRange;
	out->max_memory_allocation_size = m3.maxMemoryAllocationSize;
	out->max_buffer_size = m3.maxMemoryAllocationSize; // maxBufferSize needs 1.3 maintenance4; allocation size bounds a buffer here
	out->min_storage_offset_align = p->limits.minStorageBufferOffsetAlignment;
	out->max_uniform_buffer_range = p->limits.maxUniformBufferRange;
	out->min_uniform_offset_align = p->limits.minUniformBufferOffsetAlignment;
	out->max_texel_elements = p->limits.maxTexelBufferElements;
	out->min_texel_offset_align = p->limits.minTexelBufferOffsetAlignment;
	for (int i = 0; i < 3; i++) {
		out->max_wg_size[i] = p->limits.maxComputeWorkGroupSize[i];
		out->max_wg_count[i] = p->limits.maxComputeWorkGroupCount[i];
	}
	out->max_wg_invocations = p->limits.maxComputeWorkGroupInvocations;
	out->max_shared_memory = p->limits.maxComputeSharedMemorySize;
	out->max_push_constants = p->limits.maxPushConstantsSize;

	VkPhysicalDeviceShaderIntegerDotProductFeatures dot = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_FEATURES};
	VkPhysicalDeviceVulkan12Features f12 = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
	VkPhysicalDeviceVulkan11Features f11 = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES};
	f11.pNext = &f12;
	int api13 = VK_API_VERSION_MINOR(p->apiVersion) >= 3 || VK_API_VERSION_MAJOR(p->apiVersion) > 1;
	if (api13 || has_int_dot) f12.pNext = &dot;
	if (out->coop_matrix_khr) {
		coop_khr_feat.pNext = f11.pNext;
		f11.pNext = &coop_khr_feat;
	} else if (out->coop_matrix_nv) {
		coop_nv_feat.pNext = f11.pNext;
		f11.pNext = &coop_nv_feat;
	}
	VkPhysicalDeviceFeatures2 f2 = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
	f2.pNext = &f11;
	int api12 = VK_API_VERSION_MINOR(p->apiVersion) >= 2 || VK_API_VERSION_MAJOR(p->apiVersion) > 1;
	if (feats2 && api12) {
		feats2(pd, &f2);
		out->storage16 = f11.storageBuffer16BitAccess;
		out->float16 = f12.shaderFloat16;
		out->storage8 = f12.storageBuffer8BitAccess;
		out->int8 = f12.shaderInt8;
		out->bda = f12.bufferDeviceAddress;
		// The instance asks for Vulkan 1.2, so a 1.3 device's
		// shaderIntegerDotProduct is reachable only through the extension
		// (enabled with the feature at device creation).
		out->int_dot = has_int_dot && dot.shaderIntegerDotProduct;
		out->vulkan_memory_model = f12.vulkanMemoryModel;
		// glslang writes cooperative-matrix modules against the Vulkan
		// memory model, so it is a condition of their use.
		int vmm = f12.vulkanMemoryModel;
		if (vmm && out->coop_matrix_khr && coop_khr_feat.cooperativeMatrix && (coop_khr_props.cooperativeMatrixSupportedStages & VK_SHADER_STAGE_COMPUTE_BIT)) {
			out->coop_api = 1;
		} else if (vmm && !out->coop_matrix_khr && out->coop_matrix_nv && coop_nv_feat.cooperativeMatrix && (coop_nv_props.cooperativeMatrixSupportedStages & VK_SHADER_STAGE_COMPUTE_BIT)) {
			out->coop_api = 2;
		}
	}
	if (out->coop_api) query_coop_shapes(c, pd, out);

	if (has_sg_size) query_subgroup_size(props2, feats2, pd, out);

	VkPhysicalDeviceMemoryBudgetPropertiesEXT budget = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_BUDGET_PROPERTIES_EXT};
	VkPhysicalDeviceMemoryProperties2 mp = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_PROPERTIES_2};
	if (out->memory_budget) mp.pNext = &budget;
	if (mem2) mem2(pd, &mp);
	out->heap_count = mp.memoryProperties.memoryHeapCount;
	for (uint32_t i = 0; i < out->heap_count && i < 16; i++) {
		out->heap_size[i] = mp.memoryProperties.memoryHeaps[i].size;
		out->heap_flags[i] = mp.memoryProperties.memoryHeaps[i].flags;
		out->heap_budget[i] = out->memory_budget ? budget.heapBudget[i] : mp.memoryProperties.memoryHeaps[i].size;
		out->heap_usage[i] = out->memory_budget ? budget.heapUsage[i] : 0;
	}
}

typedef struct {
	VkPhysicalDeviceFeatures2 f2;
	VkPhysicalDeviceVulkan11Features f11;
	VkPhysicalDeviceVulkan12Features f12;
	VkPhysicalDeviceShaderIntegerDotProductFeatures dot;
	VkPhysicalDeviceCooperativeMatrixFeaturesKHR coop_khr;
	VkPhysicalDeviceCooperativeMatrixFeaturesNV coop_nv;
} chain;

void* vkllm_feature_chain(const vkllm_info* info) {
	chain* ch = calloc(1, sizeof(chain));
	if (!ch) return NULL;
	ch->f2.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2;
	ch->f11.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES;
	ch->f12.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES;
	ch->f2.pNext = &ch->f11;
	ch->f11.pNext = &ch->f12;
	ch->f11.storageBuffer16BitAccess = info->storage16 ? VK_TRUE : VK_FALSE;
	ch->f12.shaderFloat16 = info->float16 ? VK_TRUE : VK_FALSE;
	ch->f12.storageBuffer8BitAccess = info->storage8 ? VK_TRUE : VK_FALSE;
	ch->f12.shaderInt8 = info->int8 ? VK_TRUE : VK_FALSE;
	if (info->int_dot) {
		// int_dot implies VK_KHR_shader_integer_dot_product, which the
		// device is created with (see Device.create).
		ch->dot.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_FEATURES;
		ch->dot.shaderIntegerDotProduct = VK_TRUE;
		ch->f12.pNext = &ch->dot;
	}
	// The cooperative-matrix feature goes with its extension (see
	// Device.create); glslang writes cooperative-matrix modules against
	// the Vulkan memory model, which vkllm_query made a condition of
	// coop_api.
	if (info->coop_api == 1) {
		ch->coop_khr.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_KHR;
		ch->coop_khr.cooperativeMatrix = VK_TRUE;
		ch->coop_khr.pNext = ch->f11.pNext;
		ch->f11.pNext = &ch->coop_khr;
	} else if (info->coop_api == 2) {
		ch->coop_nv.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_NV;
		ch->coop_nv.cooperativeMatrix = VK_TRUE;
		ch->coop_nv.pNext = ch->f11.pNext;
		ch->f11.pNext = &ch->coop_nv;
	}
	if (info->coop_api) ch->f12.vulkanMemoryModel = VK_TRUE;
	return &ch->f2;
}

void vkllm_free_chain(void* c) { free(c); }

void* vkllm_chain_subgroup_size(void* chain, const vkllm_info* info) {
	VkPhysicalDeviceSubgroupSizeControlFeaturesEXT* f = calloc(1, sizeof(*f));
	if (!f) return NULL;
	f->sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_FEATURES_EXT;
	f->subgroupSizeControl = info->sg_size_control ? VK_TRUE : VK_FALSE;
	f->computeFullSubgroups = info->sg_full_subgroups ? VK_TRUE : VK_FALSE;
	VkPhysicalDeviceFeatures2* f2 = chain;
	f->pNext = f2->pNext;
	f2->pNext = f;
	return f;
}

void vkllm_barrier(vkllm_ctx* c, VkCommandBuffer cb, VkPipelineStageFlags src_stage, VkPipelineStageFlags dst_stage, VkAccessFlags src_access, VkAccessFlags dst_access) {
	VkMemoryBarrier mb = {VK_STRUCTURE_TYPE_MEMORY_BARRIER};
	mb.srcAccessMask = src_access;
	mb.dstAccessMask = dst_access;
	c->barrier(cb, src_stage, dst_stage, 0, 1, &mb, 0, NULL, 0, NULL);
}

void vkllm_copy(vkllm_ctx* c, VkCommandBuffer cb, VkBuffer src, VkBuffer dst, uint32_t n, const VkBufferCopy* regions) {
	c->copy(cb, src, dst, n, regions);
}

VkResult vkllm_submit(vkllm_ctx* c, VkQueue q, VkCommandBuffer cb, VkFence fence) {
	VkSubmitInfo si = {VK_STRUCTURE_TYPE_SUBMIT_INFO};
	si.commandBufferCount = 1;
	si.pCommandBuffers = &cb;
	return c->submit(q, 1, &si, fence);
}

VkResult vkllm_begin(vkllm_ctx* c, VkCommandBuffer cb) {
	VkCommandBufferBeginInfo bi = {VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
	bi.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
	return c->begin(cb, &bi);
}

// vkllm_begin_reusable begins a command buffer that may be submitted many
// times (Cmd.Keep).
VkResult vkllm_begin_reusable(vkllm_ctx* c, VkCommandBuffer cb) {
	VkCommandBufferBeginInfo bi = {VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
	return c->begin(cb, &bi);
}

VkResult vkllm_wait(vkllm_ctx* c, VkDevice dev, VkFence fence) {
	return c->wait(dev, 1, &fence, VK_TRUE, UINT64_MAX);
}

VkResult vkllm_reset(vkllm_ctx* c, VkDevice dev, VkFence fence) {
	return c->reset(dev, 1, &fence);
}

void* vkllm_validation_features(vkllm_ctx* c) {
	c->vf_enable[0] = VK_VALIDATION_FEATURE_ENABLE_SYNCHRONIZATION_VALIDATION_EXT;
	c->vf.sType = VK_STRUCTURE_TYPE_VALIDATION_FEATURES_EXT;
	c->vf.enabledValidationFeatureCount = 1;
	c->vf.pEnabledValidationFeatures = c->vf_enable;
	return &c->vf;
}

void* vkllm_loader_gipa(void) {
	void* lib = dlopen("libvulkan.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!lib) lib = dlopen("libvulkan.so", RTLD_NOW | RTLD_LOCAL);
	if (!lib) return NULL;
	return dlsym(lib, "vkGetInstanceProcAddr");
}

VkResult vkllm_create_pipeline(vkllm_ctx* c, VkDevice dev, const uint32_t* code, size_t code_size,
		uint32_t bindings, uint32_t uniform_mask, uint32_t texel_mask, uint32_t push_size, const uint32_t* spec, uint32_t n_spec,
		uint32_t subgroup_size, uint32_t full_subgroups, VkPipelineCache cache, vkllm_pipeline* out) {
	PFN_vkCreateShaderModule create_module = (PFN_vkCreateShaderModule)c->gipa(c->inst, "vkCreateShaderModule");
	PFN_vkCreateDescriptorSetLayout create_set_layout = (PFN_vkCreateDescriptorSetLayout)c->gipa(c->inst, "vkCreateDescriptorSetLayout");
	PFN_vkCreatePipelineLayout create_layout = (PFN_vkCreatePipelineLayout)c->gipa(c->inst, "vkCreatePipelineLayout");
	PFN_vkCreateComputePipelines create_pipelines = (PFN_vkCreateComputePipelines)c->gipa(c->inst, "vkCreateComputePipelines");
	if (!create_module || !create_set_layout || !create_layout || !create_pipelines) return VK_ERROR_INITIALIZATION_FAILED;
	if (bindings > VKLLM_MAX_BINDINGS || n_spec > VKLLM_MAX_SPEC) return VK_ERROR_INITIALIZATION_FAILED;
	out->step = 0;
	VkShaderModuleCreateInfo smci = {VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO};
	smci.codeSize = code_size;
	smci.pCode = code;
	VkResult r = create_module(dev, &smci, NULL, &out->module);
	if (r != VK_SUCCESS) return r;
	out->step = 1;
	VkDescriptorSetLayoutBinding binds[VKLLM_MAX_BINDINGS];
	for (uint32_t i = 0; i < bindings; i++) {
		VkDescriptorSetLayoutBinding b = {0};
		b.binding = i;
		b.descriptorType = (uniform_mask >> i & 1u) ? VK_DESCRIPTOR_TYPE_UNIFORM_BUFFER : VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
		if (texel_mask >> i & 1u) b.descriptorType = VK_DESCRIPTOR_TYPE_UNIFORM_TEXEL_BUFFER;
		b.descriptorCount = 1;
		b.stageFlags = VK_SHADER_STAGE_COMPUTE_BIT;
		binds[i] = b;
	}
	VkDescriptorSetLayoutCreateInfo dslci = {VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO};
	dslci.bindingCount = bindings;
	dslci.pBindings = binds;
	r = create_set_layout(dev, &dslci, NULL, &out->set_layout);
	if (r != VK_SUCCESS) return r;
	out->step = 2;
	VkPushConstantRange pcr = {VK_SHADER_STAGE_COMPUTE_BIT, 0, push_size};
	VkPipelineLayoutCreateInfo plci = {VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO};
	plci.setLayoutCount = 1;
	plci.pSetLayouts = &out->set_layout;
	if (push_size > 0) {
		plci.pushConstantRangeCount = 1;
		plci.pPushConstantRanges = &pcr;
	}
	r = create_layout(dev, &plci, NULL, &out->layout);
	if (r != VK_SUCCESS) return r;
	out->step = 3;
	VkSpecializationMapEntry entries[VKLLM_MAX_SPEC];
	for (uint32_t i = 0; i < n_spec; i++) {
		entries[i].constantID = i;
		entries[i].offset = 4 * i;
		entries[i].size = 4;
	}
	VkSpecializationInfo si = {n_spec, entries, 4 * (size_t)n_spec, spec};
	VkComputePipelineCreateInfo cpci = {VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO};
	cpci.stage.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO;
	cpci.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
	cpci.stage.module = out->module;
	cpci.stage.pName = "main";
	if (n_spec > 0) cpci.stage.pSpecializationInfo = &si;
	VkPipelineShaderStageRequiredSubgroupSizeCreateInfoEXT rss = {VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_REQUIRED_SUBGROUP_SIZE_CREATE_INFO_EXT};
	if (subgroup_size > 0) {
		rss.requiredSubgroupSize = subgroup_size;
		cpci.stage.pNext = &rss;
	}
	if (full_subgroups) cpci.stage.flags |= VK_PIPELINE_SHADER_STAGE_CREATE_REQUIRE_FULL_SUBGROUPS_BIT_EXT;
	cpci.layout = out->layout;
	r = create_pipelines(dev, cache, 1, &cpci, NULL, &out->pipeline);
	if (r != VK_SUCCESS) return r;
	out->step = 4;
	return VK_SUCCESS;
}

// names fills out with pointers to the n NUL-terminated strings laid end
// to end in list (at most max); it returns how many it filled.
static uint32_t names(const char* list, uint32_t n, const char** out, uint32_t max) {
	uint32_t i = 0;
	for (; i < n && i < max; i++) {
		out[i] = list;
		list += strlen(list) + 1;
	}
	return i;
}

#define VKLLM_MAX_NAMES 16

int vkllm_has_layer(vkllm_ctx* c, const char* name) {
	PFN_vkEnumerateInstanceLayerProperties enum_layers = (PFN_vkEnumerateInstanceLayerProperties)c->gipa(NULL, "vkEnumerateInstanceLayerProperties");
	uint32_t n = 0;
	if (!enum_layers || enum_layers(&n, NULL) != VK_SUCCESS || n == 0) return 0;
	VkLayerProperties* p = calloc(n, sizeof(*p));
	if (!p) return 0;
	int found = 0;
	VkResult r = enum_layers(&n, p);
	if (r == VK_SUCCESS || r == VK_INCOMPLETE) {
		for (uint32_t i = 0; i < n && !found; i++) found = strcmp(p[i].layerName, name) == 0;
	}
	free(p);
	return found;
}

static int has_instance_ext_in(PFN_vkEnumerateInstanceExtensionProperties enum_ext, const char* name, const char* layer) {
	uint32_t n = 0;
	if (enum_ext(layer, &n, NULL) != VK_SUCCESS || n == 0) return 0;
	VkExtensionProperties* p = calloc(n, sizeof(*p));
	if (!p) return 0;
	int found = 0;
	VkResult r = enum_ext(layer, &n, p);
	if (r == VK_SUCCESS || r == VK_INCOMPLETE) found = has_ext(p, n, name);
	free(p);
	return found;
}

int vkllm_has_instance_ext(vkllm_ctx* c, const char* name, const char* layer) {
	PFN_vkEnumerateInstanceExtensionProperties enum_ext = (PFN_vkEnumerateInstanceExtensionProperties)c->gipa(NULL, "vkEnumerateInstanceExtensionProperties");
	if (!enum_ext) return 0;
	if (has_instance_ext_in(enum_ext, name, NULL)) return 1;
	return layer && has_instance_ext_in(enum_ext, name, layer);
}

VkResult vkllm_create_instance(vkllm_ctx* c, uint32_t api_version, const char* layers, uint32_t n_layers,
		const char* exts, uint32_t n_exts, const void* next, VkInstance* out) {
	PFN_vkCreateInstance create = (PFN_vkCreateInstance)c->gipa(NULL, "vkCreateInstance");
	if (!create) return VK_ERROR_INITIALIZATION_FAILED;
	if (n_layers > VKLLM_MAX_NAMES || n_exts > VKLLM_MAX_NAMES) return VK_ERROR_INITIALIZATION_FAILED;
	const char* layer_names[VKLLM_MAX_NAMES];
	const char* ext_names[VKLLM_MAX_NAMES];
	VkApplicationInfo app = {VK_STRUCTURE_TYPE_APPLICATION_INFO};
	app.pApplicationName = "vkllm";
	app.pEngineName = "vkllm";
	app.apiVersion = api_version;
	VkInstanceCreateInfo ci = {VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
	ci.pNext = next;
	ci.pApplicationInfo = &app;
	ci.enabledLayerCount = names(layers, n_layers, layer_names, VKLLM_MAX_NAMES);
	ci.ppEnabledLayerNames = layer_names;
	ci.enabledExtensionCount = names(exts, n_exts, ext_names, VKLLM_MAX_NAMES);
	ci.ppEnabledExtensionNames = ext_names;
	return create(&ci, NULL, out);
}

uint32_t vkllm_queue_families(vkllm_ctx* c, VkPhysicalDevice pd, uint32_t cap, uint32_t* flags, uint32_t* counts, uint32_t* ts_bits) {
	PFN_vkGetPhysicalDeviceQueueFamilyProperties get = (PFN_vkGetPhysicalDeviceQueueFamilyProperties)c->gipa(c->inst, "vkGetPhysicalDeviceQueueFamilyProperties");
	uint32_t n = 0;
	if (!get) return 0;
	get(pd, &n, NULL);
	if (n == 0) return 0;
	VkQueueFamilyProperties* p = calloc(n, sizeof(*p));
	if (!p) return 0;
	get(pd, &n, p);
	for (uint32_t i = 0; i < n && i < cap; i++) {
		flags[i] = p[i].queueFlags;
		counts[i] = p[i].queueCount;
		ts_bits[i] = p[i].timestampValidBits;
	}
	free(p);
	return n;
}

VkResult vkllm_create_device(vkllm_ctx* c, VkPhysicalDevice pd, uint32_t family, const void* chain,
		const char* layers, uint32_t n_layers, const char* exts, uint32_t n_exts, VkDevice* out) {
	PFN_vkCreateDevice create = (PFN_vkCreateDevice)c->gipa(c->inst, "vkCreateDevice");
	if (!create) return VK_ERROR_INITIALIZATION_FAILED;
	if (n_layers > VKLLM_MAX_NAMES || n_exts > VKLLM_MAX_NAMES) return VK_ERROR_INITIALIZATION_FAILED;
	const char* layer_names[VKLLM_MAX_NAMES];
	const char* ext_names[VKLLM_MAX_NAMES];
	float priority = 1.0f;
	VkDeviceQueueCreateInfo qci = {VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO};
	qci.queueFamilyIndex = family;
	qci.queueCount = 1;
	qci.pQueuePriorities = &priority;
	VkDeviceCreateInfo dci = {VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO};
	dci.pNext = chain;
	dci.queueCreateInfoCount = 1;
	dci.pQueueCreateInfos = &qci;
	dci.enabledLayerCount = names(layers, n_layers, layer_names, VKLLM_MAX_NAMES);
	dci.ppEnabledLayerNames = layer_names;
	dci.enabledExtensionCount = names(exts, n_exts, ext_names, VKLLM_MAX_NAMES);
	dci.ppEnabledExtensionNames = ext_names;
	return create(pd, &dci, NULL, out);
}

VkResult vkllm_create_descriptor_pool(vkllm_ctx* c, VkDevice dev, uint32_t max_sets, uint32_t n_storage, uint32_t n_uniform, uint32_t n_texel, VkDescriptorPool* out) {
	PFN_vkCreateDescriptorPool create = (PFN_vkCreateDescriptorPool)c->gipa(c->inst, "vkCreateDescriptorPool");
	if (!create) return VK_ERROR_INITIALIZATION_FAILED;
	VkDescriptorPoolSize sizes[3];
	uint32_t n = 0;
	if (n_storage) sizes[n++] = (VkDescriptorPoolSize){VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, n_storage};
	if (n_uniform) sizes[n++] = (VkDescriptorPoolSize){VK_DESCRIPTOR_TYPE_UNIFORM_BUFFER, n_uniform};
	if (n_texel) sizes[n++] = (VkDescriptorPoolSize){VK_DESCRIPTOR_TYPE_UNIFORM_TEXEL_BUFFER, n_texel};
	VkDescriptorPoolCreateInfo ci = {VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO};
	ci.maxSets = max_sets;
	ci.poolSizeCount = n;
	ci.pPoolSizes = sizes;
	return create(dev, &ci, NULL, out);
}

VkResult vkllm_alloc_set(vkllm_ctx* c, VkDevice dev, VkDescriptorPool pool, VkDescriptorSetLayout layout, VkDescriptorSet* out) {
	PFN_vkAllocateDescriptorSets alloc = (PFN_vkAllocateDescriptorSets)c->gipa(c->inst, "vkAllocateDescriptorSets");
	if (!alloc) return VK_ERROR_INITIALIZATION_FAILED;
	VkDescriptorSetAllocateInfo ai = {VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO};
	ai.descriptorPool = pool;
	ai.descriptorSetCount = 1;
	ai.pSetLayouts = &layout;
	return alloc(dev, &ai, out);
}

void vkllm_write_set(vkllm_ctx* c, VkDevice dev, VkDescriptorSet set, uint32_t n, const vkllm_binding* b) {
	if (n > VKLLM_MAX_BINDINGS) n = VKLLM_MAX_BINDINGS;
	VkWriteDescriptorSet w[VKLLM_MAX_BINDINGS];
	VkDescriptorBufferInfo bi[VKLLM_MAX_BINDINGS];
	VkBufferView views[VKLLM_MAX_BINDINGS];
	for (uint32_t i = 0; i < n; i++) {
		VkWriteDescriptorSet x = {VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET};
		x.dstSet = set;
		x.dstBinding = i;
		x.descriptorCount = 1;
		x.descriptorType = (VkDescriptorType)b[i].type;
		if (x.descriptorType == VK_DESCRIPTOR_TYPE_UNIFORM_TEXEL_BUFFER || x.descriptorType == VK_DESCRIPTOR_TYPE_STORAGE_TEXEL_BUFFER) {
			views[i] = b[i].view;
			x.pTexelBufferView = &views[i];
		} else {
			bi[i].buffer = b[i].buffer;
			bi[i].offset = b[i].offset;
			bi[i].range = b[i].range;
			x.pBufferInfo = &bi[i];
		}
		w[i] = x;
	}
	if (n > 0) c->update_sets(dev, n, w, 0, NULL);
}

VkResult vkllm_create_pipeline_cache(vkllm_ctx* c, VkDevice dev, const void* data, size_t size, VkPipelineCache* out) {
	PFN_vkCreatePipelineCache create = (PFN_vkCreatePipelineCache)c->gipa(c->inst, "vkCreatePipelineCache");
	if (!create) return VK_ERROR_INITIALIZATION_FAILED;
	VkPipelineCacheCreateInfo ci = {VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO};
	ci.initialDataSize = size;
	ci.pInitialData = size > 0 ? data : NULL;
	return create(dev, &ci, NULL, out);
}

VkResult vkllm_pipeline_cache_data(vkllm_ctx* c, VkDevice dev, VkPipelineCache cache, size_t* size, void* data) {
	PFN_vkGetPipelineCacheData get = (PFN_vkGetPipelineCacheData)c->gipa(c->inst, "vkGetPipelineCacheData");
	if (!get) return VK_ERROR_INITIALIZATION_FAILED;
	return get(dev, cache, size, data);
}

void vkllm_destroy_pipeline_cache(vkllm_ctx* c, VkDevice dev, VkPipelineCache cache) {
	PFN_vkDestroyPipelineCache destroy = (PFN_vkDestroyPipelineCache)c->gipa(c->inst, "vkDestroyPipelineCache");
	if (destroy && cache) destroy(dev, cache, NULL);
}
