// cuda_driver.c: libcuda.so.1 loaded at run time, and the one check() (cuda_driver.h).
#include "cuda_driver.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

static const struct { const char* name; const char* hint; } HINTS[] = {
    {"CUDA_ERROR_NO_BINARY_FOR_GPU", "the image was built for another card: build the target of this card"},
    {"CUDA_ERROR_OUT_OF_MEMORY", "free the card's memory (nvidia-smi lists its users) or plan a smaller run"},
    {"CUDA_ERROR_NO_DEVICE", "run on a machine with the card the host ELF names"},
};

int cuda_driver_load(cuda_driver* driver, const char* where, const char* card, failure* f) {
    memset(driver, 0, sizeof *driver);
    if (!(driver->library = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL))) {
        const char* why = dlerror();
        return fail(f, "%s: no NVIDIA driver is present on this machine (libcuda.so.1 cannot be loaded: %.200s); "
                    "copy the host ELF, the checkpoint and the token files to a machine with the %s and its driver "
                    "and run it there with the same arguments", where, why ? why : "not found", card);
    }
#define CUDA_RESOLVE(name, symbol, type)                                                                       \
    if (!(*(void**)&driver->name = dlsym(driver->library, symbol))) {                                          \
        cuda_driver_unload(driver);                                                                            \
        return fail(f, "%s: the NVIDIA driver's libcuda.so.1 has no %s (too old a driver); install driver "     \
                    "branch 580 or later", where, symbol);                                                     \
    }
    CUDA_ENTRY_POINTS(CUDA_RESOLVE)
#undef CUDA_RESOLVE
    return 0;
}

void cuda_driver_unload(cuda_driver* driver) {
    if (driver->library) dlclose(driver->library);
    memset(driver, 0, sizeof *driver);
}

int cuda_check(const cuda_driver* driver, CUresult result, const char* call, failure* f) {
    if (result == 0) return 0;
    const char* name = NULL;
    if (driver->cuGetErrorName(result, &name) != 0 || !name) name = "an unknown error";
    const char* hint = "the run stopped there: check the card with nvidia-smi";
    for (size_t i = 0; i < sizeof HINTS / sizeof HINTS[0]; i++)
        if (strcmp(name, HINTS[i].name) == 0) hint = HINTS[i].hint;
    return fail(f, "CUDA driver: %s returned %s (%d); %s", call, name, result, hint);
}
