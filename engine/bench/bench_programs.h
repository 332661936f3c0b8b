/* The whole-program benchmarks of engine/bench/ that `vdn bench` runs (cli/cmd_bench.c): each
 * takes its subcommand's arguments (argv[0] = the subcommand) and returns the exit status. */
#ifndef VDN_BENCH_PROGRAMS_H
#define VDN_BENCH_PROGRAMS_H

/* `vdn bench text-encoder ...` (bench_text.c): one prompt through the Qwen3-VL text shapes */
int vdn_text_bench(int argc, char **argv);
/* `vdn bench decode ...` (bench_decode.c): the video and audio decoders at a chosen size */
int vdn_vae_bench(int argc, char **argv);

#endif
