#include "strbuf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vdn_util.h"

static void reserve(vdn_sb *b, size_t extra) {
    if (b->len + extra + 1 <= b->cap) return;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + extra + 1)
        cap *= 2;
    char *s = vdn_xmalloc(cap);
    if (b->len) memcpy(s, b->s, b->len);
    s[b->len] = 0;
    free(b->s);
    b->s = s;
    b->cap = cap;
}

void vdn_sb_append(vdn_sb *b, const char *s, size_t n) {
    reserve(b, n);
    memcpy(b->s + b->len, s, n);
    b->len += n;
    b->s[b->len] = 0;
}

void vdn_sb_printf(vdn_sb *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n <= 0) return;
    reserve(b, (size_t)n);
    va_start(ap, fmt);
    vsnprintf(b->s + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

void vdn_sb_escape(vdn_sb *b, const char *s) {
    for (; s && *s; s++) {
        switch (*s) {
        case '&':
            vdn_sb_append(b, "&amp;", 5);
            break;
        case '<':
            vdn_sb_append(b, "&lt;", 4);
            break;
        case '>':
            vdn_sb_append(b, "&gt;", 4);
            break;
        case '"':
            vdn_sb_append(b, "&quot;", 6);
            break;
        case '\'':
            vdn_sb_append(b, "&#39;", 5);
            break;
        default:
            vdn_sb_append(b, s, 1);
        }
    }
}

void vdn_sb_free(vdn_sb *b) {
    free(b->s);
    memset(b, 0, sizeof *b);
}
