/* The few S3 XML responses vdn reads: ListObjectsV2, InitiateMultipartUpload,
 * CompleteMultipartUpload and Error. A small, strict, non-validating parser into a tree:
 * elements and their text only (attributes and namespaces are skipped, DOCTYPE is refused so
 * no entity expansion can happen). Every failure says what was expected and at which byte. */
#ifndef VDN_S3_XML_H
#define VDN_S3_XML_H

#include <stddef.h>
#include <stdint.h>

typedef struct vdn_xml_node {
    char *name;                 /* local name, namespace prefix stripped */
    char *text;                 /* concatenated direct text, entities decoded; never NULL */
    struct vdn_xml_node *child; /* first child element */
    struct vdn_xml_node *next;  /* next sibling */
} vdn_xml_node;

#define VDN_XML_MAX_DEPTH 64

/* A growable byte buffer kept NUL-terminated, so text in it is a C string (XML text while
 * parsing, HTTP response bodies in s3_request.c). */
typedef struct {
    char *s;
    size_t n, cap;
} vdn_s3_buf;

/* Appends n bytes; aborts when out of memory, like vdn_xmalloc. */
void vdn_s3_buf_add(vdn_s3_buf *b, const void *p, size_t n);

/* NULL and a message ("XML byte N: expected ...") on malformed input. */
vdn_xml_node *vdn_xml_parse(const char *buf, size_t len, char *err, size_t errlen);
void vdn_xml_free(vdn_xml_node *n);
const vdn_xml_node *vdn_xml_child(const vdn_xml_node *n, const char *name);
/* Text of the first child called name, or NULL when there is none. */
const char *vdn_xml_child_text(const vdn_xml_node *n, const char *name);

/* If buf is an S3 <Error> document, copy its Code and Message (truncated to fit) and return 1;
 * otherwise return 0 and leave code/message empty. Never fails. */
int vdn_s3_parse_error(const char *buf, size_t len, char *code, size_t codelen, char *message,
                       size_t msglen);

/* InitiateMultipartUploadResult -> UploadId (malloc'd). */
int vdn_s3_parse_upload_id(const char *buf, size_t len, char **upload_id, char *err, size_t errlen);

/* CompleteMultipartUploadResult: 0 if that is what came back; -1 naming the root otherwise
 * (S3 may answer 200 with an <Error> body when completion fails late). */
int vdn_s3_check_complete(const char *buf, size_t len, char *err, size_t errlen);

typedef struct {
    char *key;
    uint64_t size;
} vdn_s3_object;

typedef struct {
    vdn_s3_object *objects;
    size_t n;
    int truncated;
    char *next_token; /* NextContinuationToken when truncated, else NULL */
} vdn_s3_list_page;

/* ListBucketResult (ListObjectsV2). Each Contents needs Key and a decimal Size. */
int vdn_s3_parse_list(const char *buf, size_t len, vdn_s3_list_page *page, char *err,
                      size_t errlen);
void vdn_s3_list_page_free(vdn_s3_list_page *page);

#endif
