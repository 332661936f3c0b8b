/* The S3 XML reader: real response shapes decode to the right values, malformed documents
 * are refused with a message that says what was expected and where. */
#include "s3_xml.h"
#include "check.h"

#include <stdlib.h>

static void test_list(void) {
    const char *doc =
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
        "<ListBucketResult xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
        "<Name>bkt</Name><Prefix>runs/</Prefix><KeyCount>3</KeyCount>"
        "<IsTruncated>true</IsTruncated><NextContinuationToken>1ab/+=</NextContinuationToken>"
        "<Contents><Key>runs/a&amp;b &lt;1&gt;.bin</Key><Size>12</Size>"
        "<ETag>&quot;9b2cf535f27731c974343645a3985328&quot;</ETag></Contents>\n"
        "  <Contents><Key>runs/&#233;t&#xE9;</Key><Size>0</Size></Contents>"
        "<Contents><Size>18446744073709551615</Size><Key><![CDATA[runs/<raw>]]></Key></Contents>"
        "</ListBucketResult>";
    vdn_s3_list_page page;
    char err[1024];
    int rc = vdn_s3_parse_list(doc, strlen(doc), &page, err, sizeof err);
    CHECK(rc == 0);
    if (rc) {
        fprintf(stderr, "  %s\n", err);
        return;
    }
    CHECK(page.n == 3);
    CHECK(page.truncated == 1);
    CHECK(page.next_token && !strcmp(page.next_token, "1ab/+="));
    if (page.n == 3) {
        CHECK(!strcmp(page.objects[0].key, "runs/a&b <1>.bin"));
        CHECK(page.objects[0].size == 12);
        CHECK(!strcmp(page.objects[1].key, "runs/\xc3\xa9t\xc3\xa9"));
        CHECK(page.objects[1].size == 0);
        CHECK(!strcmp(page.objects[2].key, "runs/<raw>"));
        CHECK(page.objects[2].size == UINT64_MAX);
    }
    vdn_s3_list_page_free(&page);

    const char *last = "<ListBucketResult><IsTruncated>false</IsTruncated>"
                       "<Contents><Key>k</Key><Size>5</Size></Contents></ListBucketResult>";
    CHECK(vdn_s3_parse_list(last, strlen(last), &page, err, sizeof err) == 0);
    CHECK(page.n == 1 && !page.truncated && page.next_token == NULL);
    vdn_s3_list_page_free(&page);
}

static void test_small_docs(void) {
    char err[1024], code[64], msg[256];
    const char *init = "<InitiateMultipartUploadResult><Bucket>b</Bucket><Key>k</Key>"
                       "<UploadId>VXBsb2FkIElE+/=</UploadId></InitiateMultipartUploadResult>";
    char *id = NULL;
    CHECK(vdn_s3_parse_upload_id(init, strlen(init), &id, err, sizeof err) == 0);
    CHECK(id && !strcmp(id, "VXBsb2FkIElE+/="));
    free(id);

    const char *e = "<?xml version=\"1.0\"?><Error><Code>NoSuchKey</Code><Message>The "
                    "specified key does not exist.</Message><Key>x</Key></Error>";
    CHECK(vdn_s3_parse_error(e, strlen(e), code, sizeof code, msg, sizeof msg) == 1);
    CHECK(!strcmp(code, "NoSuchKey"));
    CHECK(!strcmp(msg, "The specified key does not exist."));
    /* Namespace prefixes are dropped. */
    const char *ns = "<s3:Error xmlns:s3=\"urn:x\"><s3:Code>SlowDown</s3:Code></s3:Error>";
    CHECK(vdn_s3_parse_error(ns, strlen(ns), code, sizeof code, msg, sizeof msg) == 1);
    CHECK(!strcmp(code, "SlowDown") && msg[0] == 0);
    /* Not XML, or not an Error: 0, empty strings. */
    CHECK(vdn_s3_parse_error("<html>oops", 10, code, sizeof code, msg, sizeof msg) == 0);
    CHECK(code[0] == 0 && msg[0] == 0);
    CHECK(vdn_s3_parse_error(NULL, 0, code, sizeof code, msg, sizeof msg) == 0);
    /* Truncation to the caller's buffer. */
    char tiny[4];
    CHECK(vdn_s3_parse_error(e, strlen(e), tiny, sizeof tiny, msg, sizeof msg) == 1);
    CHECK(!strcmp(tiny, "NoS"));

    /* An <Error> where a result was expected carries the code into the message. */
    int rc = vdn_s3_parse_upload_id(e, strlen(e), &id, err, sizeof err);
    CHECK_ERR(rc, err, "NoSuchKey");
    CHECK(id == NULL);
    const char *late = "<Error><Code>InternalError</Code><Message>We encountered an internal "
                       "error.</Message></Error>";
    rc = vdn_s3_check_complete(late, strlen(late), err, sizeof err);
    CHECK_ERR(rc, err, "InternalError");
    const char *ok = "<CompleteMultipartUploadResult><ETag>\"x-3\"</ETag>"
                     "</CompleteMultipartUploadResult>";
    CHECK(vdn_s3_check_complete(ok, strlen(ok), err, sizeof err) == 0);
    rc = vdn_s3_check_complete("<Other/>", 8, err, sizeof err);
    CHECK_ERR(rc, err, "expected <CompleteMultipartUploadResult>");
    const char *noid = "<InitiateMultipartUploadResult><UploadId></UploadId>"
                       "</InitiateMultipartUploadResult>";
    rc = vdn_s3_parse_upload_id(noid, strlen(noid), &id, err, sizeof err);
    CHECK_ERR(rc, err, "no <UploadId>");

    /* Tree access, text concatenation around children and comments, self-closing tags. */
    const char *t = "<r>a<!--c-->b<x/>c<y>1</y><y>2</y></r>";
    vdn_xml_node *root = vdn_xml_parse(t, strlen(t), err, sizeof err);
    CHECK(root != NULL);
    if (root) {
        CHECK(!strcmp(root->text, "abc"));
        CHECK(!strcmp(vdn_xml_child_text(root, "x"), ""));
        CHECK(!strcmp(vdn_xml_child_text(root, "y"), "1"));
        CHECK(vdn_xml_child_text(root, "z") == NULL);
        const vdn_xml_node *y = vdn_xml_child(root, "y");
        CHECK(y && y->next && !strcmp(y->next->text, "2"));
        vdn_xml_free(root);
    }
    /* 4-byte UTF-8 from a character reference. */
    const char *emoji = "<r>&#x1F600;</r>";
    root = vdn_xml_parse(emoji, strlen(emoji), err, sizeof err);
    CHECK(root && !strcmp(root->text, "\xf0\x9f\x98\x80"));
    vdn_xml_free(root);
}

