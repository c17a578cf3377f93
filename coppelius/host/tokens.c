// tokens.c: reading and checking an llm.c token file (tokens.h); the refusals say what
// coppelius/formats/tokens.py says, in the same words.
#include "tokens.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int tokens_open(const char* path, token_stream* stream, failure* f) {
    memset(stream, 0, sizeof *stream);
    stream->path = path;
    struct stat st;
    FILE* file = fopen(path, "rb");
    if (!file || fstat(fileno(file), &st) != 0 || !S_ISREG(st.st_mode)) {
        int error = errno;
        if (file) fclose(file);
        return fail(f, "%s: cannot read the token file (%s); give an existing llm.c .bin file", path,
                    file ? "not a regular file" : strerror(error));
    }
    int32_t header[256];
    size_t got = fread(header, 1, sizeof header, file);
    if (got < sizeof header) {
        fclose(file);
        return fail(f, "%s: header is %zu bytes, not %d; the file is truncated or not an llm.c .bin file", path, got,
                    TOKENS_HEADER_BYTES);
    }
    int32_t magic = header[0], version = header[1], count = header[2];  // little-endian hosts only
    const char* problem = NULL;
    if (magic == TOKENS_LLAMA3_MAGIC) problem = "llama-3";
    else if (magic != TOKENS_MAGIC) problem = "magic";
    else if (version != TOKENS_VERSION) problem = "version";
    else if (count < 0 || (int64_t)st.st_size != TOKENS_HEADER_BYTES + 2 * (int64_t)count) problem = "size";
    if (problem) {
        fclose(file);
        if (problem[0] == 'l')
            return fail(f, "%s: header magic is %d: llm.c's LLaMA-3 token file (uint32 ids), which Coppelius does not "
                        "read; give a GPT-2 token file (magic %d, uint16 ids), as llm.c's data scripts write it with "
                        "--model_desc gpt-2", path, magic, TOKENS_MAGIC);
        if (problem[0] == 'm')
            return fail(f, "%s: header magic is %d, not %d; give an llm.c .bin token file", path, magic, TOKENS_MAGIC);
        if (problem[0] == 'v')
            return fail(f, "%s: header version is %d, not %d; re-export it with llm.c's uint16 writer", path, version,
                        TOKENS_VERSION);
        return fail(f, "%s: size is %lld bytes but the header's token count %d needs %lld; the file is truncated or "
                    "corrupt: prepare it again", path, (long long)st.st_size, count,
                    TOKENS_HEADER_BYTES + 2 * (long long)count);
    }
    stream->ids = malloc(count > 0 ? 2 * (size_t)count : 1);
    if (!stream->ids || fread(stream->ids, 2, (size_t)count, file) != (size_t)count) {
        fclose(file);
        tokens_close(stream);
        return fail(f, "%s: cannot read its %d tokens (%s); check the file", path, count,
                    stream->ids ? "short read" : "out of memory");
    }
    fclose(file);
    stream->count = count;
    return 0;
}

int tokens_check_vocab(const token_stream* stream, int64_t start, int64_t count, int vocab, failure* f) {
    if (start < 0 || count < 0 || start > stream->count || count > stream->count - start)
        return fail(f, "%s: token count is %lld; tokens %lld..%lld are needed; use a longer stream or fewer steps",
                    stream->path, (long long)stream->count, (long long)start, (long long)(start + count));
    for (int64_t i = start; i < start + count; i++)
        if (stream->ids[i] >= vocab)
            return fail(f, "%s: token %lld is %u, not below the model's vocab %d; use a model with a larger vocab or "
                        "re-tokenize the corpus", stream->path, (long long)i, stream->ids[i], vocab);
    return 0;
}

void tokens_close(token_stream* stream) {
    free(stream->ids);
    stream->ids = NULL, stream->count = 0;
}
