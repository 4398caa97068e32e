/* A .lwt reader written from seed 001 alone (docs/spec/lwt-gpt2-loading.txt, "Serialization
 * Contract"), as a LightwatchAI2 port would write it: the magic, the length-prefixed header JSON,
 * an array of the seed's TensorIndexEntry read with fread as the compiler lays the struct out,
 * then the fp32 data section, 64-byte aligned.  Nothing here comes from stk's code or docs.
 *
 * usage: seed001_reader FILE.lwt
 * Prints one line per tensor: name, shape, and the FNV-1a 64 of its float32 bytes (so a test can
 * compare every value with the source checkpoint); exit 1 with a message on anything unexpected. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct TensorIndexEntry {
    char name[128];      /* Null-terminated tensor name */
    uint32_t ndim;       /* Number of dimensions */
    uint64_t shape[8];   /* Shape (max 8 dims, unused = 0) */
    uint64_t offset;     /* Byte offset from start of tensor data section */
    uint64_t size_bytes; /* Size in bytes */
};

/* What main allocates, released on every way out (LeakSanitizer runs this test too). */
static char *json;
static struct TensorIndexEntry *entries;
static unsigned char *buf;

static int die(const char *what) {
    fprintf(stderr, "seed001_reader: %s\n", what);
    free(buf);
    free(entries);
    free(json);
    return 1;
}

/* The integer after "key": in the header JSON (the seed's schema has no nesting for these). */
static int json_u64(const char *json, const char *key, uint64_t *out) {
    char pat[64];
    const char *p;
    snprintf(pat, sizeof pat, "\"%s\":", key);
    p = strstr(json, pat);
    if (!p) return 0;
    p += strlen(pat);
    while (*p == ' ') p++;
    *out = strtoull(p, NULL, 10);
    return 1;
}

int main(int argc, char **argv) {
    FILE *f;
    char magic[8];
    uint64_t json_len, version, count, total_bytes, data_start, i;
    if (argc != 2) return die("usage: seed001_reader FILE.lwt");
    if (sizeof(struct TensorIndexEntry) != 216) return die("this compiler does not lay the seed's struct out in 216 bytes");
    f = fopen(argv[1], "rb");
    if (!f) return die("cannot open the file");
    if (fread(magic, 1, 8, f) != 8 || memcmp(magic, "LWATCHV1", 8) != 0) return die("bad magic");
    if (fread(&json_len, 8, 1, f) != 1 || json_len > (1u << 24)) return die("bad header length");
    json = calloc(1, (size_t)json_len + 1);
    if (!json || fread(json, 1, (size_t)json_len, f) != json_len) return die("short header");
    if (!json_u64(json, "version", &version) || version != 1) return die("not a version 1 header");
    if (!strstr(json, "\"dtype\":\"float32\"") && !strstr(json, "\"dtype\": \"float32\"")) return die("not float32");
    if (!json_u64(json, "tensor_count", &count) || !json_u64(json, "total_bytes", &total_bytes))
        return die("no tensor_count/total_bytes");
    if (count > 100000) return die("implausible tensor_count");
    entries = calloc((size_t)count + 1, sizeof *entries);
    if (!entries || fread(entries, sizeof *entries, (size_t)count, f) != count) return die("short tensor index");
    data_start = (16 + json_len + count * sizeof *entries + 63) / 64 * 64;
    for (i = 0; i < count; i++) {
        const struct TensorIndexEntry *e = &entries[i];
        uint64_t n = 1, fnv = 1469598103934665603ull, b;
        uint32_t d;
        if (memchr(e->name, 0, sizeof e->name) == NULL || e->ndim > 8) return die("bad entry");
        for (d = 0; d < e->ndim; d++) n *= e->shape[d];
        if (n * 4 != e->size_bytes || e->offset % 64 || e->offset + e->size_bytes > total_bytes) return die(e->name);
        buf = malloc((size_t)e->size_bytes + 1);
        if (!buf || fseek(f, (long)(data_start + e->offset), SEEK_SET) != 0 ||
            fread(buf, 1, (size_t)e->size_bytes, f) != e->size_bytes)
            return die("short tensor data");
        for (b = 0; b < e->size_bytes; b++) fnv = (fnv ^ buf[b]) * 1099511628211ull;
        free(buf);
        buf = NULL;
        printf("%s [", e->name);
        for (d = 0; d < e->ndim; d++) printf("%s%llu", d ? ", " : "", (unsigned long long)e->shape[d]);
        printf("] %016llx\n", (unsigned long long)fnv);
    }
    if (fseek(f, 0, SEEK_END) != 0 || (uint64_t)ftell(f) != data_start + total_bytes)
        return die("file size is not data start + total_bytes");
    fclose(f);
    free(entries);
    free(json);
    return 0;
}
