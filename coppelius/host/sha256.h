// sha256.h: SHA-256 (FIPS 180-4), for the section digests of the identity note and the
// checkpoint payload digest. Streaming: init, update any number of times, final.
#ifndef COPPELIUS_SHA256_H
#define COPPELIUS_SHA256_H
#include <stddef.h>
#include <stdint.h>

typedef struct {
    uint32_t state[8];
    uint64_t bytes;        // message length so far
    uint8_t block[64];     // the partial block
    size_t filled;         // bytes of it in use
} sha256_context;

void sha256_init(sha256_context* c);
void sha256_update(sha256_context* c, const void* data, size_t n);
void sha256_final(sha256_context* c, uint8_t digest[32]);
void sha256(const void* data, size_t n, uint8_t digest[32]);
// 64 lower-case hex digits and a NUL
void sha256_hex(const uint8_t digest[32], char hex[65]);
#endif
