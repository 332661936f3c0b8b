/* Checkpoint configs -> vdn_config.
 *
 * Base transformer config.json: diffusers (`MiniMaxH3Transformer3DModel`) and native
 * (`MiniMaxH3DiTModel`) key names are both accepted; the released native config carries both
 * spellings, which must then agree. Keys starting with '_' are bookkeeping; an unknown key is
 * logged and ignored; a known key with a wrong type or out-of-range value is an error naming the
 * file and key. Defaults exist only where the diffusers constructor has them and the released
 * file might leave them out (num_refiner_layers 2, rope_theta 10000, the three eps 1e-5).
 *
 * VDN hybrid_attention transform config (model_spec.json transforms[].config, version 2): the
 * engine implements delta_rule "vdn_solve", bridge "alpha", short_conv targets {k, v},
 * anchor_frames "both" | "none"; anything else is refused by name. */
#ifndef VDN_CKPT_CONFIG_H
#define VDN_CKPT_CONFIG_H

#include <stddef.h>

#include "config.h"

typedef enum { VDN_LAYOUT_DIFFUSERS = 0, VDN_LAYOUT_NATIVE = 1 } vdn_layout_kind;

/* Base config text (label names it in errors). Fills the base fields of cfg (has_vdn = 0,
 * sampler shifts 12/3) and the layout its _class_name says. */
int vdn_config_parse_base(const char *label, const char *text, size_t len, vdn_config *cfg,
                          vdn_layout_kind *layout, char *err, size_t errlen);

/* The hybrid transform's config object (JSON text of {"enable_softmax_gate": .., ...}) or a
 * whole transform entry {"type": "hybrid_attention", "version": 2, "config": {...}}. Fills the
 * VDN fields of cfg and sets has_vdn; ranks and conv sizes come from the branch tensors later. */
int vdn_config_parse_transform(const char *label, const char *text, size_t len, vdn_config *cfg,
                               char *err, size_t errlen);

/* Scheduler config (scheduler/scheduler_config.json): its "shift" (positive number) when
 * present; *shift is left alone when the key is absent. */
int vdn_config_parse_shift(const char *label, const char *text, size_t len, float *shift, char *err,
                           size_t errlen);

#endif
