/* Every `vdn` subcommand: `int vdn_cmd_X(int argc, char **argv)` with argv[0] = "X". All of them
 * live in cli/ (the app layer: argument parsing, help, output) and call the libraries below;
 * cli/vdn.c only dispatches. */
#ifndef VDN_COMMANDS_H
#define VDN_COMMANDS_H

/* the engine: checkpoints, renders, decoders, text, benchmarks, the object store */
int vdn_cmd_ckpt(int argc, char **argv);     /* vdn ckpt init ... (cmd_ckpt.c) */
int vdn_cmd_inspect(int argc, char **argv);  /* vdn inspect CKPT (cmd_ckpt.c) */
int vdn_cmd_render(int argc, char **argv);   /* vdn render ... (cmd_render.c) */
int vdn_cmd_decode(int argc, char **argv);   /* vdn decode LATENTS -o CLIP.mp4 */
int vdn_cmd_tokenize(int argc, char **argv); /* vdn tokenize < lines.jsonl */
int vdn_cmd_encode(int argc, char **argv);   /* vdn encode TEXT -o CACHE */
int vdn_cmd_bench(int argc, char **argv);    /* vdn bench ... */
int vdn_cmd_store(int argc, char **argv);    /* vdn store put|get|ls|rm URI ... */

/* the farm (builds with VDN_FARM) */
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
int vdn_cmd_worker(int argc, char **argv);
int vdn_cmd_eval(int argc, char **argv); /* vdn eval suite|sweep|report ... */

#endif
