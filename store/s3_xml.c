/* Recursive-descent XML reader, sized for S3 responses (kilobytes, depth 3). Strict where
 * strictness protects us (matching tags, known entities, no DOCTYPE, no NUL bytes, a depth
 * cap), lenient where S3 varies (namespaces, attributes, comments, CDATA, whitespace). */
#include "s3_xml.h"
#include "vdn_util.h"

#include <errno.h>
#include <stdarg.h>
#include <string.h>

typedef struct {
    const char *base, *p, *end;
    char *err;
    size_t errlen;
    int failed;
} parser;

void vdn_s3_buf_add(vdn_s3_buf *b, const void *p, size_t n) {
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 32;
        while (cap < b->n + n + 1)
            cap *= 2;
        char *ns = realloc(b->s, cap);
        VDN_ASSERT(ns);
        b->s = ns;
        b->cap = cap;
    }
    memcpy(b->s + b->n, p, n);
    b->n += n;
    b->s[b->n] = 0;
}

static char *sb_take(vdn_s3_buf *b) {
    if (!b->s) return vdn_xstrdup("");
    char *s = b->s;
    b->s = NULL;
    b->n = b->cap = 0;
    return s;
}

__attribute__((format(printf, 2, 3))) static int fail(parser *ps, const char *fmt, ...) {
    if (ps->failed) return -1;
    ps->failed = 1;
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    vdn_fail(ps->err, ps->errlen, "XML byte %zu: %s", (size_t)(ps->p - ps->base), msg);
    return -1;
}

static int at_end(parser *ps) {
    return ps->p >= ps->end;
}
static int starts(parser *ps, const char *s) {
    size_t n = strlen(s);
    return (size_t)(ps->end - ps->p) >= n && !memcmp(ps->p, s, n);
}
static int is_space(char c) {
    return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}
static void skip_space(parser *ps) {
    while (!at_end(ps) && is_space(*ps->p))
        ps->p++;
}
static int name_start(unsigned char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_' || c == ':' || c >= 0x80;
}
static int name_char(unsigned char c) {
    return name_start(c) || (c >= '0' && c <= '9') || c == '-' || c == '.';
}

/* Skip to just past `term`; what = construct name for the error. */
static int skip_past(parser *ps, const char *term, const char *what) {
    size_t n = strlen(term);
    while ((size_t)(ps->end - ps->p) >= n) {
        if (!memcmp(ps->p, term, n)) {
            ps->p += n;
            return 0;
        }
        ps->p++;
    }
    return fail(ps, "unterminated %s (expected '%s')", what, term);
}

/* Comments, processing instructions; DOCTYPE is refused. Returns 1 if something was skipped. */
static int skip_misc(parser *ps) {
    if (starts(ps, "<!--")) return skip_past(ps, "-->", "comment") ? -1 : 1;
    if (starts(ps, "<?")) return skip_past(ps, "?>", "processing instruction") ? -1 : 1;
    if (starts(ps, "<!DOCTYPE") || starts(ps, "<!doctype"))
        return fail(ps, "DOCTYPE is not allowed in an S3 response");
    return 0;
}

static int parse_name(parser *ps, const char **name, size_t *len) {
    const char *s = ps->p;
    if (at_end(ps) || !name_start((unsigned char)*ps->p))
        return fail(ps, "expected an element name");
    while (!at_end(ps) && name_char((unsigned char)*ps->p))
        ps->p++;
    *name = s;
    *len = (size_t)(ps->p - s);
    return 0;
}

