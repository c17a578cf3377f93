// device_cuda.c: the cuda device (device_cuda.h).
#include "device_cuda.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "waits.h"

#define STATIC_SHARED_LIMIT (48 * 1024)  // dynamic shared memory above this needs the function's opt-in
#define PORTABLE_CLUSTER 8                // clusters of more blocks need the function's opt-in (sm_90: up to 16)
#define SPAN ((uint64_t)1 << 30)         // memset and memcpy nodes move at most this many bytes each
#define REBUILD "rebuild it with `snakemake`"
#define CHECK(call, what) cuda_check(&d->driver, (call), (what), f)

// The card is the one the host ELF was built and admitted for; nothing is allocated before this holds.
static int check_card(cuda_device* d, const cuda_card* wanted, uint64_t arena_bytes, const char* where, failure* f) {
    int version = 0, count = 0, major = 0, minor = 0, unified = 0;
    char name[256] = {0}, arch[32];
    size_t total = 0;
    if (CHECK(d->driver.cuDriverGetVersion(&version), "cuDriverGetVersion") != 0) return -1;
    CUresult init = d->driver.cuInit(0);
    if (init == 100 /* CUDA_ERROR_NO_DEVICE */ || (init == 0 && d->driver.cuDeviceGetCount(&count) == 0 && !count))
        return fail(f, "%s: target is '%s': no %s is present on this machine (the NVIDIA driver sees no CUDA device); "
                    "copy the host ELF, the checkpoint and the token files to a machine with the %s and run it there",
                    where, wanted->target, wanted->card, wanted->card);
    if (CHECK(init, "cuInit") != 0 || CHECK(d->driver.cuDeviceGet(&d->card, 0), "cuDeviceGet(0)") != 0 ||
        CHECK(d->driver.cuDeviceGetName(name, sizeof name - 1, d->card), "cuDeviceGetName") != 0 ||
        CHECK(d->driver.cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, d->card),
              "cuDeviceGetAttribute(COMPUTE_CAPABILITY_MAJOR)") != 0 ||
        CHECK(d->driver.cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, d->card),
              "cuDeviceGetAttribute(COMPUTE_CAPABILITY_MINOR)") != 0 ||
        CHECK(d->driver.cuDeviceGetAttribute(&unified, CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING, d->card),
              "cuDeviceGetAttribute(UNIFIED_ADDRESSING)") != 0 ||
        CHECK(d->driver.cuDeviceTotalMem(&total, d->card), "cuDeviceTotalMem") != 0)
        return -1;
    snprintf(arch, sizeof arch, "sm_%d%d", major, minor);
    if (strcmp(name, wanted->card) != 0 || strcmp(arch, wanted->arch) != 0 || total < arena_bytes)
        return fail(f, "card check: this card is %s (%s, %llu bytes), the host ELF was built and admitted for %s (%s, "
                    "%llu bytes) (target '%s'); run it on that card, or build the target whose "
                    "config/targets/NAME.yaml names this card", name, arch, (unsigned long long)total, wanted->card,
                    wanted->arch, (unsigned long long)arena_bytes, wanted->target);
    if (version < wanted->driver_version)
        return fail(f, "card check: the NVIDIA driver supports CUDA %d.%d (cuDriverGetVersion %d); "
                    "the host ELF's image needs CUDA %d.%d or later; install a newer NVIDIA driver",
                    version / 1000, version % 1000 / 10, version, wanted->driver_version / 1000,
                    wanted->driver_version % 1000 / 10);
    if (!unified)
        return fail(f, "card check: the %s reports no unified addressing, which the host ELF needs; run it on a 64-bit "
                    "host with the %s's driver", name, wanted->card);
    return 0;
}

