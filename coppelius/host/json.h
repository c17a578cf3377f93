// json.h: a small JSON reader for the few JSON texts the run reads (the embedded certificate, the
// run table's model and learner). It parses the whole text into a flat array of nodes; strings
// and numbers keep their raw text (without quotes, escapes not decoded: every name and digest
// the run compares is plain ASCII). Duplicate keys: the last one wins, as in Python's json.loads.
#ifndef COPPELIUS_JSON_H
#define COPPELIUS_JSON_H
#include <stddef.h>

enum { JSON_NULL, JSON_FALSE, JSON_TRUE, JSON_NUMBER, JSON_STRING, JSON_ARRAY, JSON_OBJECT };

typedef struct {
    int type;
    const char* text;   // strings: the characters between the quotes; numbers: the digits; others: the value
    size_t length;
    const char* key;    // a member of an object: its name (raw, between the quotes)
    size_t key_length;
    int first, next;    // first child, next sibling (-1: none)
    int count;          // children of an array or object
} json_node;

typedef struct {
    json_node* nodes;
    int count, capacity;
} json_document;

// Parse `length` bytes at `text`. 0, or -1 when the text is not one JSON value (then free it anyway).
int json_parse(json_document* doc, const char* text, size_t length);
void json_free(json_document* doc);
// The member `key` of the object node `object` (the last one of that name), or -1.
int json_member(const json_document* doc, int object, const char* key);
// The node is a string equal to `value`.
int json_string_is(const json_document* doc, int node, const char* value);
// The node as Python's repr() of its json.loads value would print it (strings in quotes, true as
// True, null or an absent node (-1) as None, containers as their JSON text), into `out`.
void json_repr(const json_document* doc, int node, char* out, size_t room);
#endif
