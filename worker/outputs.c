/* Which store keys an attempt writes: the ones the ASSIGN names, matched by suffix, or keys
 * derived from the output prefix. Kept apart from attempt.c so tests need no engine. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attempt.h"

static int ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && !strcmp(s + n - m, suffix);
}

int vdn_attempt_output_keys(const vdn_assignment *s, const char **latents_key,
                            const char **record_key, char *buf, size_t buflen, char *err,
                            size_t errlen) {
    *latents_key = *record_key = NULL;
    if (s->nkeys == 0) {
        /* No keys from the coordinator: derive them from the prefix, as `vdn render` does. */
        char prefix[1024];
        if (s->output_prefix && *s->output_prefix)
            snprintf(prefix, sizeof prefix, "%s", s->output_prefix);
        else
            snprintf(prefix, sizeof prefix, "jobs/%llu/out", (unsigned long long)s->job_id);
        size_t n = strlen(prefix);
        if (2 * n + 32 > buflen)
            return vdn_fail(err, errlen, "ASSIGN output_prefix: longer than %zu bytes",
                            buflen / 2 - 32);
        snprintf(buf, buflen, "%s.safetensors", prefix);
        snprintf(buf + n + 13, buflen - n - 13, "%s.json", prefix);
        *latents_key = buf;
        *record_key = buf + n + 13;
        return 0;
    }
    for (int i = 0; i < s->nkeys; i++) {
        const char **slot = ends_with(s->keys[i], ".json")          ? record_key
                            : ends_with(s->keys[i], ".safetensors") ? latents_key
                                                                    : NULL;
        if (!slot)
            return vdn_fail(err, errlen,
                            "ASSIGN output_keys[%d] '%s': expected a key ending in .safetensors "
                            "(latents) or .json (run record)",
                            i, s->keys[i]);
        if (*slot)
            return vdn_fail(err, errlen, "ASSIGN output_keys: '%s' and '%s' name the same output",
                            *slot, s->keys[i]);
        *slot = s->keys[i];
    }
    if (!*latents_key || !*record_key)
        return vdn_fail(err, errlen,
                        "ASSIGN output_keys: expected one .safetensors and one .json key, got %d "
                        "key(s)",
                        s->nkeys);
    return 0;
}
