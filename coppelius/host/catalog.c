// catalog.c: the kernel ABI table, parameter block decoding, extents and dispatch (catalog.h).
#include "catalog.h"

#include <stdio.h>
#include <string.h>

#include "kernels.h"

// The index is the kernel id the launch table carries: the first 18 sorted by name, then in the order added.
enum {
    ADAMW, ARGMAX_FORWARD, ATTENTION_BACKWARD, ATTENTION_FORWARD, CAST_HALF, CROSSENTROPY_BACKWARD,
    CROSSENTROPY_FORWARD, ENCODER_BACKWARD, ENCODER_FORWARD, GELU_BACKWARD, GELU_FORWARD, LAYERNORM_BACKWARD,
    LAYERNORM_FORWARD, MATMUL_BACKWARD_INPUT, MATMUL_BACKWARD_WEIGHT, MATMUL_FORWARD, NONFINITE_CHECK,
    RESIDUAL_FORWARD, CROSSENTROPY_FORWARD_BACKWARD, MATMUL_FORWARD_GELU, ENCODER_SORT,
    LAYERNORM_BACKWARD_WEIGHT, RESIDUAL_LAYERNORM_FORWARD, MATMUL_BACKWARD_INPUT_GELU, MATMUL_FORWARD_STATS,
    CROSSENTROPY_FORWARD_BACKWARD_STATS,
};

