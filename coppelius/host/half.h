// half.h: IEEE binary16 storage, emulated exactly as the numpy reference device does.
//
// Every fp16 value in the arena is loaded to float32 (exactly: every half is a float), the
// kernel computes in float32, and each result is stored rounded to nearest, ties to even, like
// numpy's astype(float16) and CUDA's __float2half_rn. Overflow gives infinity; a NaN stays a
// (quiet) NaN with its sign. Both conversions are branch-light so that loops over them vectorize.
#ifndef COPPELIUS_HALF_H
#define COPPELIUS_HALF_H
#include <stdint.h>
#include <string.h>

typedef uint16_t half;  // the raw bits of a binary16 value

static inline uint32_t float_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static inline float bits_float(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

// binary16 -> binary32: exponent and mantissa moved into place and the exponent rebiased
// (15 -> 127). A half subnormal becomes a float normal 2^-14 (1 + m/1024), from which 2^-14 is
// subtracted exactly. No step computes on a float subnormal: those cost a microcode assist on x86.
static inline float half_to_float_bits(half h) {
    uint32_t shifted = (uint32_t)(h & 0x7fff) << 13;
    uint32_t exponent = shifted & 0x0f800000u;
    uint32_t u = shifted + 0x38000000u;                   // (127 - 15) << 23
    u = exponent == 0x0f800000u ? u + 0x38000000u : u;     // infinity, NaN: exponent all ones
    float subnormal = bits_float(u + 0x00800000u) - 0x1p-14f;
    float magnitude = exponent == 0 ? subnormal : bits_float(u);
    return bits_float(float_bits(magnitude) | (uint32_t)(h & 0x8000) << 16);
}

// binary32 -> binary16, round to nearest even.
static inline half float_to_half_bits(float f) {
    uint32_t x = float_bits(f);
    uint32_t sign = (x >> 16) & 0x8000u;
    x &= 0x7fffffffu;
    uint32_t h;
    if (x >= 0x47800000u) {            // |f| >= 65536 (or inf, NaN): infinity, or a quiet NaN
        h = x > 0x7f800000u ? 0x7e00u | ((x >> 13) & 0x3ffu) : 0x7c00u;
    } else if (x < 0x38800000u) {      // |f| < 2^-14: a half subnormal or zero
        // adding 0.5 puts the half's subnormal bits at the bottom of the float's mantissa,
        // rounded to nearest even by the addition itself
        h = float_bits(bits_float(x) + 0.5f) - 0x3f000000u;
    } else {                           // a half normal: rebias the exponent, round on bit 13
        uint32_t odd = (x >> 13) & 1u;
        h = (x + 0xc8000fffu + odd) >> 13;  // 0xc8000000 = (15 - 127) << 23 modulo 2^32
    }
    return (half)(h | sign);
}

// The conversions the kernels use. Where the compiler has binary16 (clang's _Float16: F16C's vcvtph2ps and
// vcvtps2ph on x86-64-v3, fcvt on AArch64) they are the processor's own, which vectorize: the same values (both
// conversions are exact, or rounded to nearest even), a NaN a NaN of its sign (its payload may differ: a signaling
// one comes back quiet). Else the bit moves above. Tests: test_host_kernels.py's every-half and rounding cases.
#if defined(__FLT16_MAX__)
static inline float half_to_float(half h) { _Float16 x; memcpy(&x, &h, 2); return (float)x; }
static inline half float_to_half(float f) { _Float16 x = (_Float16)f; half h; memcpy(&h, &x, 2); return h; }
#else
static inline float half_to_float(half h) { return half_to_float_bits(h); }
static inline half float_to_half(float f) { return float_to_half_bits(f); }
#endif

// Conversions of whole arrays (the loops the kernels use to stage fp16 data in float32).
static inline void halves_to_floats(float* out, const half* in, long n) {
    for (long i = 0; i < n; i++) out[i] = half_to_float(in[i]);
}
static inline void floats_to_halves(half* out, const float* in, long n) {
    for (long i = 0; i < n; i++) out[i] = float_to_half(in[i]);
}

#endif
