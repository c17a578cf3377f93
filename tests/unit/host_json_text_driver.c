// The C host's JSON text for result records (coppelius/host/result.c's put_float and put_string), printed
// for tests/unit/test_formats_conformance.py to compare with Python's json.dumps: `float X...` (each X a
// binary64 as 16 hex digits) and `string S...` (each S its bytes as hex), one JSON value a line.
#include "result.c"

static unsigned char nibble(char c) { return (unsigned char)(c <= '9' ? c - '0' : c - 'a' + 10); }

int main(int argc, char** argv) {
    buffer b = {0};
    for (int i = 2; i < argc; i++) {
        b.length = 0;
        if (strcmp(argv[1], "float") == 0) {
            uint64_t bits = strtoull(argv[i], NULL, 16);
            double x;
            memcpy(&x, &bits, 8);
            put_float(&b, x);
        } else {
            size_t n = strlen(argv[i]) / 2;
            char* text = calloc(n + 1, 1);
            for (size_t k = 0; k < n; k++) text[k] = (char)(nibble(argv[i][2 * k]) << 4 | nibble(argv[i][2 * k + 1]));
            put_string(&b, text);
            free(text);
        }
        printf("%.*s\n", (int)b.length, b.text);
    }
    return 0;
}