static void test_malformed(void) {
    static const struct {
        const char *doc, *want;
    } cases[] = {
        {"", "empty document"},
        {"   \n ", "no root element"},
        {"hello", "expected '<'"},
        {"<a><b></a></b>", "does not match"},
        {"<a>", "expected </a>"},
        {"<a></a", "expected '>'"},
        {"<a>&nope;</a>", "unknown entity"},
        {"<a>&amp</a>", "expected an entity"},
        {"<a>&#0;</a>", "not a character"},
        {"<a>&#xD800;</a>", "not a character"},
        {"<a>&#x110000;</a>", "above U+10FFFF"},
        {"<a>&#12a;</a>", "bad digit"},
        {"<a>&#;</a>", "empty character reference"},
        {"<!DOCTYPE a><a/>", "DOCTYPE"},
        {"<a><!-- x </a>", "unterminated comment"},
        {"<a><![CDATA[ x </a>", "unterminated CDATA"},
        {"<a x=\"1></a>", "attribute value"},
        {"<a x=\"1>", "unterminated attribute"},
        {"<a x=1></a>", "quoted attribute"},
        {"<a x></a>", "expected '='"},
        {"<a></a><b/>", "content after the root"},
        {"<1a/>", "expected an element name"},
        {"<a", "unexpected end inside a start tag"},
    };
    char err[1024];
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        err[0] = 0;
        vdn_xml_node *n = vdn_xml_parse(cases[i].doc, strlen(cases[i].doc), err, sizeof err);
        CHECK(n == NULL);
        vdn_xml_free(n);
        CHECK_ERR(n ? 0 : -1, err, cases[i].want);
        CHECK(strstr(err, "XML byte ") == err); /* says where */
    }
    /* A NUL byte inside the document (length-delimited input). */
    const char nul[] = "<a>x\0y</a>";
    vdn_xml_node *n = vdn_xml_parse(nul, sizeof nul - 1, err, sizeof err);
    CHECK_ERR(n ? 0 : -1, err, "NUL byte");
    /* Depth cap. */
    char deep[1200] = "";
    for (int i = 0; i < VDN_XML_MAX_DEPTH + 2; i++)
        strcat(deep, "<a>");
    n = vdn_xml_parse(deep, strlen(deep), err, sizeof err);
    CHECK_ERR(n ? 0 : -1, err, "nested deeper");
    /* The byte offset is right: the bad entity starts at byte 3. */
    n = vdn_xml_parse("<a>&x;</a>", 10, err, sizeof err);
    CHECK_ERR(n ? 0 : -1, err, "XML byte 3:");

    /* List pages with bad fields name the field and the object. */
    vdn_s3_list_page page;
    const char *badsize = "<ListBucketResult><Contents><Key>runs/x</Key><Size>12k</Size>"
                          "</Contents></ListBucketResult>";
    int rc = vdn_s3_parse_list(badsize, strlen(badsize), &page, err, sizeof err);
    CHECK_ERR(rc, err, "<Size> is '12k'");
    CHECK(strstr(err, "runs/x") != NULL);
    const char *nosize = "<ListBucketResult><Contents><Key>k</Key></Contents></ListBucketResult>";
    rc = vdn_s3_parse_list(nosize, strlen(nosize), &page, err, sizeof err);
    CHECK_ERR(rc, err, "(missing)");
    const char *nokey = "<ListBucketResult><Contents><Size>1</Size></Contents></ListBucketResult>";
    rc = vdn_s3_parse_list(nokey, strlen(nokey), &page, err, sizeof err);
    CHECK_ERR(rc, err, "has no <Key>");
    const char *tr = "<ListBucketResult><IsTruncated>yes</IsTruncated></ListBucketResult>";
    rc = vdn_s3_parse_list(tr, strlen(tr), &page, err, sizeof err);
    CHECK_ERR(rc, err, "expected true or false");
    const char *notok = "<ListBucketResult><IsTruncated>true</IsTruncated></ListBucketResult>";
    rc = vdn_s3_parse_list(notok, strlen(notok), &page, err, sizeof err);
    CHECK_ERR(rc, err, "NextContinuationToken");
    const char *overflow = "<ListBucketResult><Contents><Key>k</Key><Size>18446744073709551616"
                           "</Size></Contents></ListBucketResult>";
    rc = vdn_s3_parse_list(overflow, strlen(overflow), &page, err, sizeof err);
    CHECK_ERR(rc, err, "decimal byte count");
    rc = vdn_s3_parse_list("<html>", 6, &page, err, sizeof err);
    CHECK_ERR(rc, err, "malformed ListBucketResult response");
}

int main(void) {
    test_list();
    test_small_docs();
    test_malformed();
    return check_report("test_s3_xml");
}
