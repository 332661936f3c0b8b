/* A growable text buffer for building HTML, SVG and JSON pieces. */
#ifndef VDN_EVAL_STRBUF_H
#define VDN_EVAL_STRBUF_H

#include <stddef.h>

typedef struct {
    char *s;
    size_t len, cap;
} vdn_sb;

void vdn_sb_printf(vdn_sb *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void vdn_sb_append(vdn_sb *b, const char *s, size_t n);
/* Text with & < > " ' escaped for HTML/XML. */
void vdn_sb_escape(vdn_sb *b, const char *s);
void vdn_sb_free(vdn_sb *b);

#endif
