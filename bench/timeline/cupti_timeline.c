// cupti_timeline.c: a CUDA injection library (CUDA_INJECTION64_PATH) that records every kernel the process runs, in
// graphs too, every copy and memset ("copy:HtoD:BYTES", "memset:BYTES": the graph's h2d, d2h and zeroing nodes, so
// that a step boundary's parts show), and every driver API call (named "api:cuGraphLaunch" and so on), with CUPTI's
// activity API, and writes one CSV line each to $COPPELIUS_TIMELINE at exit, on one clock (the fields a row's kind
// lacks empty):
//   name,start_ns,end_ns,grid,block,dynamic_shared,cluster,graph_node,stream
// It lets bench/timeline.py see the native host's own step graph (waits.c runs commands that share no written byte
// side by side), which neither profile_gpu.py (commands one by one, or chained) nor ncu (one kernel at a time)
// shows. Built by bench/timeline/build.sh against CUPTI's headers; a benchmark tool, not part of the product.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cupti.h>

#define BUFFER_BYTES (8u << 20)
#define ALIGN 8

static FILE* out;

static void check(CUptiResult r, const char* what) {
    if (r == CUPTI_SUCCESS) return;
    const char* text = "?";
    cuptiGetResultString(r, &text);
    fprintf(stderr, "cupti_timeline: %s failed: %s; check that libcupti matches the driver\n", what, text);
    exit(1);
}

static void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
    *buffer = aligned_alloc(ALIGN, BUFFER_BYTES);
    if (*buffer == NULL) {
        fprintf(stderr, "cupti_timeline: out of memory for an activity buffer (%u bytes)\n", BUFFER_BYTES);
        exit(1);
    }
    *size = BUFFER_BYTES;
    *max_records = 0;  // as many as fit
}

static void CUPTIAPI buffer_completed(CUcontext context, uint32_t stream, uint8_t* buffer, size_t size,
                                      size_t valid) {
    (void)context, (void)stream, (void)size;
    CUpti_Activity* record = NULL;
    while (cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS) {
        if (record->kind == CUPTI_ACTIVITY_KIND_DRIVER) {
            const CUpti_ActivityAPI* a = (const CUpti_ActivityAPI*)record;
            const char* name = "?";
            cuptiGetCallbackName(CUPTI_CB_DOMAIN_DRIVER_API, a->cbid, &name);
            fprintf(out, "api:%s,%llu,%llu,,,,,,\n", name, (unsigned long long)a->start, (unsigned long long)a->end);
            continue;
        }
        if (record->kind == CUPTI_ACTIVITY_KIND_MEMCPY) {
            const CUpti_ActivityMemcpy6* c = (const CUpti_ActivityMemcpy6*)record;
            const char* kind = c->copyKind == CUPTI_ACTIVITY_MEMCPY_KIND_HTOD   ? "HtoD"
                               : c->copyKind == CUPTI_ACTIVITY_MEMCPY_KIND_DTOH ? "DtoH"
                               : c->copyKind == CUPTI_ACTIVITY_MEMCPY_KIND_DTOD ? "DtoD"
                                                                                : "other";
            fprintf(out, "copy:%s:%llu,%llu,%llu,,,,,%llu,%u\n", kind, (unsigned long long)c->bytes,
                    (unsigned long long)c->start, (unsigned long long)c->end, (unsigned long long)c->graphNodeId,
                    c->streamId);
            continue;
        }
        if (record->kind == CUPTI_ACTIVITY_KIND_MEMSET) {
            const CUpti_ActivityMemset4* m = (const CUpti_ActivityMemset4*)record;
            fprintf(out, "memset:%llu,%llu,%llu,,,,,%llu,%u\n", (unsigned long long)m->bytes,
                    (unsigned long long)m->start, (unsigned long long)m->end, (unsigned long long)m->graphNodeId,
                    m->streamId);
            continue;
        }
        if (record->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL && record->kind != CUPTI_ACTIVITY_KIND_KERNEL)
            continue;
        const CUpti_ActivityKernel9* k = (const CUpti_ActivityKernel9*)record;
        fprintf(out, "%s,%llu,%llu,%dx%dx%d,%d,%d,%u,%llu,%u\n", k->name ? k->name : "?",
                (unsigned long long)k->start, (unsigned long long)k->end, k->gridX, k->gridY, k->gridZ, k->blockX,
                k->dynamicSharedMemory, k->clusterX, (unsigned long long)k->graphNodeId, k->streamId);
    }
    size_t dropped = 0;
    if (cuptiActivityGetNumDroppedRecords(context, stream, &dropped) == CUPTI_SUCCESS && dropped)
        fprintf(stderr, "cupti_timeline: %zu records dropped; raise BUFFER_BYTES\n", dropped);
    free(buffer);
}

static void flush_at_exit(void) {
    cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    fclose(out);
}

// Called by the driver at cuInit when CUDA_INJECTION64_PATH names this library.
int InitializeInjection(void) {
    const char* path = getenv("COPPELIUS_TIMELINE");
    if (path == NULL || *path == '\0') {
        fprintf(stderr, "cupti_timeline: set COPPELIUS_TIMELINE to the CSV file to write\n");
        return 0;
    }
    out = fopen(path, "w");
    if (out == NULL) {
        fprintf(stderr, "cupti_timeline: cannot write %s; name a writable file in COPPELIUS_TIMELINE\n", path);
        return 0;
    }
    fprintf(out, "name,start_ns,end_ns,grid,block,dynamic_shared,cluster,graph_node,stream\n");
    check(cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed), "cuptiActivityRegisterCallbacks");
    check(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL), "cuptiActivityEnable(CONCURRENT_KERNEL)");
    check(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_DRIVER), "cuptiActivityEnable(DRIVER)");
    check(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY), "cuptiActivityEnable(MEMCPY)");
    check(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMSET), "cuptiActivityEnable(MEMSET)");
    atexit(flush_at_exit);
    return 1;
}
