/* Suite manifest parser: a valid manifest parses into the expected fields; each malformed
 * line is refused with a message naming the file, the line, the field and what was expected. */
#include <stdio.h>
#include <string.h>

#include "suite.h"
#include "vdn_util.h"
#include "../../ops/test/check.h"

#define GOOD                                                                                       \
    "\"prompt\":\"x\",\"prompt_cache\":\"c.st\",\"seed\":1,\"frames\":22,\"height\":32,\"width\":" \
    "32"

#define PIC "\"prompt\":\"x\",\"seed\":1,\"frames\":22,\"height\":32,\"width\":32"

typedef struct {
    const char *text;
    const char *want[3]; /* substrings the error must contain */
} bad_case;

static const bad_case bad[] = {
    {"{\"id\":\"a\",\"mode\":\"t2va\"," GOOD "}\n{\"id\":\"a\",\"mode\":\"t2va\"," GOOD "}",
     {"m.jsonl:2", "'id'", "already used on line 1"}},
    {"{\"id\":\"a\",\"mode\":\"t2v\"," GOOD "}",
     {"m.jsonl:1", "'mode'", "t2va, i2va, l2va or fl2va"}},
    {"{\"id\":\"a\",\"mode\":\"t2va\"}", {"m.jsonl:1", "missing field 'prompt'", NULL}},
    {"\n\n{\"id\":\"a b\",\"mode\":\"t2va\"," GOOD "}", {"m.jsonl:3", "'id'", "[A-Za-z0-9._-]"}},
    {"{\"id\":\"..\",\"mode\":\"t2va\"," GOOD "}", {"'id'", NULL, NULL}},
    {"{\"id\":7,\"mode\":\"t2va\"," GOOD "}", {"'id'", "expected a string, got a number", NULL}},
    {"{\"id\":\"a\",\"mode\":\"t2va\",\"colour\":1," GOOD "}",
     {"unknown field 'colour'", NULL, NULL}},
    {"{\"id\":\"a\",\"mode\":\"t2va\",\"prompt\":\"x\",\"prompt_cache\":\"c\",\"seed\":1.5,"
     "\"frames\":22,\"height\":32,\"width\":32}",
     {"'seed'", "expected an integer", "1.5"}},
    {"{\"id\":\"a\",\"mode\":\"t2va\",\"prompt\":\"x\",\"prompt_cache\":\"c\",\"seed\":-3,"
     "\"frames\":22,\"height\":32,\"width\":32}",
     {"'seed'", "[0,", NULL}},
    {"{\"id\":\"a\",\"mode\":\"t2va\",\"prompt\":\"x\",\"prompt_cache\":\"c\",\"seed\":\"1\","
     "\"frames\":22,\"height\":32,\"width\":32}",
     {"'seed'", "got a string", NULL}},
    {"{\"id\":\"a\",\"mode\":\"t2va\",\"prompt\":\"x\",\"prompt_cache\":\"c\",\"seed\":1,"
     "\"frames\":0,\"height\":32,\"width\":32}",
     {"'frames'", NULL, NULL}},
    {"{\"id\":\"a\",\"mode\":\"t2va\",\"prompt\":\"x\",\"prompt_cache\":\"c\",\"seed\":1,"
     "\"frames\":22,\"height\":48,\"width\":32}",
     {"multiples of 32", "48x32", NULL}},
    {"{\"id\":\"a\",\"mode\":\"t2va\",\"prompt\":\"x\",\"prompt_cache\":\"\",\"seed\":1,\"frames\":"
     "22,\"height\":32,\"width\":32}",
     {"'prompt_cache'", "empty", NULL}},
    {"{\"id\":\"a\",\"mode\":\"fl2va\",\"prompt\":\"x\",\"seed\":1,\"frames\":22,\"height\":32,"
     "\"width\":32}",
     {"missing field 'prompt_cache'", NULL, NULL}},
    {"{\"id\":\"a\",\"mode\":\"t2va\",\"prompt\":\"\",\"seed\":1,\"frames\":22,\"height\":32,"
     "\"width\":32}",
     {"missing field 'prompt_cache'", NULL, NULL}},
    {"{\"id\":\"a\",\"mode\":\"t2va\",\"keyframes\":\"k\"," GOOD "}",
     {"'keyframes'", "t2va takes no keyframes", NULL}},
    {"{\"id\":\"a\",\"mode\":\"t2va\"", {"m.jsonl:1", "not valid JSON", NULL}},
    {"{\"id\":\"a\",\"mode\":\"t2va\"," GOOD "} extra", {"text after the JSON object", NULL, NULL}},
    {"[1]", {"expected a JSON object, got an array", NULL, NULL}},
    {"{\"id\":\"a\",\"id\":\"b\",\"mode\":\"t2va\"," GOOD "}", {"'id' appears twice", NULL, NULL}},
    {"# only a comment\n\n", {"no prompts", NULL, NULL}},
    /* keyframe pictures */
    {"{\"id\":\"a\",\"mode\":\"t2va\",\"first_frame\":\"f.png\"," PIC "}",
     {"'first_frame'", "t2va takes no keyframes", NULL}},
    {"{\"id\":\"a\",\"mode\":\"i2va\",\"first_frame\":\"f.png\"," GOOD "}",
     {"'first_frame'", "not with a 'prompt_cache'", NULL}},
    {"{\"id\":\"a\",\"mode\":\"i2va\",\"last_frame\":\"l.png\"," PIC "}",
     {"m.jsonl:1", "i2va takes first_frame only", "got last_frame only"}},
    {"{\"id\":\"a\",\"mode\":\"l2va\",\"first_frame\":\"f.png\",\"last_frame\":\"l.png\"," PIC "}",
     {"l2va takes last_frame only", "got both", NULL}},
    {"{\"id\":\"a\",\"mode\":\"fl2va\",\"first_frame\":\"f.png\"," PIC "}",
     {"fl2va takes both", "got first_frame only", NULL}},
    {"{\"id\":\"a\",\"mode\":\"i2va\",\"first_frame\":\"\"," PIC "}",
     {"'first_frame'", "empty string", NULL}},
    {"{\"id\":\"a\",\"mode\":\"i2va\",\"first_frame\":3," PIC "}",
     {"'first_frame'", "expected a string, got a number", NULL}},
    {"{\"id\":\"a\",\"mode\":\"i2va\",\"first_frame\":\"f.png\",\"keyframes\":\"k.st\"," PIC "}",
     {"'keyframes'", "has none", NULL}},
    {"{\"id\":\"a\",\"mode\":\"l2va\",\"last_frame\":\"l.png\",\"prompt\":\"\",\"seed\":1,"
     "\"frames\":22,\"height\":32,\"width\":32}",
     {"'prompt'", "encoded with the text", NULL}},
    {"{\"id\":\"a\",\"mode\":\"i2va\",\"prompt\":\"x\",\"seed\":1,\"frames\":22,\"height\":32,"
     "\"width\":32}",
     {"i2va needs its keyframes", "'first_frame'/'last_frame'", NULL}},
};

