// tokens.h: llm.c's token file: int32[256] header (magic 20240520, version 1, token count), then
// count uint16 token ids (coppelius/formats/tokens.py). Any llm.c .bin file is accepted.
#ifndef COPPELIUS_TOKENS_H
#define COPPELIUS_TOKENS_H
#include <stdint.h>

#include "failure.h"

enum { TOKENS_MAGIC = 20240520, TOKENS_VERSION = 1, TOKENS_HEADER_BYTES = 1024 };
enum { TOKENS_LLAMA3_MAGIC = 20240801 };  // llm.c's LLaMA-3 token file (version 7, uint32 ids): named, never read

typedef struct {
    const char* path;
    uint16_t* ids;     // count ids, read whole
    int64_t count;
} token_stream;

// Check the header against the file's size and read every id. 0, or -1 with the refusal.
int tokens_open(const char* path, token_stream* stream, failure* f);
// Every id in [start, start + count) is below vocab (the file holds them). 0, or -1 naming the first that is not.
int tokens_check_vocab(const token_stream* stream, int64_t start, int64_t count, int vocab, failure* f);
void tokens_close(token_stream* stream);
#endif
