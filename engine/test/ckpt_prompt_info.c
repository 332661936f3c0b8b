/* Test helper: load a prompt cache with the engine's reader and print what it holds as JSON
 * (or the error, exit 1). Usage: ckpt_prompt_info FILE [TEXT_DIM] */
#include <stdio.h>
#include <stdlib.h>

#include "prompt.h"
#include "vdn_util.h"

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    vdn_prompt p;
    char err[VDN_ERR_LEN];
    if (vdn_prompt_load(argv[1], argc > 2 ? atoi(argv[2]) : 0, &p, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    double sum = 0;
    for (int i = 0; i < p.n_text * p.text_dim; i++)
        sum += p.embeds[i];
    double ksum = 0;
    for (int i = 0; i < p.n_keyframes * 24 * p.kf_h * p.kf_w; i++)
        ksum += p.keyframes[i];
    int tag_sum = 0;
    for (int i = 0; i < p.n_text; i++)
        tag_sum += p.tags[i];
    printf("{\"n_text\": %d, \"text_dim\": %d, \"tag_sum\": %d, \"embed_sum\": %.9g, "
           "\"n_keyframes\": %d, \"first_is_last\": %d, \"kf_h\": %d, \"kf_w\": %d, "
           "\"keyframe_sum\": %.9g, \"height\": %d, \"width\": %d}\n",
           p.n_text, p.text_dim, tag_sum, sum, p.n_keyframes, p.n_keyframes ? p.anchor_last[0] : -1,
           p.kf_h, p.kf_w, ksum, p.height, p.width);
    vdn_prompt_free(&p);
    return 0;
}
