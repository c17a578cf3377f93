// self.c: reading and verifying the host ELF's own sections (self.h). Every offset and size
// read from the file is checked against the file's length before it is used.
#include "self.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sha256.h"

#define REBUILD "rebuild it with `snakemake`"
static const char NOTE_NAME[] = "Coppelius";  // and its NUL: namesz 10

static uint16_t u16(const uint8_t* p) { return (uint16_t)(p[0] | p[1] << 8); }
static uint32_t u32(const uint8_t* p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint64_t u64(const uint8_t* p) { return u32(p) | (uint64_t)u32(p + 4) << 32; }

static int read_whole(const char* path, self_image* image, failure* f) {
    FILE* file = fopen(path, "rb");
    if (!file) return fail(f, "%s: cannot open the host ELF; check that the file exists and is readable", path);
    uint64_t capacity = 1 << 20, used = 0;
    uint8_t* data = malloc(capacity);
    size_t got;
    while (data && (got = fread(data + used, 1, capacity - used, file)) > 0) {
        used += got;
        if (used == capacity) {
            uint8_t* bigger = realloc(data, capacity * 2);
            if (!bigger) free(data);
            data = bigger, capacity *= 2;
        }
    }
    int failed = ferror(file);
    fclose(file);
    if (!data || failed) {
        free(data);
        return fail(f, "%s: cannot read the host ELF (%s); check the file", path,
                    failed ? "read error" : "out of memory");
    }
    image->file = data, image->file_bytes = used;
    return 0;
}

// The extent [offset, offset + size) lies in the file (no overflow).
static int in_file(const self_image* image, uint64_t offset, uint64_t size) {
    return offset <= image->file_bytes && size <= image->file_bytes - offset;
}

// A JSON value starting at text[*at] is skipped (strings with escapes, nesting); -1 if malformed.
static int skip_value(const char* text, size_t n, size_t* at, int depth) {
    if (*at >= n || depth > 32) return -1;
    char c = text[*at];
    if (c == '"') {
        for ((*at)++; *at < n && text[*at] != '"'; (*at)++)
            if (text[*at] == '\\') (*at)++;
        if (*at >= n) return -1;
        (*at)++;
        return 0;
    }
    if (c == '{' || c == '[') {
        char close = c == '{' ? '}' : ']';
        (*at)++;
        while (*at < n && text[*at] != close) {
            if (skip_value(text, n, at, depth + 1) != 0) return -1;
            if (*at < n && (text[*at] == ',' || text[*at] == ':')) (*at)++;
        }
        if (*at >= n) return -1;
        (*at)++;
        return 0;
    }
    while (*at < n && strchr(",:}]", text[*at]) == NULL) (*at)++;  // a number, true, false, null
    return 0;
}

// A plain string (no escapes) at text[*at]: its start and length; -1 otherwise.
static int plain_string(const char* text, size_t n, size_t* at, const char** start, size_t* length) {
    if (*at >= n || text[*at] != '"') return -1;
    size_t begin = ++(*at);
    while (*at < n && text[*at] != '"' && text[*at] != '\\') (*at)++;
    if (*at >= n || text[*at] != '"') return -1;
    *start = text + begin, *length = *at - begin;
    (*at)++;
    return 0;
}

static const uint8_t* find_section(const self_image* image, const char* name, uint64_t* bytes, uint32_t* type);

// The note's type-1 JSON: format, version, identity, and the sections with their digests.
static int read_note_json(self_image* image, const char* text, size_t n, failure* f) {
    size_t at = 0;
    int format_ok = 0, version_ok = 0;
    if (n < 2 || text[0] != '{' || text[n - 1] != '}')
        return fail(f, "%s: .note.coppelius JSON is not an object; " REBUILD, image->path);
    at = 1;
    while (at < n - 1) {
        const char* key;
        size_t key_length;
        if (plain_string(text, n, &at, &key, &key_length) != 0 || at >= n || text[at++] != ':')
            return fail(f, "%s: .note.coppelius JSON is malformed at byte %zu; " REBUILD, image->path, at);
        size_t value = at;
        if (skip_value(text, n, &at, 0) != 0)
            return fail(f, "%s: .note.coppelius JSON is malformed at byte %zu; " REBUILD, image->path, value);
        if (key_length == 6 && memcmp(key, "format", 6) == 0)
            format_ok = at - value == 20 && memcmp(text + value, "\"coppelius-host-elf\"", 20) == 0;
        else if (key_length == 7 && memcmp(key, "version", 7) == 0)
            version_ok = at - value == 1 && text[value] == '1';
        else if (key_length == 8 && memcmp(key, "identity", 8) == 0)
            image->identity = text + value, image->identity_bytes = at - value;
        else if (key_length == 8 && memcmp(key, "sections", 8) == 0) {
            size_t inner = value + 1;
            while (inner < at - 1) {
                const char *name, *hex;
                size_t name_length, hex_length;
                if (plain_string(text, at, &inner, &name, &name_length) != 0 || text[inner++] != ':' ||
                    plain_string(text, at, &inner, &hex, &hex_length) != 0 || hex_length != 64 || name_length > 200)
                    return fail(f, "%s: .note.coppelius sections are malformed at byte %zu; " REBUILD, image->path,
                                inner);
                if (image->count == MAX_SECTIONS)
                    return fail(f, "%s: .note.coppelius lists more than %d sections; " REBUILD, image->path,
                                MAX_SECTIONS);
                char full[256];
                snprintf(full, sizeof full, ".coppelius.%.*s", (int)name_length, name);
                section* s = &image->sections[image->count++];
                uint32_t type;
                s->data = find_section(image, full, &s->bytes, &type);
                if (!s->data || type != 1)
                    return fail(f, "%s: section %s, listed in .note.coppelius, is missing; " REBUILD, image->path,
                                full);
                uint8_t digest[32];
                char got[65];
                sha256(s->data, s->bytes, digest);
                sha256_hex(digest, got);
                if (memcmp(got, hex, 64) != 0)
                    return fail(f, "%s: section %s sha256 is '%.16s'; .note.coppelius records %.16s: the section or "
                                "the note is damaged; " REBUILD, image->path, full, got, hex);
                char* copy = malloc(name_length + 1);
                if (!copy) return fail(f, "%s: out of memory", image->path);
                memcpy(copy, name, name_length), copy[name_length] = 0;
                s->name = copy;
                if (inner < at - 1 && text[inner] == ',') inner++;
            }
        }
        if (at < n - 1 && text[at] == ',') at++;
    }
    if (!format_ok || !version_ok || !image->identity)
        return fail(f, "%s: .note.coppelius is not format coppelius-host-elf version 1 with an identity; this runtime "
                    "reads only that: " REBUILD, image->path);
    return 0;
}

// Section `name`'s bytes (checked to lie in the file), its size and sh_type; NULL when absent.
static const uint8_t* find_section(const self_image* image, const char* name, uint64_t* bytes, uint32_t* type) {
    const uint8_t* h = image->file;
    uint64_t shoff = u64(h + 40);
    uint16_t count = u16(h + 60), strings = u16(h + 62);
    const uint8_t* names = h + shoff + 64 * (uint64_t)strings;
    uint64_t names_offset = u64(names + 24), names_bytes = u64(names + 32);
    for (int i = 1; i < count; i++) {
        const uint8_t* s = h + shoff + 64 * (uint64_t)i;
        uint32_t at = u32(s);
        if (at >= names_bytes) continue;
        const char* section_name = (const char*)image->file + names_offset + at;
        size_t room = names_bytes - at;
        if (strnlen(section_name, room) == room || strcmp(section_name, name) != 0) continue;
        *bytes = u64(s + 32), *type = u32(s + 4);
        return in_file(image, u64(s + 24), *bytes) ? image->file + u64(s + 24) : NULL;
    }
    return NULL;
}

static int check_headers(self_image* image, failure* f) {
    const uint8_t* h = image->file;
    const char* path = image->path;
    if (image->file_bytes < 64 || memcmp(h, "\x7f" "ELF", 4) != 0)
        return fail(f, "%s: ELF magic is missing (the file has %llu bytes): this is not a host ELF; " REBUILD, path,
                    (unsigned long long)image->file_bytes);
    if (h[4] != 2 || h[5] != 1)
        return fail(f, "%s: ELF class and data are %d and %d, not 2 (ELF64) and 1 (little-endian); " REBUILD, path,
                    h[4], h[5]);
    image->type = u16(h + 16), image->machine = u16(h + 18);
    uint64_t shoff = u64(h + 40);
    uint16_t entry = u16(h + 58), count = u16(h + 60), strings = u16(h + 62);
    if (entry != 64 || count < 2 || !in_file(image, shoff, 64 * (uint64_t)count) || strings >= count)
        return fail(f,
                    "%s: section header table (e_shoff %llu, e_shnum %u, e_shentsize %u, e_shstrndx %u) does not fit "
                    "the file's %llu bytes: it is truncated or damaged; " REBUILD, path, (unsigned long long)shoff,
                    count, entry, strings, (unsigned long long)image->file_bytes);
    const uint8_t* names = h + shoff + 64 * (uint64_t)strings;
    if (u32(names + 4) != 3 || !in_file(image, u64(names + 24), u64(names + 32)))
        return fail(f, "%s: section %u (.shstrtab) is not a string table inside the file; " REBUILD, path, strings);
    return 0;
}

// Every .coppelius.NAME section of the file is one the note lists (so none escapes the digests).
static int check_unlisted(const self_image* image, failure* f) {
    const uint8_t* h = image->file;
    uint64_t shoff = u64(h + 40);
    uint16_t count = u16(h + 60), strings = u16(h + 62);
    const uint8_t* names = h + shoff + 64 * (uint64_t)strings;
    uint64_t names_offset = u64(names + 24), names_bytes = u64(names + 32);
    for (int i = 1; i < count; i++) {
        uint32_t at = u32(h + shoff + 64 * (uint64_t)i);
        if (at >= names_bytes) continue;
        const char* name = (const char*)h + names_offset + at;
        size_t room = names_bytes - at;
        if (strnlen(name, room) == room || strncmp(name, ".coppelius.", 11) != 0) continue;
        if (!self_section(image, name + 11))
            return fail(f, "%s: section %s is not listed in .note.coppelius; " REBUILD, image->path, name);
    }
    return 0;
}

static int check_note(self_image* image, failure* f) {
    uint64_t bytes;
    uint32_t type;
    const uint8_t* note = find_section(image, ".note.coppelius", &bytes, &type);
    if (!note || type != 7)
        return fail(f, "%s: section .note.coppelius (SHT_NOTE) is missing; this is not a host ELF: " REBUILD,
                    image->path);
    const uint8_t* desc[2] = {0};
    uint32_t desc_bytes[2] = {0};
    uint64_t at = 0;
    for (int record = 0; record < 2; record++) {
        if (bytes - at < 12)
            return fail(f, "%s: .note.coppelius record %d is truncated; " REBUILD, image->path, record + 1);
        uint32_t namesz = u32(note + at), descsz = u32(note + at + 4), ntype = u32(note + at + 8);
        uint64_t name_end = at + 12 + ((uint64_t)namesz + 3) / 4 * 4;
        uint64_t end = name_end + ((uint64_t)descsz + 3) / 4 * 4;
        if (end > bytes || namesz != sizeof NOTE_NAME || memcmp(note + at + 12, NOTE_NAME, sizeof NOTE_NAME) != 0 ||
            ntype != (uint32_t)record + 1)
            return fail(f, "%s: .note.coppelius record %d (namesz %u, descsz %u, type %u) is not Coppelius's type %d; "
                        REBUILD, image->path, record + 1, namesz, descsz, ntype, record + 1);
        desc[record] = note + name_end, desc_bytes[record] = descsz;
        at = end;
    }
    uint8_t digest[32];
    sha256(desc[0], desc_bytes[0], digest);
    if (desc_bytes[1] != 32 || memcmp(digest, desc[1], 32) != 0)
        return fail(f, "%s: .note.coppelius descriptor sha256 does not match the digest the note records: the note is "
                    "damaged; " REBUILD, image->path);
    if (read_note_json(image, (const char*)desc[0], desc_bytes[0], f) != 0) return -1;
    return check_unlisted(image, f);
}

// A native host ELF (ET_EXEC) records the sha256 of its whole file, those 32 bytes taken as zero, in section
// .coppelius_sha256 (coppelius/formats/elf.py): a changed byte of its code, headers or length is refused here.
static int check_file_digest(self_image* image, failure* f) {
    if (image->type != 2) return 0;  // the ET_REL container: its reader rebuilds it byte for byte
    uint64_t bytes;
    uint32_t type;
    uint8_t* slot = (uint8_t*)find_section(image, ".coppelius_sha256", &bytes, &type);
    if (!slot || bytes != 32)
        return fail(f, "%s: section .coppelius_sha256 (32 bytes, the file's sha256) is missing; " REBUILD,
                    image->path);
    uint8_t recorded[32], digest[32];
    memcpy(recorded, slot, 32);
    memset(slot, 0, 32);
    sha256(image->file, image->file_bytes, digest);
    memcpy(slot, recorded, 32);
    if (memcmp(digest, recorded, 32) != 0) {
        char got[65], want[65];
        sha256_hex(digest, got);
        sha256_hex(recorded, want);
        return fail(f, "%s: whole-file sha256 (.coppelius_sha256 taken as zero) is %.16s; .coppelius_sha256 records "
                    "%.16s: the file is damaged (its code, headers or length changed since the build); copy it again, "
                    "or " REBUILD, image->path, got, want);
    }
    return 0;
}

int self_open(const char* path, self_image* image, failure* f) {
    memset(image, 0, sizeof *image);
    image->path = path;
    if (read_whole(path, image, f) != 0) return -1;
    if (check_headers(image, f) != 0 || check_note(image, f) != 0 || check_file_digest(image, f) != 0) {
        self_close(image);
        image->path = path;
        return -1;
    }
    return 0;
}

const section* self_section(const self_image* image, const char* name) {
    for (int i = 0; i < image->count; i++)
        if (strcmp(image->sections[i].name, name) == 0) return &image->sections[i];
    return NULL;
}

void self_close(self_image* image) {
    for (int i = 0; i < image->count; i++) free((char*)image->sections[i].name);
    free(image->file);
    memset(image, 0, sizeof *image);
}