const kernel_abi CATALOG[KERNEL_COUNT] = {
    {"adamw", 12, {{"params", F32_PTR, ACCESS_RW}, {"m", F32_PTR, ACCESS_RW}, {"v", F32_PTR, ACCESS_RW},
                   {"grads", F16_PTR, ACCESS_R}, {"half", F16_PTR, ACCESS_W}, {"flag", I32_PTR, ACCESS_R},
                   {"N", I32_SCALAR, ACCESS_NONE}, {"beta1", F32_SCALAR, ACCESS_NONE},
                   {"beta2", F32_SCALAR, ACCESS_NONE}, {"decay", F32_SCALAR, ACCESS_NONE},
                   {"step_size", F32_SCALAR, ACCESS_NONE}, {"eps", F32_SCALAR, ACCESS_NONE}}},
    {"argmax_forward", 5, {{"predictions", I32_PTR, ACCESS_W}, {"logits", F16_PTR, ACCESS_R},
                           {"N", I32_SCALAR, ACCESS_NONE}, {"V", I32_SCALAR, ACCESS_NONE},
                           {"Vp", I32_SCALAR, ACCESS_NONE}}},
    {"attention_backward", 9, {{"dqkv", F16_PTR, ACCESS_W}, {"dout", F16_PTR, ACCESS_R}, {"qkv", F16_PTR, ACCESS_R},
                               {"out", F16_PTR, ACCESS_R}, {"lse", F32_PTR, ACCESS_R}, {"B", I32_SCALAR, ACCESS_NONE},
                               {"T", I32_SCALAR, ACCESS_NONE}, {"C", I32_SCALAR, ACCESS_NONE},
                               {"NH", I32_SCALAR, ACCESS_NONE}}},
    {"attention_forward", 7, {{"out", F16_PTR, ACCESS_W}, {"lse", F32_PTR, ACCESS_W}, {"qkv", F16_PTR, ACCESS_R},
                              {"B", I32_SCALAR, ACCESS_NONE}, {"T", I32_SCALAR, ACCESS_NONE},
                              {"C", I32_SCALAR, ACCESS_NONE}, {"NH", I32_SCALAR, ACCESS_NONE}}},
    {"cast_half", 3, {{"out", F16_PTR, ACCESS_W}, {"inp", F32_PTR, ACCESS_R}, {"N", I32_SCALAR, ACCESS_NONE}}},
    {"crossentropy_backward", 7, {{"dlogits", F16_PTR, ACCESS_W}, {"logits", F16_PTR, ACCESS_R},
                                  {"targets", I32_PTR, ACCESS_R}, {"N", I32_SCALAR, ACCESS_NONE},
                                  {"V", I32_SCALAR, ACCESS_NONE}, {"Vp", I32_SCALAR, ACCESS_NONE},
                                  {"scale", F32_SCALAR, ACCESS_NONE}}},
    {"crossentropy_forward", 6, {{"losses", F32_PTR, ACCESS_W}, {"logits", F16_PTR, ACCESS_R},
                                 {"targets", I32_PTR, ACCESS_R}, {"N", I32_SCALAR, ACCESS_NONE},
                                 {"V", I32_SCALAR, ACCESS_NONE}, {"Vp", I32_SCALAR, ACCESS_NONE}}},
    {"encoder_backward", 9, {{"dwte", F16_PTR, ACCESS_RW}, {"dwpe", F16_PTR, ACCESS_W}, {"dout", F16_PTR, ACCESS_R},
                             {"order", I32_PTR, ACCESS_R}, {"first", I32_PTR, ACCESS_R}, {"B", I32_SCALAR, ACCESS_NONE},
                             {"T", I32_SCALAR, ACCESS_NONE}, {"C", I32_SCALAR, ACCESS_NONE},
                             {"Vp", I32_SCALAR, ACCESS_NONE}}},
    {"encoder_forward", 8, {{"out", F16_PTR, ACCESS_W}, {"tokens", I32_PTR, ACCESS_R}, {"wte", F16_PTR, ACCESS_R},
                            {"wpe", F16_PTR, ACCESS_R}, {"B", I32_SCALAR, ACCESS_NONE}, {"T", I32_SCALAR, ACCESS_NONE},
                            {"C", I32_SCALAR, ACCESS_NONE}, {"Vp", I32_SCALAR, ACCESS_NONE}}},
    {"gelu_backward", 4, {{"dinp", F16_PTR, ACCESS_W}, {"slope", F16_PTR, ACCESS_R}, {"dout", F16_PTR, ACCESS_R},
                          {"N", I32_SCALAR, ACCESS_NONE}}},
    {"gelu_forward", 3, {{"out", F16_PTR, ACCESS_W}, {"inp", F16_PTR, ACCESS_R}, {"N", I32_SCALAR, ACCESS_NONE}}},
    {"layernorm_backward", 9, {{"dinp", F16_PTR, ACCESS_RW}, {"partials", F32_PTR, ACCESS_W},
                               {"dout", F16_PTR, ACCESS_R}, {"inp", F16_PTR, ACCESS_R}, {"weight", F16_PTR, ACCESS_R},
                               {"mean", F32_PTR, ACCESS_R}, {"rstd", F32_PTR, ACCESS_R}, {"N", I32_SCALAR, ACCESS_NONE},
                               {"C", I32_SCALAR, ACCESS_NONE}}},
    {"layernorm_forward", 8, {{"out", F16_PTR, ACCESS_W}, {"mean", F32_PTR, ACCESS_W}, {"rstd", F32_PTR, ACCESS_W},
                              {"inp", F16_PTR, ACCESS_R}, {"weight", F16_PTR, ACCESS_R}, {"bias", F16_PTR, ACCESS_R},
                              {"N", I32_SCALAR, ACCESS_NONE}, {"C", I32_SCALAR, ACCESS_NONE}}},
    {"matmul_backward_input", 7, {{"dinp", F16_PTR, ACCESS_W}, {"dout", F16_PTR, ACCESS_R},
                                  {"weight", F16_PTR, ACCESS_R}, {"tile_counter", I32_PTR, ACCESS_RW},
                                  {"N", I32_SCALAR, ACCESS_NONE}, {"C", I32_SCALAR, ACCESS_NONE},
                                  {"OC", I32_SCALAR, ACCESS_NONE}}},
    {"matmul_backward_weight", 8, {{"dweight", F16_PTR, ACCESS_W}, {"dbias", F16_PTR, ACCESS_W},
                                   {"dout", F16_PTR, ACCESS_R}, {"inp", F16_PTR, ACCESS_R},
                                   {"N", I32_SCALAR, ACCESS_NONE}, {"C", I32_SCALAR, ACCESS_NONE},
                                   {"OC", I32_SCALAR, ACCESS_NONE}, {"accumulate", U32_SCALAR, ACCESS_NONE}}},
    {"matmul_forward", 7, {{"out", F16_PTR, ACCESS_W}, {"inp", F16_PTR, ACCESS_R}, {"weight", F16_PTR, ACCESS_R},
                           {"bias", F16_PTR, ACCESS_R}, {"N", I32_SCALAR, ACCESS_NONE}, {"C", I32_SCALAR, ACCESS_NONE},
                           {"OC", I32_SCALAR, ACCESS_NONE}}},
    {"nonfinite_check", 3, {{"flag", I32_PTR, ACCESS_RW}, {"grads", F16_PTR, ACCESS_R},
                            {"N", I32_SCALAR, ACCESS_NONE}}},
    {"residual_forward", 4, {{"out", F16_PTR, ACCESS_W}, {"inp1", F16_PTR, ACCESS_R}, {"inp2", F16_PTR, ACCESS_R},
                             {"N", I32_SCALAR, ACCESS_NONE}}},
    {"crossentropy_forward_backward", 8, {{"losses", F32_PTR, ACCESS_W}, {"dlogits", F16_PTR, ACCESS_W},
                                          {"logits", F16_PTR, ACCESS_R}, {"targets", I32_PTR, ACCESS_R},
                                          {"N", I32_SCALAR, ACCESS_NONE}, {"V", I32_SCALAR, ACCESS_NONE},
                                          {"Vp", I32_SCALAR, ACCESS_NONE}, {"scale", F32_SCALAR, ACCESS_NONE}}},
    {"matmul_forward_gelu", 8, {{"slope", F16_PTR, ACCESS_W}, {"out_gelu", F16_PTR, ACCESS_W},
                                {"inp", F16_PTR, ACCESS_R}, {"weight", F16_PTR, ACCESS_R}, {"bias", F16_PTR, ACCESS_R},
                                {"N", I32_SCALAR, ACCESS_NONE}, {"C", I32_SCALAR, ACCESS_NONE},
                                {"OC", I32_SCALAR, ACCESS_NONE}}},
    {"encoder_sort", 5, {{"order", I32_PTR, ACCESS_W}, {"first", I32_PTR, ACCESS_W}, {"tokens", I32_PTR, ACCESS_R},
                         {"N", I32_SCALAR, ACCESS_NONE}, {"Vp", I32_SCALAR, ACCESS_NONE}}},
    {"layernorm_backward_weight", 5, {{"dweight", F16_PTR, ACCESS_W}, {"dbias", F16_PTR, ACCESS_W},
                                      {"partials", F32_PTR, ACCESS_R}, {"N", I32_SCALAR, ACCESS_NONE},
                                      {"C", I32_SCALAR, ACCESS_NONE}}},
    {"residual_layernorm_forward", 10, {{"residual", F16_PTR, ACCESS_W}, {"out", F16_PTR, ACCESS_W},
                                        {"mean", F32_PTR, ACCESS_W}, {"rstd", F32_PTR, ACCESS_W},
                                        {"inp1", F16_PTR, ACCESS_R}, {"inp2", F16_PTR, ACCESS_R},
                                        {"weight", F16_PTR, ACCESS_R}, {"bias", F16_PTR, ACCESS_R},
                                        {"N", I32_SCALAR, ACCESS_NONE}, {"C", I32_SCALAR, ACCESS_NONE}}},
    {"matmul_backward_input_gelu", 8, {{"dinp", F16_PTR, ACCESS_W}, {"dout", F16_PTR, ACCESS_R},
                                       {"weight", F16_PTR, ACCESS_R}, {"slope", F16_PTR, ACCESS_R},
                                       {"tile_counter", I32_PTR, ACCESS_RW}, {"N", I32_SCALAR, ACCESS_NONE},
                                       {"C", I32_SCALAR, ACCESS_NONE}, {"OC", I32_SCALAR, ACCESS_NONE}}},
    {"matmul_forward_stats", 9, {{"out", F16_PTR, ACCESS_W}, {"stats", F32_PTR, ACCESS_W}, {"inp", F16_PTR, ACCESS_R},
                                 {"weight", F16_PTR, ACCESS_R}, {"N", I32_SCALAR, ACCESS_NONE},
                                 {"C", I32_SCALAR, ACCESS_NONE}, {"OC", I32_SCALAR, ACCESS_NONE},
                                 {"V", I32_SCALAR, ACCESS_NONE}, {"width", I32_SCALAR, ACCESS_NONE}}},
    {"crossentropy_forward_backward_stats", 10, {{"losses", F32_PTR, ACCESS_W}, {"dlogits", F16_PTR, ACCESS_W},
                                                 {"logits", F16_PTR, ACCESS_R}, {"stats", F32_PTR, ACCESS_R},
                                                 {"targets", I32_PTR, ACCESS_R}, {"N", I32_SCALAR, ACCESS_NONE},
                                                 {"V", I32_SCALAR, ACCESS_NONE}, {"Vp", I32_SCALAR, ACCESS_NONE},
                                                 {"width", I32_SCALAR, ACCESS_NONE},
                                                 {"scale", F32_SCALAR, ACCESS_NONE}}},
};