static void put_utf8(vdn_s3_buf *b, unsigned long cp) {
    char u[4];
    size_t n;
    if (cp < 0x80) {
        u[0] = (char)cp;
        n = 1;
    } else if (cp < 0x800) {
        u[0] = (char)(0xc0 | (cp >> 6));
        u[1] = (char)(0x80 | (cp & 0x3f));
        n = 2;
    } else if (cp < 0x10000) {
        u[0] = (char)(0xe0 | (cp >> 12));
        u[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
        u[2] = (char)(0x80 | (cp & 0x3f));
        n = 3;
    } else {
        u[0] = (char)(0xf0 | (cp >> 18));
        u[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
        u[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
        u[3] = (char)(0x80 | (cp & 0x3f));
        n = 4;
    }
    vdn_s3_buf_add(b, u, n);
}

/* At '&': decode one entity into b. */
static int parse_entity(parser *ps, vdn_s3_buf *b) {
    const char *semi = ps->p;
    while (semi < ps->end && *semi != ';' && semi - ps->p < 12)
        semi++;
    if (semi >= ps->end || *semi != ';') return fail(ps, "expected an entity like &amp; or &#38;");
    const char *e = ps->p + 1;
    size_t n = (size_t)(semi - e);
    static const struct {
        const char *name;
        char c;
    } named[] = {{"lt", '<'}, {"gt", '>'}, {"amp", '&'}, {"quot", '"'}, {"apos", '\''}};
    for (size_t i = 0; i < sizeof named / sizeof *named; i++)
        if (n == strlen(named[i].name) && !memcmp(e, named[i].name, n)) {
            vdn_s3_buf_add(b, &named[i].c, 1);
            ps->p = semi + 1;
            return 0;
        }
    if (n >= 1 && e[0] == '#') {
        int hex = n >= 2 && e[1] == 'x';
        const char *d = e + 1 + hex;
        unsigned long cp = 0;
        if (d == semi) return fail(ps, "empty character reference");
        for (; d < semi; d++) {
            int v;
            if (*d >= '0' && *d <= '9')
                v = *d - '0';
            else if (hex && *d >= 'a' && *d <= 'f')
                v = *d - 'a' + 10;
            else if (hex && *d >= 'A' && *d <= 'F')
                v = *d - 'A' + 10;
            else
                return fail(ps, "bad digit '%c' in character reference", *d);
            cp = cp * (hex ? 16 : 10) + (unsigned long)v;
            if (cp > 0x10ffff) return fail(ps, "character reference above U+10FFFF");
        }
        if (cp == 0 || (cp >= 0xd800 && cp <= 0xdfff))
            return fail(ps, "character reference U+%04lX is not a character", cp);
        put_utf8(b, cp);
        ps->p = semi + 1;
        return 0;
    }
    return fail(ps, "unknown entity '&%.*s;' (expected lt, gt, amp, quot, apos or #N)", (int)n, e);
}

static int skip_attributes(parser *ps) {
    for (;;) {
        skip_space(ps);
        if (at_end(ps)) return fail(ps, "unexpected end inside a start tag");
        if (*ps->p == '>' || starts(ps, "/>")) return 0;
        const char *name;
        size_t len;
        if (parse_name(ps, &name, &len)) return -1;
        skip_space(ps);
        if (at_end(ps) || *ps->p != '=') return fail(ps, "expected '=' after attribute name");
        ps->p++;
        skip_space(ps);
        if (at_end(ps) || (*ps->p != '"' && *ps->p != '\''))
            return fail(ps, "expected a quoted attribute value");
        char q = *ps->p++;
        while (!at_end(ps) && *ps->p != q) {
            if (*ps->p == '<') return fail(ps, "'<' inside an attribute value");
            ps->p++;
        }
        if (at_end(ps)) return fail(ps, "unterminated attribute value");
        ps->p++;
    }
}

static char *local_name(const char *name, size_t len) {
    const char *colon = memchr(name, ':', len);
    if (colon && colon + 1 < name + len) {
        len -= (size_t)(colon + 1 - name);
        name = colon + 1;
    }
    char *s = vdn_xmalloc(len + 1);
    memcpy(s, name, len);
    s[len] = 0;
    return s;
}

/* At '<' of a start tag. */
static vdn_xml_node *parse_element(parser *ps, int depth) {
    if (depth > VDN_XML_MAX_DEPTH) {
        fail(ps, "elements nested deeper than %d", VDN_XML_MAX_DEPTH);
        return NULL;
    }
    ps->p++; /* '<' */
    const char *name;
    size_t nlen;
    if (parse_name(ps, &name, &nlen) || skip_attributes(ps)) return NULL;
    vdn_xml_node *node = vdn_xcalloc(1, sizeof *node);
    node->name = local_name(name, nlen);
    if (starts(ps, "/>")) {
        ps->p += 2;
        node->text = vdn_xstrdup("");
        return node;
    }
    ps->p++; /* '>' */
    vdn_s3_buf text = {0};
    vdn_xml_node **tail = &node->child;
    for (;;) {
        if (at_end(ps)) {
            fail(ps, "unexpected end of document (expected </%.*s>)", (int)nlen, name);
            break;
        }
        char c = *ps->p;
        if (c == 0) {
            fail(ps, "NUL byte in document");
            break;
        }
        if (c == '&') {
            if (parse_entity(ps, &text)) break;
            continue;
        }
        if (c != '<') {
            const char *s = ps->p;
            while (!at_end(ps) && *ps->p != '<' && *ps->p != '&' && *ps->p != 0)
                ps->p++;
            vdn_s3_buf_add(&text, s, (size_t)(ps->p - s));
            continue;
        }
        if (starts(ps, "</")) {
            ps->p += 2;
            const char *cname;
            size_t clen;
            if (parse_name(ps, &cname, &clen)) break;
            if (clen != nlen || memcmp(cname, name, nlen)) {
                fail(ps, "closing tag </%.*s> does not match <%.*s>", (int)(clen > 64 ? 64 : clen),
                     cname, (int)(nlen > 64 ? 64 : nlen), name);
                break;
            }
            skip_space(ps);
            if (at_end(ps) || *ps->p != '>') {
                fail(ps, "expected '>' to close </%.*s>", (int)nlen, name);
                break;
            }
            ps->p++;
            node->text = sb_take(&text);
            return node;
        }
        if (starts(ps, "<![CDATA[")) {
            ps->p += 9;
            const char *s = ps->p;
            if (skip_past(ps, "]]>", "CDATA section")) break;
            vdn_s3_buf_add(&text, s, (size_t)(ps->p - 3 - s));
            continue;
        }
        int m = skip_misc(ps);
        if (m < 0) break;
        if (m > 0) continue;
        vdn_xml_node *child = parse_element(ps, depth + 1);
        if (!child) break;
        *tail = child;
        tail = &child->next;
    }
    free(text.s);
    node->text = NULL;
    vdn_xml_free(node);
    return NULL;
}

vdn_xml_node *vdn_xml_parse(const char *buf, size_t len, char *err, size_t errlen) {
    parser ps = {buf, buf, buf + len, err, errlen, 0};
    if (!buf) {
        vdn_fail(err, errlen, "XML: no document");
        return NULL;
    }
    if (starts(&ps, "\xef\xbb\xbf")) ps.p += 3;
    vdn_xml_node *root = NULL;
    for (;;) {
        skip_space(&ps);
        if (at_end(&ps)) break;
        int m = skip_misc(&ps);
        if (m < 0) goto bad;
        if (m > 0) continue;
        if (*ps.p != '<' || root) {
            fail(&ps, root ? "content after the root element"
                           : "expected '<' to open the root "
                             "element");
            goto bad;
        }
        root = parse_element(&ps, 1);
        if (!root) goto bad;
    }
    if (!root) {
        fail(&ps, len ? "no root element" : "empty document (expected an XML response)");
        goto bad;
    }
    return root;
bad:
    vdn_xml_free(root);
    return NULL;
}

void vdn_xml_free(vdn_xml_node *n) {
    while (n) {
        vdn_xml_node *next = n->next;
        vdn_xml_free(n->child);
        free(n->name);
        free(n->text);
        free(n);
        n = next;
    }
}

const vdn_xml_node *vdn_xml_child(const vdn_xml_node *n, const char *name) {
    for (const vdn_xml_node *c = n ? n->child : NULL; c; c = c->next)
        if (!strcmp(c->name, name)) return c;
    return NULL;
}

const char *vdn_xml_child_text(const vdn_xml_node *n, const char *name) {
    const vdn_xml_node *c = vdn_xml_child(n, name);
    return c ? c->text : NULL;
}

/* ---- the S3 documents ---- */

static void copy_trunc(char *dst, size_t cap, const char *src) {
    if (!cap) return;
    snprintf(dst, cap, "%s", src ? src : "");
}

int vdn_s3_parse_error(const char *buf, size_t len, char *code, size_t codelen, char *message,
                       size_t msglen) {
    copy_trunc(code, codelen, "");
    copy_trunc(message, msglen, "");
    char err[256];
    vdn_xml_node *root = buf && len ? vdn_xml_parse(buf, len, err, sizeof err) : NULL;
    if (!root) return 0;
    int found = !strcmp(root->name, "Error");
    if (found) {
        copy_trunc(code, codelen, vdn_xml_child_text(root, "Code"));
        copy_trunc(message, msglen, vdn_xml_child_text(root, "Message"));
    }
    vdn_xml_free(root);
    return found;
}

static vdn_xml_node *parse_root(const char *buf, size_t len, const char *want, char *err,
                                size_t errlen) {
    char sub[512];
    vdn_xml_node *root = vdn_xml_parse(buf, len, sub, sizeof sub);
    if (!root) {
        vdn_fail(err, errlen, "malformed %s response: %s", want, sub);
        return NULL;
    }
    if (strcmp(root->name, want)) {
        char code[128], msg[256];
        if (!strcmp(root->name, "Error")) {
            copy_trunc(code, sizeof code, vdn_xml_child_text(root, "Code"));
            copy_trunc(msg, sizeof msg, vdn_xml_child_text(root, "Message"));
            vdn_fail(err, errlen, "S3 error %s: %s (expected a %s document)", code, msg, want);
        } else {
            vdn_fail(err, errlen, "unexpected XML root <%.64s> (expected <%s>)", root->name, want);
        }
        vdn_xml_free(root);
        return NULL;
    }
    return root;
}

int vdn_s3_parse_upload_id(const char *buf, size_t len, char **upload_id, char *err,
                           size_t errlen) {
    *upload_id = NULL;
    vdn_xml_node *root = parse_root(buf, len, "InitiateMultipartUploadResult", err, errlen);
    if (!root) return -1;
    const char *id = vdn_xml_child_text(root, "UploadId");
    int rc = 0;
    if (!id || !*id)
        rc = vdn_fail(err, errlen, "InitiateMultipartUploadResult has no <UploadId>");
    else
        *upload_id = vdn_xstrdup(id);
    vdn_xml_free(root);
    return rc;
}

int vdn_s3_check_complete(const char *buf, size_t len, char *err, size_t errlen) {
    vdn_xml_node *root = parse_root(buf, len, "CompleteMultipartUploadResult", err, errlen);
    if (!root) return -1;
    vdn_xml_free(root);
    return 0;
}

static int parse_u64(const char *s, uint64_t *out) {
    if (!s || !*s) return -1;
    uint64_t v = 0;
    for (; *s; s++) {
        if (*s < '0' || *s > '9') return -1;
        uint64_t d = (uint64_t)(*s - '0');
        if (v > (UINT64_MAX - d) / 10) return -1;
        v = v * 10 + d;
    }
    *out = v;
    return 0;
}

int vdn_s3_parse_list(const char *buf, size_t len, vdn_s3_list_page *page, char *err,
                      size_t errlen) {
    memset(page, 0, sizeof *page);
    vdn_xml_node *root = parse_root(buf, len, "ListBucketResult", err, errlen);
    if (!root) return -1;
    int rc = 0;
    size_t cap = 0, index = 0;
    for (const vdn_xml_node *c = root->child; c && rc == 0; c = c->next) {
        if (strcmp(c->name, "Contents")) continue;
        const char *key = vdn_xml_child_text(c, "Key");
        const char *size = vdn_xml_child_text(c, "Size");
        uint64_t sz = 0;
        if (!key || !*key)
            rc = vdn_fail(err, errlen, "ListBucketResult: <Contents> #%zu has no <Key>", index);
        else if (parse_u64(size, &sz))
            rc = vdn_fail(err, errlen,
                          "ListBucketResult: <Contents> #%zu (key %.200s): <Size> is '%.40s' "
                          "(expected a decimal byte count)",
                          index, key, size ? size : "(missing)");
        if (rc) break;
        if (page->n == cap) {
            cap = cap ? cap * 2 : 16;
            vdn_s3_object *nv = realloc(page->objects, cap * sizeof *nv);
            VDN_ASSERT(nv);
            page->objects = nv;
        }
        page->objects[page->n].key = vdn_xstrdup(key);
        page->objects[page->n].size = sz;
        page->n++;
        index++;
    }
    if (rc == 0) {
        const char *trunc = vdn_xml_child_text(root, "IsTruncated");
        if (trunc && strcmp(trunc, "true") && strcmp(trunc, "false"))
            rc = vdn_fail(err, errlen,
                          "ListBucketResult: <IsTruncated> is '%.40s' (expected true or false)",
                          trunc);
        page->truncated = trunc && !strcmp(trunc, "true");
        const char *tok = vdn_xml_child_text(root, "NextContinuationToken");
        if (rc == 0 && page->truncated) {
            if (!tok || !*tok)
                rc = vdn_fail(err, errlen,
                              "ListBucketResult: <IsTruncated> is true but there "
                              "is no <NextContinuationToken>");
            else
                page->next_token = vdn_xstrdup(tok);
        }
    }
    vdn_xml_free(root);
    if (rc) vdn_s3_list_page_free(page);
    return rc;
}

void vdn_s3_list_page_free(vdn_s3_list_page *page) {
    for (size_t i = 0; i < page->n; i++)
        free(page->objects[i].key);
    free(page->objects);
    free(page->next_token);
    memset(page, 0, sizeof *page);
}