// The context, the stream, the arena (after a check of free memory) and the pinned host block.
static int allocate(cuda_device* d, uint64_t arena_bytes, uint64_t host_bytes, failure* f) {
    size_t free_bytes = 0, total = 0;
    char what[96];
    if (CHECK(d->driver.cuDevicePrimaryCtxRetain(&d->context, d->card), "cuDevicePrimaryCtxRetain") != 0) return -1;
    d->context_retained = 1;
    if (CHECK(d->driver.cuCtxSetCurrent(d->context), "cuCtxSetCurrent") != 0 ||
        CHECK(d->driver.cuMemGetInfo(&free_bytes, &total), "cuMemGetInfo") != 0)
        return -1;
    if (free_bytes < arena_bytes)
        return fail(f, "card check: the card has %llu bytes free of %llu, the arena needs %llu; free the card's memory "
                    "(nvidia-smi lists its users) or plan a smaller run", (unsigned long long)free_bytes,
                    (unsigned long long)total, (unsigned long long)arena_bytes);
    if (CHECK(d->driver.cuStreamCreate(&d->stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate") != 0) return -1;
    snprintf(what, sizeof what, "cuMemAlloc(%llu bytes)", (unsigned long long)arena_bytes);
    if (CHECK(d->driver.cuMemAlloc(&d->arena, arena_bytes ? arena_bytes : 1), what) != 0) return -1;
    void* host = NULL;
    snprintf(what, sizeof what, "cuMemHostAlloc(%llu bytes)", (unsigned long long)host_bytes);
    if (CHECK(d->driver.cuMemHostAlloc(&host, host_bytes ? host_bytes : 1, 0), what) != 0) return -1;
    d->host = host;
    memset(d->host, 0, host_bytes);
    d->arena_bytes = arena_bytes, d->host_bytes = host_bytes;
    return 0;
}

// The kernel's function, its parameters held to the catalog's ABI as the cubin lays them out.
static int load_function(cuda_device* d, int kernel, uint32_t launch, failure* f) {
    const kernel_abi* abi = &CATALOG[kernel];
    char what[128];
    snprintf(what, sizeof what, "cuModuleGetFunction(%s) for launch %u", abi->name, launch);
    if (CHECK(d->driver.cuModuleGetFunction(&d->functions[kernel], d->module, abi->name), what) != 0) return -1;
    for (int i = 0;; i++) {
        size_t offset = 0, size = 0;
        int found = d->driver.cuFuncGetParamInfo(d->functions[kernel], (size_t)i, &offset, &size) == 0;
        if (!found && i == abi->count) return 0;
        size_t want_size = i < abi->count && param_is_pointer(abi->params[i].kind) ? 8 : 4;
        if (!found || i >= abi->count || offset != param_offset(kernel, i) || size != want_size)
            return fail(f, "image: kernel %s parameter %d is %s; the ABI (coppelius/formats/kernels.py) has %d "
                        "parameters%s; rebuild the image from the catalog", abi->name, i,
                        found ? "not laid out as the catalog says" : "missing", abi->count,
                        i < abi->count ? "" : ", no more");
    }
}

static int load_image(cuda_device* d, const uint8_t* image, uint64_t image_bytes, failure* f) {
    char what[96];
    snprintf(what, sizeof what, "cuModuleLoadData (%llu-byte image)", (unsigned long long)image_bytes);
    if (CHECK(d->driver.cuModuleLoadData(&d->module, image), what) != 0) return -1;
    if (!(d->arguments = calloc((size_t)d->l.t.launches.count * MAX_PARAMS + 1, sizeof(void*))))
        return fail(f, "cuda device: cannot allocate the launch arguments; free memory");
    for (uint32_t i = 0; i < d->l.t.launches.count; i++) {
        launch_record* l = table_record(&d->l.t.launches, i);
        int kernel = (int)l->kernel;  // checked at load (tables_load decodes every launch)
        if (!d->functions[kernel] && load_function(d, kernel, i, f) != 0) return -1;
        if (l->cluster > PORTABLE_CLUSTER) {
            snprintf(what, sizeof what, "cuFuncSetAttribute(NON_PORTABLE_CLUSTER_SIZE_ALLOWED) for launch %u", i);
            if (CHECK(d->driver.cuFuncSetAttribute(d->functions[kernel],
                                                   CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1), what) != 0)
                return -1;
        }
        if (l->shared > STATIC_SHARED_LIMIT) {
            snprintf(what, sizeof what, "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES, %u) for launch %u",
                     l->shared, i);
            if (CHECK(d->driver.cuFuncSetAttribute(d->functions[kernel],
                                                   CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                                   (int)l->shared), what) != 0)
                return -1;
        }
        for (int p = 0; p < CATALOG[kernel].count; p++)
            d->arguments[(size_t)i * MAX_PARAMS + p] = d->l.parameters + l->param_offset + param_offset(kernel, p);
    }
    return 0;
}

static CUDA_KERNEL_NODE_PARAMS kernel_params(cuda_device* d, uint32_t launch) {
    launch_record* l = table_record(&d->l.t.launches, launch);
    CUDA_KERNEL_NODE_PARAMS p = {d->functions[l->kernel], l->grid[0], l->grid[1], l->grid[2], l->block[0],
                                 l->block[1], l->block[2], l->shared, &d->arguments[(size_t)launch * MAX_PARAMS], NULL};
    return p;
}

// The nodes of one command after the nodes `after` (and after `programmatic`'s programmatic port, for a programmatic
// launch whose predecessor it waits for); *last becomes the last of them (NULL: the command made none).
static int add_command(cuda_device* d, CUgraph graph, const CUgraphNode* after, size_t after_count,
                       CUgraphNode programmatic, const command_record* c, uint8_t* step_launches, CUgraphNode* last,
                       failure* f) {
    char what[96];
    if (c->op == OP_LAUNCH) {
        CUDA_KERNEL_NODE_PARAMS p = kernel_params(d, c->a);
        snprintf(what, sizeof what, "cuGraphAddKernelNode for launch %u (%s)", c->a,
                 CATALOG[((launch_record*)table_record(&d->l.t.launches, c->a))->kernel].name);
        CUgraphNode node;
        if (CHECK(d->driver.cuGraphAddKernelNode(&node, graph, after_count ? after : NULL, after_count, &p), what) != 0)
            return -1;
        if (programmatic) {
            CUgraphEdgeData edge = {CU_GRAPH_KERNEL_NODE_PORT_PROGRAMMATIC, 0, CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC,
                                    {0}};
            snprintf(what, sizeof what, "cuGraphAddDependencies (programmatic, launch %u)", c->a);
            if (CHECK(d->driver.cuGraphAddDependencies(graph, &programmatic, &node, &edge, 1), what) != 0) return -1;
        }
        *last = node;
        const launch_record* l = table_record(&d->l.t.launches, c->a);
        if (l->cluster > 1) {  // the kernel reads its split of K from its cluster's size (formats/geometry.py)
            CUlaunchAttributeValue cluster;
            memset(&cluster, 0, sizeof cluster);
            cluster.clusterDim.x = l->cluster, cluster.clusterDim.y = 1, cluster.clusterDim.z = 1;
            snprintf(what, sizeof what, "cuGraphKernelNodeSetAttribute(CLUSTER_DIMENSION %u) for launch %u", l->cluster,
                     c->a);
            if (CHECK(d->driver.cuGraphKernelNodeSetAttribute(node, CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION, &cluster),
                      what) != 0)
                return -1;
        }
        if (step_launches[c->a]) {
            cuda_step_node s = {NULL, node, p};
            d->step_nodes[d->step_node_count++] = s;
        }
        return 0;
    }
    int src_host = 0, dst_host;
    const uint64_t src_at = c->op == OP_MEMSET ? 0 : command_side(&d->l.t, c, 0, &src_host);
    const uint64_t dst_at = command_side(&d->l.t, c, 1, &dst_host);
    *last = NULL;
    for (uint64_t at = 0; at < c->bytes; at += SPAN) {
        const CUgraphNode* before = at ? last : after;  // a command's spans one after another
        size_t before_count = at ? 1 : after_count;
        uint64_t span = c->bytes - at < SPAN ? c->bytes - at : SPAN;
        CUgraphNode node;
        CUresult result;
        if (c->op == OP_MEMSET) {
            CUDA_MEMSET_NODE_PARAMS p = {d->arena + dst_at + at, 0, c->value & 0xFF, 1, span, 1};
            result = d->driver.cuGraphAddMemsetNode(&node, graph, before_count ? before : NULL, before_count, &p,
                                                    d->context);
            snprintf(what, sizeof what, "cuGraphAddMemsetNode (%llu bytes)", (unsigned long long)span);
        } else {
            CUDA_MEMCPY3D p;
            memset(&p, 0, sizeof p);
            if (src_host)
                p.srcMemoryType = CU_MEMORYTYPE_HOST, p.srcHost = d->host + src_at + at;
            else
                p.srcMemoryType = CU_MEMORYTYPE_DEVICE, p.srcDevice = d->arena + src_at + at;
            if (dst_host)
                p.dstMemoryType = CU_MEMORYTYPE_HOST, p.dstHost = d->host + dst_at + at;
            else
                p.dstMemoryType = CU_MEMORYTYPE_DEVICE, p.dstDevice = d->arena + dst_at + at;
            p.WidthInBytes = span, p.Height = 1, p.Depth = 1;
            result = d->driver.cuGraphAddMemcpyNode(&node, graph, before_count ? before : NULL, before_count, &p,
                                                    d->context);
            snprintf(what, sizeof what, "cuGraphAddMemcpyNode (op %u, %llu bytes)", c->op, (unsigned long long)span);
        }
        if (CHECK(result, what) != 0) return -1;
        *last = node;
    }
    return 0;
}

// Ring entry i's graph (left NULL when it has no nodes): each command after the commands it waits for (waits.h), a
// programmatic launch after its predecessor's programmatic port when it waits for it (device_tables.c checked that
// the predecessor is a launch).
static int add_entry(cuda_device* d, uint32_t i, const ring_record* r, uint8_t* step_launches, failure* f) {
    entry_waits w;
    if (entry_waits_find(&d->l, r->offset, r->length, &w, f) != 0) return -1;
    CUgraphNode* last = calloc((size_t)r->length + 1, sizeof(CUgraphNode));
    CUgraphNode* after = calloc((size_t)r->length + 1, sizeof(CUgraphNode));
    CUgraph graph = NULL;
    char what[96];
    snprintf(what, sizeof what, "cuGraphCreate (ring entry %u)", i);
    int status = !last || !after ? fail(f, "cuda device: cannot allocate ring entry %u's nodes; free memory", i)
                                 : CHECK(d->driver.cuGraphCreate(&graph, 0), what);
    int nodes = 0;
    for (uint32_t c = 0; c < r->length && status == 0; c++) {
        const command_record* command = table_record(&d->l.t.commands, r->offset + c);
        int programmatic = (command->flags & COMMAND_PROGRAMMATIC) && c > 0 && last[c - 1] &&
                           entry_waits_for(&w, c, c - 1);
        size_t count = 0;
        for (uint32_t k = w.start[c]; k < w.start[c + 1]; k++)
            if (last[w.list[k]] && !(programmatic && w.list[k] == c - 1)) after[count++] = last[w.list[k]];
        status = add_command(d, graph, after, count, programmatic ? last[c - 1] : NULL, command, step_launches,
                             &last[c], f);
        nodes += last[c] != NULL;
    }
    if (status == 0 && nodes) d->graphs[i] = graph;
    else if (graph) d->driver.cuGraphDestroy(graph);
    free(last), free(after);
    entry_waits_free(&w);
    return status;
}

// One graph per ring entry, instantiated once; the AdamW nodes remembered for the step-size patch.
static int build_graphs(cuda_device* d, failure* f) {
    const device_tables* t = &d->l.t;
    uint8_t* step_launches = calloc(t->launches.count + 1, 1);
    uint64_t nodes = 0;
    d->graphs = calloc(t->ring.count + 1, sizeof(CUgraph));
    d->execs = calloc(t->ring.count + 1, sizeof(CUgraphExec));
    d->patched = calloc(t->ring.count + 1, sizeof(uint64_t));
    if (step_launches)
        for (uint32_t i = 0; i < t->step_words.count; i++) {
            step_word_record* w = table_record(&t->step_words, i);
            if (w->launch >= t->launches.count) {
                free(step_launches);
                return fail(f, "step_words: launch %u is not in the launch table; " REBUILD, w->launch);
            }
            step_launches[w->launch] = 1;
        }
    for (uint32_t i = 0; i < t->ring.count; i++) nodes += ((ring_record*)table_record(&t->ring, i))->length;
    d->step_nodes = calloc(nodes + 1, sizeof(cuda_step_node));
    if (!step_launches || !d->graphs || !d->execs || !d->patched || !d->step_nodes) {
        free(step_launches);
        return fail(f, "cuda device: cannot allocate the graphs' bookkeeping; free memory");
    }
    int status = 0;
    for (uint32_t i = 0; i < t->ring.count && status == 0; i++) {
        ring_record* r = table_record(&t->ring, i);
        uint32_t first_step_node = d->step_node_count;
        status = add_entry(d, i, r, step_launches, f);
        if (status != 0 || !d->graphs[i]) continue;  // an empty submission: issuing it does nothing
        char what[96];
        snprintf(what, sizeof what, "cuGraphInstantiate (ring entry %u)", i);
        status = CHECK(d->driver.cuGraphInstantiate(&d->execs[i], d->graphs[i], 0), what);
        for (uint32_t s = first_step_node; s < d->step_node_count; s++) d->step_nodes[s].exec = d->execs[i];
    }
    for (uint32_t i = 0; i < t->step_words.count && status == 0; i++) {
        uint32_t launch = ((step_word_record*)table_record(&t->step_words, i))->launch, found = 0;
        for (uint32_t s = 0; s < d->step_node_count; s++)
            found += d->step_nodes[s].params.kernelParams == &d->arguments[(size_t)launch * MAX_PARAMS];
        if (!found) status = fail(f, "step_words: launch %u is in no ring entry; " REBUILD, launch);
    }
    free(step_launches);
    return status;
}

// Which host buffers each ring entry's commands copy to or from, and an event for each entry that touches one.
static int find_host_touches(cuda_device* d, failure* f) {
    const device_tables* t = &d->l.t;
    if (t->buffers.count > 64)
        return fail(f, "buffers: %u host buffers, at most 64; " REBUILD, t->buffers.count);
    d->touches = calloc(t->ring.count + 1, sizeof(uint64_t));
    d->done = calloc(t->ring.count + 1, sizeof(CUevent));
    d->toucher = malloc((t->buffers.count + 1) * sizeof(int64_t));
    if (!d->touches || !d->done || !d->toucher)
        return fail(f, "cuda device: cannot allocate the host buffers' bookkeeping; free memory");
    for (uint32_t b = 0; b < t->buffers.count; b++) d->toucher[b] = -1;
    for (uint32_t i = 0; i < t->ring.count; i++) {
        ring_record* r = table_record(&t->ring, i);
        for (uint32_t c = 0; c < r->length; c++) {
            const command_record* command = table_record(&t->commands, r->offset + c);
            if (command->op == OP_H2D) d->touches[i] |= (uint64_t)1 << command->src;  // indices checked at load
            if (command->op == OP_D2H) d->touches[i] |= (uint64_t)1 << command->dst;
        }
        char what[64];
        snprintf(what, sizeof what, "cuEventCreate (ring entry %u)", i);
        if (d->touches[i] && CHECK(d->driver.cuEventCreate(&d->done[i], CU_EVENT_DISABLE_TIMING), what) != 0)
            return -1;
    }
    return 0;
}

int cuda_device_open(cuda_device* d, const device_tables* tables, uint64_t arena_bytes, uint64_t host_bytes,
                     const uint8_t* image, uint64_t image_bytes, const cuda_card* wanted, const char* where,
                     failure* f) {
    memset(d, 0, sizeof *d);
    d->last = -1;
    if (cuda_driver_load(&d->driver, where, wanted->card, f) != 0) return -1;
    d->driver_loaded = 1;
    if (check_card(d, wanted, arena_bytes, where, f) != 0 || allocate(d, arena_bytes, host_bytes, f) != 0 ||
        tables_load(&d->l, tables, d->arena, arena_bytes, host_bytes, where, f) != 0 ||
        load_image(d, image, image_bytes, f) != 0 || build_graphs(d, f) != 0 || find_host_touches(d, f) != 0) {
        cuda_device_close(d);
        return -1;
    }
    return 0;
}

int cuda_device_patch_step_size(cuda_device* d, float word, uint32_t slot, failure* f) {
    (void)f;
    if ((d->worded >> slot & 1) && memcmp(&word, &d->word[slot], 4) == 0) return 0;  // converged: the graphs hold it
    d->word[slot] = word, d->worded |= 1u << slot, d->word_version++;
    for (uint32_t i = 0; i < d->l.t.step_words.count; i++) {
        const step_word_record* w = table_record(&d->l.t.step_words, i);
        if (w->slot == slot) memcpy(d->l.parameters + w->step_size_offset, &word, 4);
    }
    return 0;
}

int cuda_device_issue(cuda_device* d, uint32_t ring, failure* f) {
    d->last = ring;
    if (!d->execs[ring]) return 0;
    for (uint32_t s = 0; s < d->step_node_count && d->patched[ring] != d->word_version; s++) {
        cuda_step_node* n = &d->step_nodes[s];
        if (n->exec == d->execs[ring] &&
            CHECK(d->driver.cuGraphExecKernelNodeSetParams(n->exec, n->node, &n->params),
                  "cuGraphExecKernelNodeSetParams (an AdamW step size)") != 0)
            return -1;
    }
    d->patched[ring] = d->word_version;
    char what[64];
    snprintf(what, sizeof what, "cuGraphLaunch (ring entry %u)", ring);
    if (CHECK(d->driver.cuGraphLaunch(d->execs[ring], d->stream), what) != 0) return -1;
    if (!d->touches[ring]) return 0;
    snprintf(what, sizeof what, "cuEventRecord (after ring entry %u)", ring);
    if (CHECK(d->driver.cuEventRecord(d->done[ring], d->stream), what) != 0) return -1;
    for (uint32_t b = 0; b < d->l.t.buffers.count; b++)
        if (d->touches[ring] >> b & 1) d->toucher[b] = ring;
    return 0;
}

uint8_t* cuda_device_buffer(cuda_device* d, uint32_t index, uint64_t* bytes, failure* f) {
    int64_t entry = d->toucher[index];
    if (entry >= 0) {
        char what[112];
        snprintf(what, sizeof what, "cuEventSynchronize (after ring entry %lld, piece %u; last issued %lld)",
                 (long long)entry, ((ring_record*)table_record(&d->l.t.ring, (uint32_t)entry))->piece,
                 (long long)d->last);
        if (CHECK(d->driver.cuEventSynchronize(d->done[entry]), what) != 0) return NULL;
    }
    buffer_record* b = table_record(&d->l.t.buffers, index);
    *bytes = b->bytes;
    return d->host + b->offset;
}

void cuda_device_close(cuda_device* d) {
    if (!d->driver_loaded) return;
    cuda_driver* api = &d->driver;
    if (d->stream) api->cuStreamSynchronize(d->stream);
    for (uint32_t i = 0; d->done && i < d->l.t.ring.count; i++)
        if (d->done[i]) api->cuEventDestroy(d->done[i]);
    for (uint32_t i = 0; d->execs && i < d->l.t.ring.count; i++)
        if (d->execs[i]) api->cuGraphExecDestroy(d->execs[i]);
    for (uint32_t i = 0; d->graphs && i < d->l.t.ring.count; i++)
        if (d->graphs[i]) api->cuGraphDestroy(d->graphs[i]);
    if (d->module) api->cuModuleUnload(d->module);
    if (d->stream) api->cuStreamDestroy(d->stream);
    if (d->arena) api->cuMemFree(d->arena);
    if (d->host) api->cuMemFreeHost(d->host);
    if (d->context_retained) api->cuDevicePrimaryCtxRelease(d->card);
    free(d->graphs), free(d->execs), free(d->step_nodes), free(d->arguments);
    free(d->touches), free(d->done), free(d->toucher), free(d->patched);
    tables_unload(&d->l);
    cuda_driver_unload(api);
    memset(d, 0, sizeof *d);
}
