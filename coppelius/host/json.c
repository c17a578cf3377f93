// json.c: the small JSON reader (json.h).
#include "json.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct { json_document* doc; const char* text; size_t at, length; } parser;

static void skip_space(parser* p) {
    while (p->at < p->length && strchr(" \t\r\n", p->text[p->at]) && p->text[p->at]) p->at++;
}

static int new_node(parser* p, int type) {
    json_document* d = p->doc;
    if (d->count == d->capacity) {
        int capacity = d->capacity ? 2 * d->capacity : 64;
        json_node* bigger = realloc(d->nodes, (size_t)capacity * sizeof *bigger);
        if (!bigger) return -1;
        d->nodes = bigger, d->capacity = capacity;
    }
    json_node* n = &d->nodes[d->count];
    memset(n, 0, sizeof *n);
    n->type = type, n->first = n->next = -1;
    return d->count++;
}

// A string at p->at (the opening quote): its raw characters.
static int string_at(parser* p, const char** start, size_t* length) {
    if (p->at >= p->length || p->text[p->at] != '"') return -1;
    size_t begin = ++p->at;
    while (p->at < p->length && p->text[p->at] != '"') {
        if ((unsigned char)p->text[p->at] < 0x20) return -1;
        p->at += p->text[p->at] == '\\' ? 2 : 1;
    }
    if (p->at >= p->length) return -1;
    *start = p->text + begin, *length = p->at - begin;
    p->at++;
    return 0;
}

static int value(parser* p, int depth);

// The members or elements of a container node, up to its closing bracket.
static int children(parser* p, int node, int object, int depth) {
    char close = object ? '}' : ']';
    int last = -1;
    p->at++;
    skip_space(p);
    if (p->at < p->length && p->text[p->at] == close) return p->at++, 0;
    for (;;) {
        const char* key = NULL;
        size_t key_length = 0;
        skip_space(p);
        if (object) {
            if (string_at(p, &key, &key_length) != 0) return -1;
            skip_space(p);
            if (p->at >= p->length || p->text[p->at++] != ':') return -1;
        }
        int child = value(p, depth + 1);
        if (child < 0) return -1;
        json_node* n = p->doc->nodes;  // value() may have moved the array
        n[child].key = key, n[child].key_length = key_length;
        if (last < 0) n[node].first = child;
        else n[last].next = child;
        last = child, n[node].count++;
        skip_space(p);
        if (p->at >= p->length) return -1;
        char c = p->text[p->at++];
        if (c == close) return 0;
        if (c != ',') return -1;
    }
}

static int value(parser* p, int depth) {
    skip_space(p);
    if (p->at >= p->length || depth > 64) return -1;
    char c = p->text[p->at];
    if (c == '{' || c == '[') {
        int node = new_node(p, c == '{' ? JSON_OBJECT : JSON_ARRAY);
        size_t begin = p->at;
        if (node < 0 || children(p, node, c == '{', depth) != 0) return -1;
        p->doc->nodes[node].text = p->text + begin, p->doc->nodes[node].length = p->at - begin;
        return node;
    }
    if (c == '"') {
        int node = new_node(p, JSON_STRING);
        const char* start;
        size_t length;
        if (node < 0 || string_at(p, &start, &length) != 0) return -1;
        p->doc->nodes[node].text = start, p->doc->nodes[node].length = length;
        return node;
    }
    static const struct { const char* word; int type; } words[] = {
        {"null", JSON_NULL}, {"false", JSON_FALSE}, {"true", JSON_TRUE}};
    for (int i = 0; i < 3; i++) {
        size_t n = strlen(words[i].word);
        if (p->length - p->at >= n && memcmp(p->text + p->at, words[i].word, n) == 0) {
            int node = new_node(p, words[i].type);
            if (node < 0) return -1;
            p->doc->nodes[node].text = p->text + p->at, p->doc->nodes[node].length = n;
            p->at += n;
            return node;
        }
    }
    size_t begin = p->at;
    while (p->at < p->length && strchr("+-0123456789.eE", p->text[p->at]) && p->text[p->at]) p->at++;
    if (p->at == begin || !strchr("-0123456789", p->text[begin])) return -1;
    int node = new_node(p, JSON_NUMBER);
    if (node < 0) return -1;
    p->doc->nodes[node].text = p->text + begin, p->doc->nodes[node].length = p->at - begin;
    return node;
}

// JSON text is UTF-8 (RFC 8259), as Python's json.loads of bytes demands: a file whose text is not is
// refused as unreadable, never echoed raw into a one-line refusal.
static int valid_utf8(const unsigned char* s, size_t length) {
    for (size_t i = 0; i < length;) {
        unsigned char c = s[i];
        size_t extra = c < 0x80 ? 0 : (c >> 5) == 0x6 ? 1 : (c >> 4) == 0xE ? 2 : (c >> 3) == 0x1E ? 3 : 4;
        if (extra == 4 || (extra && c < 0xC2) || i + extra >= length + (extra ? 0 : 1)) return 0;
        unsigned code = extra ? c & (0x3F >> extra) : c;
        for (size_t k = 1; k <= extra; k++) {
            if ((s[i + k] & 0xC0) != 0x80) return 0;
            code = code << 6 | (s[i + k] & 0x3F);
        }
        if ((extra == 2 && (code < 0x800 || (code >= 0xD800 && code < 0xE000))) ||
            (extra == 3 && (code < 0x10000 || code > 0x10FFFF)))
            return 0;
        i += extra + 1;
    }
    return 1;
}

int json_parse(json_document* doc, const char* text, size_t length) {
    memset(doc, 0, sizeof *doc);
    if (!valid_utf8((const unsigned char*)text, length)) return -1;
    parser p = {doc, text, 0, length};
    if (value(&p, 0) != 0) return -1;  // the root is node 0
    skip_space(&p);
    return p.at == length ? 0 : -1;
}

void json_free(json_document* doc) {
    free(doc->nodes);
    memset(doc, 0, sizeof *doc);
}

int json_member(const json_document* doc, int object, const char* key) {
    if (object < 0 || doc->nodes[object].type != JSON_OBJECT) return -1;
    int found = -1;
    size_t n = strlen(key);
    for (int c = doc->nodes[object].first; c >= 0; c = doc->nodes[c].next)
        if (doc->nodes[c].key_length == n && memcmp(doc->nodes[c].key, key, n) == 0) found = c;
    return found;
}

int json_string_is(const json_document* doc, int node, const char* value) {
    return node >= 0 && doc->nodes[node].type == JSON_STRING && doc->nodes[node].length == strlen(value) &&
           memcmp(doc->nodes[node].text, value, doc->nodes[node].length) == 0;
}

void json_repr(const json_document* doc, int node, char* out, size_t room) {
    if (node < 0) { snprintf(out, room, "None"); return; }
    const json_node* n = &doc->nodes[node];
    const char* word = n->type == JSON_NULL ? "None" : n->type == JSON_TRUE ? "True" : "False";
    if (n->type == JSON_STRING) snprintf(out, room, "'%.*s'", (int)n->length, n->text);
    else if (n->type <= JSON_TRUE) snprintf(out, room, "%s", word);
    else snprintf(out, room, "%.*s", (int)(n->length > 200 ? 200 : n->length), n->text);
}
