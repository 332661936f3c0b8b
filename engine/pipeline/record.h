/* The run record written beside every render (PREFIX.json): what produced the output, so that a
 * result can be reproduced and compared (engine, backend, checkpoint identity, resolved config,
 * request, variant, seed, sigma grids, per-NFE and total seconds, wall-clock start/end). */
#ifndef VDN_RECORD_H
#define VDN_RECORD_H

#include <stddef.h>
#include <stdint.h>

#include "backend.h"
#include "config.h"
#include "engine.h"

typedef struct {
    const char *backend;
    const char *precision; /* "bf16" | "fp8" (NULL: not written) */
    const char *ckpt_identity, *ckpt_layout;
    int n_adapters;
    const char *const *adapters;
    const vdn_config *cfg;
    const vdn_render_request *req;
    int pixel_frames, latent_frames, audio_latents, lat_h, lat_w, n_text, n_keyframes;
    const vdn_attn_plan *plan;
    const char *noise_source; /* "seed" or the noise file path */
    float video_shift, audio_shift;
    const float *sigma_video, *sigma_audio;
    int n_sigma;
    const double *nfe_seconds;
    int n_nfe;
    int resumed_from_step; /* NFEs taken from a snapshot (their nfe_seconds are 0), 0 = none */
    double total_seconds, wall_start, wall_end;
    double setup_seconds;  /* start to the first NFE: prompt, sequence, noise, backend setup */
    double output_seconds; /* unpatchify + writing PREFIX.safetensors (the record not counted) */
    const char *const *warnings; /* request outside the official range (vdn_request_warnings) */
    int n_warnings;
    const char *output; /* PREFIX.safetensors */
} vdn_record;

/* JSON text of the record (malloc'd), or NULL on allocation failure. */
char *vdn_record_json(const vdn_record *r);
int vdn_record_write(const char *path, const vdn_record *r, char *err, size_t errlen);

#endif
