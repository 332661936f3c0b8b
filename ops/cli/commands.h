/* Every `vdn` subcommand: `int vdn_cmd_X(int argc, char **argv)` with argv[0] = "X".
 * Each is implemented by the folder that owns the capability; ops/cli/vdn.c only dispatches. */
#ifndef VDN_COMMANDS_H
#define VDN_COMMANDS_H

/* engine/ */
int vdn_cmd_ckpt(int argc, char **argv);    /* vdn ckpt init ... */
int vdn_cmd_inspect(int argc, char **argv); /* vdn inspect CKPT */
int vdn_cmd_render(int argc, char **argv);  /* vdn render ... */
/* kernels/ */
int vdn_cmd_bench(int argc, char **argv); /* vdn bench ... (CUDA) */
/* coordinator/ */
int vdn_cmd_coordinator(int argc, char **argv);
int vdn_cmd_submit(int argc, char **argv);
int vdn_cmd_status(int argc, char **argv);
int vdn_cmd_ls(int argc, char **argv);
int vdn_cmd_watch(int argc, char **argv);
int vdn_cmd_cancel(int argc, char **argv);
int vdn_cmd_retry(int argc, char **argv);
int vdn_cmd_logs(int argc, char **argv);
int vdn_cmd_workers(int argc, char **argv);
int vdn_cmd_drain(int argc, char **argv);
int vdn_cmd_up(int argc, char **argv);
int vdn_cmd_keygen(int argc, char **argv);
/* worker/ */
int vdn_cmd_worker(int argc, char **argv);
int vdn_cmd_store(int argc, char **argv); /* vdn store put|get|ls|rm URI ... */
/* text/ */
int vdn_cmd_tokenize(int argc, char **argv); /* vdn tokenize < lines.jsonl */
int vdn_cmd_encode(int argc, char **argv);   /* vdn encode TEXT -o CACHE */
/* vae/ */
int vdn_cmd_decode(int argc, char **argv); /* vdn decode LATENTS -o CLIP.mp4 */
/* eval/ */
int vdn_cmd_eval(int argc, char **argv); /* vdn eval suite|sweep|report ... */

#endif