const char* const PARAM_KIND_NAMES[6] = {"f16*", "f32*", "i32*", "i32", "u32", "f32"};

int param_is_pointer(param_kind kind) { return kind <= I32_PTR; }
int param_element_bytes(param_kind kind) { return kind == F16_PTR ? 2 : 4; }

uint32_t param_offset(int kernel, int i) {
    uint32_t offset = 0;
    for (int j = 0; j < CATALOG[kernel].count; j++) {
        uint32_t size = param_is_pointer(CATALOG[kernel].params[j].kind) ? 8 : 4;
        offset = (offset + size - 1) / size * size;
        if (j == i) return offset;
        offset += size;
    }
    return offset;  // i == count: the end of the last parameter
}

uint32_t param_block_bytes(int kernel) { return (param_offset(kernel, CATALOG[kernel].count) + 7) / 8 * 8; }

int kernel_id(const char* name) {
    for (int k = 0; k < KERNEL_COUNT; k++)
        if (strcmp(CATALOG[k].name, name) == 0) return k;
    return -1;
}

int decode_launch(int kernel, const uint8_t* block, uint32_t bytes, launch_args* out, char* error, int error_bytes) {
    if (kernel < 0 || kernel >= KERNEL_COUNT) {
        snprintf(error, error_bytes, "kernel id is %d, not below %d", kernel, KERNEL_COUNT);
        return -1;
    }
    if (bytes != param_block_bytes(kernel)) {
        snprintf(error, error_bytes, "%s: parameter block is %u bytes, not %u", CATALOG[kernel].name, bytes,
                 param_block_bytes(kernel));
        return -1;
    }
    memset(out, 0, sizeof *out);
    out->kernel = kernel;
    for (int i = 0; i < CATALOG[kernel].count; i++) {
        uint32_t at = param_offset(kernel, i);
        if (param_is_pointer(CATALOG[kernel].params[i].kind)) memcpy(&out->address[i], block + at, 8);
        else memcpy(&out->word[i], block + at, 4);  // little-endian hosts only (x86-64, AArch64)
    }
    return 0;
}

