/* Text prompts into prompt caches: tokenizer + text encoder of one checkpoint, and the farm's
 * content-addressed cache of encoded prompts in the object store.
 *
 * A cache entry's key is the SHA-256 of the encoder's identity (config, shard headers, layer),
 * its precision (bf16 or fp8) and the prompt's token ids (with pictures: also their bytes' hashes,
 * the canvas asked for, the video VAE's identity and the image processor's settings):
 * "prompt-cache/<sha>.safetensors". The same prompt under the same encoder at the same precision is
 * encoded once and reused by every later job, in any batch; a different encoder, precision or
 * tokenization is a different key (bf16 keys are those written before fp8 existed, see key_of). The
 * file is an ordinary prompt cache (prompt_embeds bf16 [L, hidden], text_token_tags all 1, the
 * prompt, the encoder's identity, layer and precision in the metadata). */
#ifndef VDN_PROMPT_TEXT_H
#define VDN_PROMPT_TEXT_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "engine.h" /* vdn_precision */
#include "prompt_pictures.h"
#include "store.h"

struct vdn_dev;

#define VDN_PROMPT_CACHE_PREFIX "prompt-cache/"
/* A prompt's text longer than this is refused before it is tokenized (the tokenizer's work and
 * memory grow with it; any text the coordinator's --max-prompt-chars 16384 lets through fits). */
#define VDN_TEXT_MAX_PROMPT_BYTES (64 * 1024)

typedef struct vdn_text_prompts vdn_text_prompts;

/* How the text prompts open; zeroed: the defaults. The command layer fills it (cli/: its flags,
 * and the environment variables the docs name), never the library. */
typedef struct {
    const char *backend;     /* "cpu", "cuda" or NULL (the GPU when there is one) */
    int layer;               /* 0: the default (hidden_states[50]) */
    vdn_precision precision; /* the encoder's (encoder.h), at every load and in every key */
    /* The keep policy (vdn_text_prompts_cached): keep 0 releases the encoder after every encode
     * on a caller's device; keep 1 leaves it there while the device still reports keep_free_gib
     * GiB free with it loaded (VDN_TEXT_ENCODER_KEEP_FREE_GIB=G in the command's environment). */
    int keep;
    double keep_free_gib;
    /* tests (VDN_TEST_TEXT_ENCODE_DELAY_MS to the commands): every encode takes at least this
     * long, spread over the encoder's layers and cancellable (encoder.h vdn_text_run_opts), so
     * tests can make misses overlap, or cancel a long encode, on a tiny checkpoint */
    int test_encode_delay_ms;
    /* Single flight across processes too (a worker's renderer processes, worker/renderer.h): a
     * miss is encoded by one process at a time per key, the others wait for it (an flock on
     * text-flight-HASH.lock in this folder, released by the kernel however the holder ends,
     * removed when the flight lands). NULL: this process only. */
    const char *flight_dir;
} vdn_text_prompts_opts;

/* ckpt: a checkpoint holding tokenizer/ and text_encoder/ (directly, or in base/ for a VDN
 * checkpoint). The encoder's weights are loaded on the first encode, not here. o NULL: the
 * defaults. */
vdn_text_prompts *vdn_text_prompts_open(const char *ckpt, const vdn_text_prompts_opts *o, char *err,
                                        size_t errlen);
void vdn_text_prompts_close(vdn_text_prompts *p);
const char *vdn_text_prompts_identity(const vdn_text_prompts *p); /* the encoder's */
vdn_precision vdn_text_prompts_precision(const vdn_text_prompts *p);
/* The longest prompt the encoder takes (text_config.max_position_embeddings), in tokens. */
int64_t vdn_text_prompts_max_tokens(const vdn_text_prompts *p);

/* The prompt's pictures (prompt_pictures.h vdn_pictures_of, with this checkpoint's VAE and image
 * processor), read once per job: the calls below take them. vdn_pictures_free after. */
int vdn_text_prompts_pictures(const vdn_text_prompts *p, const vdn_prompt_input *in,
                              vdn_pictures *pics, char *err, size_t errlen);

/* In the calls below, pics are in's pictures from vdn_text_prompts_pictures; NULL for a prompt
 * without pictures (one that names pictures is then refused). */

/* The store key of the prompt's cache entry; *tokens (optional) gets the text's token count. */
int vdn_text_prompts_key(vdn_text_prompts *p, const vdn_prompt_input *in, const vdn_pictures *pics,
                         char *key, size_t keylen, int *tokens, char *err, size_t errlen);