int main(void) {
    char err[VDN_ERR_LEN];
    vdn_suite s;
    const char *good =
        "# suite\n"
        "{\"id\":\"p001\",\"mode\":\"t2va\",\"prompt\":\"a "
        "cat\",\"prompt_cache\":\"caches/p001.st\","
        "\"seed\":42,\"frames\":22,\"height\":32,\"width\":64}\r\n"
        "\n"
        "{\"id\":\"p002\",\"mode\":\"fl2va\",\"prompt\":\"\",\"prompt_cache\":\"s3://b/p2.st\","
        "\"keyframes\":\"/abs/k.st\",\"seed\":9007199254740992,\"frames\":345,\"height\":768,"
        "\"width\":1344}\n";
    int rc = vdn_suite_parse(good, strlen(good), "dir/m.jsonl", &s, err, sizeof err);
    CHECK(rc == 0);
    if (rc == 0) {
        CHECK(s.n == 2);
        CHECK(!strcmp(s.items[0].id, "p001") && s.items[0].mode == VDN_MODE_T2VA);
        CHECK(s.items[0].line == 2 && s.items[1].line == 4);
        CHECK(s.items[0].seed == 42 && s.items[0].frames == 22 && s.items[0].width == 64);
        CHECK(s.items[0].keyframes == NULL && !strcmp(s.items[0].prompt, "a cat"));
        CHECK(s.items[1].mode == VDN_MODE_FL2VA && vdn_suite_mode_keyframes(s.items[1].mode) == 2);
        CHECK(s.items[1].seed == 9007199254740992ull);
        char *p = vdn_suite_resolve(&s, s.items[0].prompt_cache);
        CHECK(!strcmp(p, "dir/caches/p001.st"));
        free(p);
        p = vdn_suite_resolve(&s, s.items[1].prompt_cache);
        CHECK(!strcmp(p, "s3://b/p2.st"));
        free(p);
        p = vdn_suite_resolve(&s, s.items[1].keyframes);
        CHECK(!strcmp(p, "/abs/k.st"));
        free(p);
        /* writer -> parser round trip */
        char *line = vdn_suite_item_json(&s.items[1]);
        vdn_suite t;
        CHECK(vdn_suite_parse(line, strlen(line), "rt.jsonl", &t, err, sizeof err) == 0);
        if (t.n == 1) {
            CHECK(!strcmp(t.items[0].id, "p002") && t.items[0].seed == s.items[1].seed);
            CHECK(!strcmp(t.items[0].keyframes, "/abs/k.st") && t.items[0].height == 768);
            vdn_suite_free(&t);
        }
        free(line);
        vdn_suite_free(&s);
    } else {
        fprintf(stderr, "good manifest refused: %s\n", err);
    }
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        err[0] = 0;
        rc = vdn_suite_parse(bad[i].text, strlen(bad[i].text), "m.jsonl", &s, err, sizeof err);
        if (rc == 0) {
            fprintf(stderr, "bad case %zu accepted\n", i);
            failures++;
            vdn_suite_free(&s);
            continue;
        }
        for (int k = 0; k < 3 && bad[i].want[k]; k++)
            if (!strstr(err, bad[i].want[k])) {
                fprintf(stderr, "bad case %zu: error \"%s\" lacks \"%s\"\n", i, err,
                        bad[i].want[k]);
                failures++;
            }
    }
    /* a t2va line may be text alone (the farm encodes it); it round-trips without a cache */
    const char *text_only = "{\"id\":\"t\",\"mode\":\"t2va\",\"prompt\":\"a cat\\non a roof\","
                            "\"seed\":3,\"frames\":22,\"height\":32,\"width\":32}";
    rc = vdn_suite_parse(text_only, strlen(text_only), "t.jsonl", &s, err, sizeof err);
    CHECK(rc == 0, "%s", err);
    if (rc == 0) {
        CHECK(s.n == 1 && !s.items[0].prompt_cache &&
              !strcmp(s.items[0].prompt, "a cat\non a roof"));
        char *line = vdn_suite_item_json(&s.items[0]);
        vdn_suite t;
        CHECK(vdn_suite_parse(line, strlen(line), "rt.jsonl", &t, err, sizeof err) == 0, "%s", err);
        if (t.n == 1) {
            CHECK(!t.items[0].prompt_cache && !strcmp(t.items[0].prompt, "a cat\non a roof"));
            vdn_suite_free(&t);
        }
        free(line);
        vdn_suite_free(&s);
    }
    /* keyframe pictures with the text, no cache: paths resolve against the suite's folder */
    const char *pics = "{\"id\":\"k\",\"mode\":\"fl2va\",\"prompt\":\"a kite\","
                       "\"first_frame\":\"kf/k_first.png\",\"last_frame\":\"s3://b/k_last.png\","
                       "\"seed\":3,\"frames\":22,\"height\":32,\"width\":64}\n"
                       "{\"id\":\"l\",\"mode\":\"l2va\",\"prompt\":\"a gull\","
                       "\"last_frame\":\"/abs/l.webp\",\"seed\":4,\"frames\":22,\"height\":32,"
                       "\"width\":32}";
    rc = vdn_suite_parse(pics, strlen(pics), "d/p.jsonl", &s, err, sizeof err);
    CHECK(rc == 0, "%s", err);
    if (rc == 0) {
        CHECK(s.n == 2 && !s.items[0].prompt_cache && !s.items[0].keyframes);
        CHECK(!strcmp(s.items[0].first_frame, "kf/k_first.png"));
        CHECK(!strcmp(s.items[1].last_frame, "/abs/l.webp") && !s.items[1].first_frame);
        CHECK(vdn_suite_mode_first(s.items[0].mode) && vdn_suite_mode_last(s.items[0].mode));
        CHECK(!vdn_suite_mode_first(s.items[1].mode) && vdn_suite_mode_last(s.items[1].mode));
        char *p = vdn_suite_resolve(&s, s.items[0].first_frame);
        CHECK(!strcmp(p, "d/kf/k_first.png"));
        free(p);
        char *line = vdn_suite_item_json(&s.items[0]);
        vdn_suite t;
        CHECK(vdn_suite_parse(line, strlen(line), "rt.jsonl", &t, err, sizeof err) == 0, "%s", err);
        if (t.n == 1) {
            CHECK(!strcmp(t.items[0].first_frame, "kf/k_first.png"));
            CHECK(!strcmp(t.items[0].last_frame, "s3://b/k_last.png") && !t.items[0].prompt_cache);
            vdn_suite_free(&t);
        }
        free(line);
        vdn_suite_free(&s);
    }
    /* a missing file names the path */
    rc = vdn_suite_load("/nonexistent/suite.jsonl", &s, err, sizeof err);
    CHECK(rc != 0 && strstr(err, "/nonexistent/suite.jsonl"));
    if (failures) return 1;
    printf("suite parser: ok (%zu malformed cases refused with clear errors)\n",
           sizeof bad / sizeof *bad);
    return 0;
}