// the scalar named `name` of a decoded launch, as a signed 64-bit value
static int64_t scalar(const launch_args* args, const char* name) {
    const kernel_abi* abi = &CATALOG[args->kernel];
    for (int i = 0; i < abi->count; i++)
        if (strcmp(abi->params[i].name, name) == 0)
            return abi->params[i].kind == I32_SCALAR ? (int64_t)(int32_t)args->word[i] : (int64_t)args->word[i];
    return -1;
}

static int set_extent(const launch_args* args, int64_t elements[MAX_PARAMS], const char* name, int64_t count) {
    const kernel_abi* abi = &CATALOG[args->kernel];
    for (int i = 0; i < abi->count; i++)
        if (strcmp(abi->params[i].name, name) == 0) elements[i] = count;
    return 0;
}

param_access launch_access(const launch_args* args, int i) {
    const kernel_abi* abi = &CATALOG[args->kernel];
    if (args->kernel == MATMUL_BACKWARD_WEIGHT && strcmp(abi->params[i].name, "dweight") == 0 &&
        scalar(args, "accumulate") != 0)
        return ACCESS_RW;
    return abi->params[i].access;
}

int launch_extents(const launch_args* args, int64_t elements[MAX_PARAMS], char* error, int error_bytes) {
    const kernel_abi* abi = &CATALOG[args->kernel];
    for (int i = 0; i < abi->count; i++) {
        elements[i] = 0;
        if (abi->params[i].kind == I32_SCALAR && (int32_t)args->word[i] < 0) {
            snprintf(error, error_bytes, "%s: %s is %d, not a size", abi->name, abi->params[i].name,
                     (int32_t)args->word[i]);
            return -1;
        }
    }
    int64_t B = scalar(args, "B"), T = scalar(args, "T"), C = scalar(args, "C"), N = scalar(args, "N");
    int64_t OC = scalar(args, "OC"), Vp = scalar(args, "Vp"), V = scalar(args, "V"), NH = scalar(args, "NH");
    int64_t width = scalar(args, "width");  // the stats' parts: stats (N, P, 2), P = ceil(OC or Vp / width)
    if (width == 0) {
        snprintf(error, error_bytes, "%s: width is 0, not a part's width", abi->name);
        return -1;
    }
    switch (args->kernel) {
    case ENCODER_FORWARD: case ENCODER_BACKWARD:
        set_extent(args, elements, "tokens", B * T);
        set_extent(args, elements, "out", B * T * C), set_extent(args, elements, "dout", B * T * C);
        set_extent(args, elements, "wte", Vp * C), set_extent(args, elements, "dwte", Vp * C);
        set_extent(args, elements, "wpe", T * C), set_extent(args, elements, "dwpe", T * C);
        set_extent(args, elements, "order", B * T), set_extent(args, elements, "first", Vp + 1);
        break;
    case ENCODER_SORT:
        set_extent(args, elements, "order", N), set_extent(args, elements, "tokens", N);
        set_extent(args, elements, "first", Vp + 1);
        break;
    case LAYERNORM_FORWARD: case LAYERNORM_BACKWARD: case LAYERNORM_BACKWARD_WEIGHT: case RESIDUAL_LAYERNORM_FORWARD:
        for (int i = 0; i < abi->count; i++) if (param_is_pointer(abi->params[i].kind)) elements[i] = N * C;
        set_extent(args, elements, "mean", N), set_extent(args, elements, "rstd", N);
        set_extent(args, elements, "weight", C), set_extent(args, elements, "bias", C);
        set_extent(args, elements, "dweight", C), set_extent(args, elements, "dbias", C);
        set_extent(args, elements, "partials", (int64_t)layernorm_backward_blocks(N) * 2 * C);
        break;
    case MATMUL_FORWARD: case MATMUL_BACKWARD_INPUT: case MATMUL_BACKWARD_WEIGHT: case MATMUL_FORWARD_GELU:
    case MATMUL_BACKWARD_INPUT_GELU: case MATMUL_FORWARD_STATS:
        if (args->kernel == MATMUL_FORWARD_STATS && (V <= 0 || V > OC)) {
            snprintf(error, error_bytes, "%s: V is %lld, not in 1..OC (%lld)", abi->name, (long long)V, (long long)OC);
            return -1;
        }
        set_extent(args, elements, "out", N * OC), set_extent(args, elements, "dout", N * OC);
        set_extent(args, elements, "out_gelu", N * OC);
        set_extent(args, elements, "inp", N * C), set_extent(args, elements, "dinp", N * C);
        set_extent(args, elements, "slope", args->kernel == MATMUL_FORWARD_GELU ? N * OC : N * C);  // out's or dinp's
        set_extent(args, elements, "weight", OC * C), set_extent(args, elements, "dweight", OC * C);
        set_extent(args, elements, "bias", OC), set_extent(args, elements, "dbias", OC);
        set_extent(args, elements, "stats", N * ((OC + width - 1) / width) * 2);
        set_extent(args, elements, "tile_counter", 1);
        break;
    case ATTENTION_FORWARD: case ATTENTION_BACKWARD:
        if (NH <= 0 || C % NH != 0) {
            snprintf(error, error_bytes, "%s: C %lld is not a multiple of NH %lld", abi->name, (long long)C,
                     (long long)NH);
            return -1;
        }
        set_extent(args, elements, "out", B * T * C), set_extent(args, elements, "dout", B * T * C);
        set_extent(args, elements, "qkv", B * T * 3 * C), set_extent(args, elements, "dqkv", B * T * 3 * C);
        set_extent(args, elements, "lse", B * NH * T);
        break;
    case CROSSENTROPY_FORWARD: case CROSSENTROPY_BACKWARD: case CROSSENTROPY_FORWARD_BACKWARD: case ARGMAX_FORWARD:
    case CROSSENTROPY_FORWARD_BACKWARD_STATS:
        if (V <= 0 || V > Vp) {
            snprintf(error, error_bytes, "%s: V is %lld, not in 1..Vp (%lld)", abi->name, (long long)V, (long long)Vp);
            return -1;
        }
        set_extent(args, elements, "losses", N), set_extent(args, elements, "predictions", N);
        set_extent(args, elements, "targets", N);
        set_extent(args, elements, "logits", N * Vp), set_extent(args, elements, "dlogits", N * Vp);
        set_extent(args, elements, "stats", N * ((Vp + width - 1) / width) * 2);
        break;
    default:  // element-wise: every pointer covers N elements, the flag one
        for (int i = 0; i < abi->count; i++) if (param_is_pointer(abi->params[i].kind)) elements[i] = N;
        set_extent(args, elements, "flag", 1);
    }
    return 0;
}