/* Encode the prompt into a prompt cache file at path. */
int vdn_text_prompts_write(vdn_text_prompts *p, const vdn_prompt_input *in,
                           const vdn_pictures *pics, const char *path, char *err, size_t errlen);

/* Where a miss encodes. A farm worker passes the job's first GPU: dev is that GPU's engine
 * device (engine.h vdn_engine_device), so the encoder's memory counts with the DiT's there, and
 * the caller holds it (one thread at a time) for the call. gpu is what logs and run records call
 * it (the worker's nvidia-smi index; -1: the CPU slot). dev NULL: the instance's own device (the
 * backend given at open), as `vdn encode` uses. */
typedef struct {
    struct vdn_dev *dev;
    int gpu;
    /* the job's cancel flag (core/cancel.h; NULL: none): a miss's encode stops between the
     * encoder's layers when it is set, with "cancelled", and its encoder is freed */
    const atomic_int *cancel;
} vdn_text_place;

/* What the farm did for one job's text prompt (goes into its run record). */
typedef struct {
    char key[160];
    int hit; /* 1: reused from the store, 0: encoded here and stored */
    int tokens;
    const char *precision; /* "bf16" | "fp8": the encoder's, part of the key */
    double seconds; /* tokenize + fetch or encode + upload (+ waiting for another job's encode) */
    int waited;     /* 1: another job (of this process, or one sharing its flights) was encoding it;
                       this one took its result */
    int gpu;        /* the place's gpu */
    /* a miss only: */
    char device[32];     /* the op-layer device it encoded on ("cuda:2", "cpu") */
    int loaded;          /* 1: the encoder was loaded for it (0: it was resident there) */
    int kept;            /* 1: it stays resident on that device afterwards (the keep policy) */
    double load_seconds; /* reading the encoder onto the device */
    /* on failure: 1 the store's lookup or fetch failed, 2 the upload of the encoding failed, 0
     * neither (the encode, or the tokenizer) */
    int store_failed;
    vdn_pictures pictures; /* the keyframe pictures' identity (vdn_pictures_identity: no canvas
                              pictures to free; n 0: a text prompt) */
} vdn_text_cache_info;

/* The cache entry of text in st, fetched to local_path; on a miss, encoded at `at` (NULL: the
 * instance's own device) to local_path and uploaded.
 *
 * Single flight: while one call of this instance encodes a key of a store, every other call
 * missing that key waits for it and then fetches its result (a hit with waited = 1), so
 * concurrent jobs with one prompt encode it once; other keys go on meanwhile, each on its own
 * device. If the encode fails, a waiter tries it itself. Processes that share a flight folder
 * (vdn_text_prompts_opts.flight_dir) take turns the same way; others may encode the same key at
 * once, which the store's atomic publish makes harmless (the same bytes under the same key).
 *
 * Memory: the encoder is loaded on at->dev for the miss and released after it, so the render
 * that follows has the device to itself (real sizes: 46 GiB of encoder beside 66 GiB of DiT
 * weights and 32 GiB of H3 activations do not fit a 141 GB H200 together). With the keep policy
 * (vdn_text_prompts_opts.keep) it stays resident on that device when the device still reports at
 * least keep_free_gib GiB free with it loaded (docs/cluster.md). */
int vdn_text_prompts_cached(vdn_text_prompts *p, const vdn_text_place *at, vdn_store *st,
                            const vdn_prompt_input *in, const vdn_pictures *pics,
                            const char *local_path, vdn_text_cache_info *info, char *err,
                            size_t errlen);
long vdn_text_prompts_encodes(const vdn_text_prompts *p); /* encodes run by this instance */
long vdn_text_prompts_loads(const vdn_text_prompts *p);   /* encoder loads onto a device */
int vdn_text_prompts_resident(const vdn_text_prompts *p); /* devices holding an encoder now */
/* Frees the encoder kept resident on dev, if any (before dev closes). */
void vdn_text_prompts_release(vdn_text_prompts *p, struct vdn_dev *dev);

/* Adds {"text_prompt": {"cache": "hit"|"miss", "key", "tokens", "encoder", "precision",
 * "seconds", "waited", and on a miss "encoded_on": {"gpu", "device", "loaded", "kept",
 * "load_seconds"}}} to a run record JSON file in place. */
int vdn_text_cache_info_to_record(const char *record_path, const vdn_text_cache_info *info,
                                  const char *encoder_identity, char *err, size_t errlen);

#endif
