/* Fuzz entry for the S3 XML reader and the four S3 document parsers. Invariants checked on
 * every input: no crash or leak (ASan), a failure always comes with a message, a parsed tree
 * has named nodes and non-NULL text, list pages are internally consistent.
 * With VDN_FUZZ_REPLAY_MAIN it is a plain program replaying a corpus folder: files named
 * bad_list_* must be rejected as list pages, other bad_* as XML; good_* must parse as XML and,
 * for good_list_*, as a list page. */
#include "s3_xml.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(c)                                                                                   \
    do {                                                                                           \
        if (!(c)) {                                                                                \
            fprintf(stderr, "fuzz_s3_xml: invariant failed: %s\n", #c);                            \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

static void check_tree(const vdn_xml_node *n, int depth) {
    CHECK(depth <= VDN_XML_MAX_DEPTH);
    for (; n; n = n->next) {
        CHECK(n->name && n->name[0]);
        CHECK(n->text);
        check_tree(n->child, depth + 1);
    }
}

/* Returns 1 if the input parsed as XML. */
static int run_one(const unsigned char *data, size_t size) {
    char err[1024];
    err[0] = 0;
    vdn_xml_node *root = vdn_xml_parse((const char *)data, size, err, sizeof err);
    if (root) {
        check_tree(root, 1);
        vdn_xml_free(root);
    } else {
        CHECK(err[0]);
    }
    vdn_s3_list_page page;
    err[0] = 0;
    if (vdn_s3_parse_list((const char *)data, size, &page, err, sizeof err) == 0) {
        CHECK(!page.truncated || page.next_token);
        for (size_t i = 0; i < page.n; i++)
            CHECK(page.objects[i].key && page.objects[i].key[0]);
        vdn_s3_list_page_free(&page);
    } else {
        CHECK(err[0]);
        CHECK(page.n == 0 && page.objects == NULL);
    }
    char *id = NULL;
    err[0] = 0;
    if (vdn_s3_parse_upload_id((const char *)data, size, &id, err, sizeof err) == 0)
        CHECK(id && id[0]);
    else
        CHECK(err[0] && !id);
    free(id);
    char code[64], msg[128];
    vdn_s3_parse_error((const char *)data, size, code, sizeof code, msg, sizeof msg);
    CHECK(strlen(code) < sizeof code && strlen(msg) < sizeof msg);
    (void)vdn_s3_check_complete((const char *)data, size, err, sizeof err);
    return root != NULL;
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size) {
    run_one(data, size);
    return 0;
}

#ifdef VDN_FUZZ_REPLAY_MAIN
int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: replay_s3_xml CORPUS_DIR\n");
        return 2;
    }
    DIR *d = opendir(argv[1]);
    if (!d) {
        fprintf(stderr, "replay_s3_xml: cannot open %s\n", argv[1]);
        return 1;
    }
    int files = 0, bad = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.') continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", argv[1], de->d_name);
        FILE *f = fopen(path, "rb");
        if (!f) continue;
        static unsigned char buf[1 << 20];
        size_t n = fread(buf, 1, sizeof buf, f);
        fclose(f);
        int parsed = run_one(buf, n);
        files++;
        int is_list =
            !strncmp(de->d_name, "good_list_", 10) || !strncmp(de->d_name, "bad_list_", 9);
        if (!strncmp(de->d_name, "bad_", 4) && !is_list && parsed) {
            fprintf(stderr, "FAIL %s: malformed input was accepted\n", de->d_name);
            bad++;
        }
        if (!strncmp(de->d_name, "good_", 5) && !parsed) {
            fprintf(stderr, "FAIL %s: well-formed input was rejected\n", de->d_name);
            bad++;
        }
        if (is_list) {
            vdn_s3_list_page page;
            char err[1024] = "";
            int ok = vdn_s3_parse_list((const char *)buf, n, &page, err, sizeof err) == 0;
            if (ok) vdn_s3_list_page_free(&page);
            if (ok != (de->d_name[0] == 'g')) {
                fprintf(stderr, "FAIL %s: list page %s %s\n", de->d_name,
                        ok ? "accepted" : "rejected:", err);
                bad++;
            } else if (!ok) {
                printf("  %s rejected as expected: %s\n", de->d_name, err);
            }
        }
    }
    closedir(d);
    printf("replay_s3_xml: %d corpus files, %d failures\n", files, bad);
    return files > 0 && bad == 0 ? 0 : 1;
}
#endif
