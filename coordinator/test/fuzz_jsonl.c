/* libFuzzer target for the JSONL request parser: any bytes give either requests that pass
 * validation and survive the JSON round trip, or at least one error naming the input. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "client.h"
#include "spec.h"
#include "vdn_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A job names a prompt cache or a prompt text (or both), so either may be NULL. */
static int same_text(const char *a, const char *b) {
    return (!a && !b) || (a && b && !strcmp(a, b));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    vdn_job_spec *jobs;
    int n;
    vdn_errlist errs = {0};
    int rc = vdn_jsonl_parse((const char *)data, size, "fuzz.jsonl", "/base", 0, &jobs, &n, &errs);
    if (rc) {
        VDN_ASSERT(errs.n > 0 && jobs == NULL && n == 0);
        for (int i = 0; i < errs.n; i++)
            VDN_ASSERT(strstr(errs.lines[i], "fuzz.jsonl") != NULL);
        vdn_errlist_free(&errs);
        return 0;
    }
    VDN_ASSERT(errs.n == 0 && n > 0);
    for (int i = 0; i < n; i++) {
        vdn_errlist v = {0};
        VDN_ASSERT(vdn_job_spec_validate(&jobs[i], &v, "fuzz") == 0);
        char *json = vdn_job_spec_to_json(&jobs[i]);
        vdn_job_spec *back;
        int m;
        VDN_ASSERT(vdn_jsonl_parse(json, strlen(json), "stored", NULL, 0, &back, &m, &v) == 0);
        VDN_ASSERT(m == 1 && back[0].seed == jobs[i].seed && back[0].steps == jobs[i].steps &&
                   same_text(back[0].prompt_cache, jobs[i].prompt_cache) &&
                   same_text(back[0].prompt, jobs[i].prompt));
        vdn_jobs_free(back, m);
        free(json);
    }
    vdn_jobs_free(jobs, n);
    return 0;
}
