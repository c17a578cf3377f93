// catalog.h: the kernel ABI of coppelius/formats/kernels.py in C: each kernel's parameters in
// order, their kinds, their offsets in the parameter block (natural alignment: pointers 8
// bytes, scalars 4), and the number of elements each pointer covers. Kernel ids 0-17 are the
// first catalog's names in sorted order, later kernels take the next free ids;
// tests/unit/test_host_kernels.py holds this table equal to the Python catalog.
#ifndef COPPELIUS_CATALOG_H
#define COPPELIUS_CATALOG_H
#include <stdint.h>

enum { KERNEL_COUNT = 26, MAX_PARAMS = 12 };
typedef enum { F16_PTR, F32_PTR, I32_PTR, I32_SCALAR, U32_SCALAR, F32_SCALAR } param_kind;
// how a kernel uses a pointer (the catalog's r, w, rw); a scalar's is ACCESS_NONE
typedef enum { ACCESS_NONE, ACCESS_R, ACCESS_W, ACCESS_RW } param_access;

typedef struct {
    const char* name;
    int count;
    struct { const char* name; param_kind kind; param_access access; } params[MAX_PARAMS];
} kernel_abi;

extern const kernel_abi CATALOG[KERNEL_COUNT];
extern const char* const PARAM_KIND_NAMES[6];  // "f16*", "f32*", "i32*", "i32", "u32", "f32"

int param_is_pointer(param_kind kind);
int param_element_bytes(param_kind kind);
// byte offset of parameter i; the block's size is param_offset(kernel, count) rounded up to 8
uint32_t param_offset(int kernel, int i);
uint32_t param_block_bytes(int kernel);
// the kernel id of a name, or -1
int kernel_id(const char* name);

// One decoded launch: pointers as addresses (0 = null), scalars as 32-bit words.
typedef struct {
    int kernel;
    uint64_t address[MAX_PARAMS];
    uint32_t word[MAX_PARAMS];
} launch_args;

// Decode a parameter block of `bytes` bytes. 0, or -1 with a one-line reason in `error`.
int decode_launch(int kernel, const uint8_t* block, uint32_t bytes, launch_args* out, char* error, int error_bytes);
// How the launch uses pointer i: the catalog's access, and matmul_backward_weight with accumulate reads its dweight.
param_access launch_access(const launch_args* args, int i);
// Elements each pointer parameter covers, from the scalars (plan/kernels.py: extents); 0 for scalars.
// -1 with a reason when a scalar is out of range (negative, or a size that overflows).
int launch_extents(const launch_args* args, int64_t elements[MAX_PARAMS], char* error, int error_bytes);
// Check every pointer's extent lies in [low, high), then run the kernel. 0, or -1 with the reason.
int run_launch(const launch_args* args, uint64_t low, uint64_t high, char* error, int error_bytes);

#endif