static float word_float(uint32_t word) { float f; memcpy(&f, &word, 4); return f; }

int run_launch(const launch_args* args, uint64_t low, uint64_t high, char* error, int error_bytes) {
    const kernel_abi* abi = &CATALOG[args->kernel];
    int64_t elements[MAX_PARAMS];
    if (launch_extents(args, elements, error, error_bytes) != 0) return -1;
    void* p[MAX_PARAMS] = {0};
    for (int i = 0; i < abi->count; i++) {
        if (!param_is_pointer(abi->params[i].kind)) continue;
        uint64_t address = args->address[i];
        int nullable = ((args->kernel == MATMUL_FORWARD || args->kernel == MATMUL_FORWARD_GELU) &&
                        strcmp(abi->params[i].name, "bias") == 0) ||
                       (args->kernel == MATMUL_BACKWARD_WEIGHT && strcmp(abi->params[i].name, "dbias") == 0);
        if (address == 0 && nullable) continue;
        uint64_t bytes = (uint64_t)elements[i] * (uint64_t)param_element_bytes(abi->params[i].kind);
        if (address < low || address > high || bytes > high - address || elements[i] > ((int64_t)1 << 40) ||
            address % (uint64_t)param_element_bytes(abi->params[i].kind) != 0) {
            snprintf(error, error_bytes, "%s: %s covers [%#llx, +%llu bytes), outside the arena [%#llx, %#llx)",
                     abi->name, abi->params[i].name, (unsigned long long)address, (unsigned long long)bytes,
                     (unsigned long long)low, (unsigned long long)high);
            return -1;
        }
        p[i] = (void*)(uintptr_t)address;
    }
    const uint32_t* w = args->word;
#define I(k) ((int)w[k])
#define F(k) word_float(w[k])
    switch (args->kernel) {
    case ADAMW: adamw(p[0], p[1], p[2], p[3], p[4], p[5], I(6), F(7), F(8), F(9), F(10), F(11)); break;
    case ARGMAX_FORWARD: argmax_forward(p[0], p[1], I(2), I(3), I(4)); break;
    case ATTENTION_BACKWARD: attention_backward(p[0], p[1], p[2], p[3], p[4], I(5), I(6), I(7), I(8)); break;
    case ATTENTION_FORWARD: attention_forward(p[0], p[1], p[2], I(3), I(4), I(5), I(6)); break;
    case CAST_HALF: cast_half(p[0], p[1], I(2)); break;
    case CROSSENTROPY_BACKWARD: crossentropy_backward(p[0], p[1], p[2], I(3), I(4), I(5), F(6)); break;
    case CROSSENTROPY_FORWARD: crossentropy_forward(p[0], p[1], p[2], I(3), I(4), I(5)); break;
    case ENCODER_BACKWARD: encoder_backward(p[0], p[1], p[2], p[3], p[4], I(5), I(6), I(7), I(8)); break;
    case ENCODER_FORWARD: encoder_forward(p[0], p[1], p[2], p[3], I(4), I(5), I(6), I(7)); break;
    case GELU_BACKWARD: gelu_backward(p[0], p[1], p[2], I(3)); break;
    case GELU_FORWARD: gelu_forward(p[0], p[1], I(2)); break;
    case LAYERNORM_BACKWARD: layernorm_backward(p[0], p[1], p[2], p[3], p[4], p[5], p[6], I(7), I(8)); break;
    case LAYERNORM_FORWARD: layernorm_forward(p[0], p[1], p[2], p[3], p[4], p[5], I(6), I(7)); break;
    case MATMUL_BACKWARD_INPUT: matmul_backward_input(p[0], p[1], p[2], I(4), I(5), I(6)); break;  // p[3]: GPUs' only
    case MATMUL_BACKWARD_WEIGHT: matmul_backward_weight(p[0], p[1], p[2], p[3], I(4), I(5), I(6), w[7]); break;
    case MATMUL_FORWARD: matmul_forward(p[0], p[1], p[2], p[3], I(4), I(5), I(6)); break;
    case NONFINITE_CHECK: nonfinite_check(p[0], p[1], I(2)); break;
    case RESIDUAL_FORWARD: residual_forward(p[0], p[1], p[2], I(3)); break;
    case CROSSENTROPY_FORWARD_BACKWARD:
        crossentropy_forward_backward(p[0], p[1], p[2], p[3], I(4), I(5), I(6), F(7));
        break;
    case MATMUL_FORWARD_GELU: matmul_forward_gelu(p[0], p[1], p[2], p[3], p[4], I(5), I(6), I(7)); break;
    case ENCODER_SORT: encoder_sort(p[0], p[1], p[2], I(3), I(4)); break;
    case LAYERNORM_BACKWARD_WEIGHT: layernorm_backward_weight(p[0], p[1], p[2], I(3), I(4)); break;
    case RESIDUAL_LAYERNORM_FORWARD:
        residual_forward(p[0], p[4], p[5], I(8) * I(9));
        layernorm_forward(p[1], p[2], p[3], p[0], p[6], p[7], I(8), I(9));
        break;
    case MATMUL_BACKWARD_INPUT_GELU:  // p[4], the tile counter, is the GPUs' schedule
        matmul_backward_input_gelu(p[0], p[1], p[2], p[3], I(5), I(6), I(7));
        break;
    case MATMUL_FORWARD_STATS: matmul_forward_stats(p[0], p[1], p[2], p[3], I(4), I(5), I(6), I(7), I(8)); break;
    case CROSSENTROPY_FORWARD_BACKWARD_STATS:
        crossentropy_forward_backward_stats(p[0], p[1], p[2], p[3], p[4], I(5), I(6), I(7), I(8), F(9));
        break;
    }
#undef I
#undef F
    return 0;
}
