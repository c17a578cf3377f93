// tables.c: the table framing reader (tables.h).
#include "tables.h"

#include <string.h>

int table_read(const uint8_t* data, uint64_t bytes, const char magic[8], uint32_t record_bytes, const char* where,
               table* out, failure* f) {
    if (bytes < 24 || memcmp(data, magic, 8) != 0)
        return fail(f, "%s: table magic is not %.7s (%llu bytes); rebuild it with `snakemake`", where, magic,
                    (unsigned long long)bytes);
    uint32_t version, count;
    uint64_t blob_bytes;
    memcpy(&version, data + 8, 4), memcpy(&count, data + 12, 4), memcpy(&blob_bytes, data + 16, 8);
    if (version != TABLE_VERSION)
        return fail(f, "%s: table version is %u, not %d; rebuild it with `snakemake`", where, version, TABLE_VERSION);
    uint64_t records = (uint64_t)count * record_bytes;
    if (blob_bytes > bytes || records > bytes - 24 || bytes - 24 - records != blob_bytes)
        return fail(f, "%s: %llu bytes for %u records of %u bytes and a %llu-byte blob; the table is truncated or "
                    "corrupt: rebuild it with `snakemake`", where, (unsigned long long)bytes, count, record_bytes,
                    (unsigned long long)blob_bytes);
    out->records = data + 24, out->count = count, out->record_bytes = record_bytes;
    out->blob = data + 24 + records, out->blob_bytes = blob_bytes;
    return 0;
}
