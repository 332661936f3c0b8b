#!/bin/sh
# `vdn render --ranks P` (the forward sharded over P in-process CPU ranks) writes the same latents
# as the unsharded render, for t2va and keyframe (fl2va) prompts, vdn and dense variants. (The
# forward's pieces and passes, vdn_dit_opts, are checked at the DiT: engine_dit_opts_cpu.)
# usage: render_ranks.sh VDN WORKDIR
set -eu
vdn=$1
dir=$2
rm -rf "$dir" && mkdir -p "$dir" && cd "$dir"
"$vdn" ckpt init --preset tiny --vdn --out ck >/dev/null
render() { # prompt variant ranks out
    "$vdn" render --checkpoint ck --prompt-cache "ck/$1" --frames 39 --height 128 --width 128 \
        --steps 2 --seed 11 --variant "$2" --ranks "$3" --out "$4" --save-latents --cpu --quiet \
        2>/dev/null
}
for prompt in prompt.safetensors prompt_fl2va.safetensors; do
    for variant in vdn dense; do
        render $prompt $variant 1 plain
        for P in 3 7; do
            render $prompt $variant $P sharded
            cmp plain.safetensors sharded.safetensors ||
                { echo "FAIL: $prompt $variant --ranks $P differs from the plain render"; exit 1; }
            echo "ok: $prompt $variant --ranks $P = plain"
        done
    done
done
