/* The environment variables the commands read (env.h). */
#include "env.h"

#include <stdlib.h>
#include <string.h>

#include "encoder_init.h"
#include "vdn_util.h"

void cli_env_log_level(void) {
    const char *e = getenv("VDN_LOG_LEVEL");
    static const char *names[] = {"debug", "info", "warn", "error"};
    for (int i = 0; e && i < 4; i++)
        if (!strcmp(e, names[i])) vdn_log_set_level(VDN_LOG_DEBUG + i);
}

void cli_env_text_prompts(vdn_text_prompts_opts *o) {
    const char *keep = getenv("VDN_TEXT_ENCODER_KEEP_FREE_GIB");
    if (keep && *keep) {
        char *end = NULL;
        double g = strtod(keep, &end);
        if (!end || *end || !(g >= 0))
            VDN_WARN("VDN_TEXT_ENCODER_KEEP_FREE_GIB='%s' is not a number of GiB >= 0: ignored "
                     "(the encoder is released after each encode)",
                     keep);
        else
            o->keep = 1, o->keep_free_gib = g;
    }
    const char *delay = getenv("VDN_TEST_TEXT_ENCODE_DELAY_MS");
    if (delay) o->test_encode_delay_ms = atoi(delay);
}

const char *cli_env_tokenizer_json(void) {
    const char *env = getenv("VDN_TOKENIZER_JSON");
    return env && env[0] ? env : vdn_default_tokenizer_json();
}

const char *cli_env_base_dir(void) {
    const char *env = getenv("VDN_BASE_DIR");
    return env && env[0] ? env : NULL;
}
