/* `vdn bench`'s command lines (cli/cmd_bench.c, cli/bench_args.c). */
#ifndef VDN_BENCH_CLI_H
#define VDN_BENCH_CLI_H

#include "bench.h"

/* Options of `vdn bench` (argv[0] = "bench"): 0, or -1 after a message naming the option and
 * what it expects. *help = 1 when --help was given. */
int vdn_bench_parse(int argc, char **argv, vdn_bench_opts *o, int *help);
/* One integer option's value in [lo, hi]: 0, or -1 after "CMD: OPT expects an integer in [lo, hi],
 * got 'S'" on stderr. */
int vdn_bench_int_arg(const char *cmd, const char *opt, const char *s, int lo, int hi, int *out);

/* `vdn bench --whole ...`, `vdn bench decode ...` (argv[0] = "decode"), `vdn bench text-encoder
 * ...` (argv[0] = "text-encoder"): parse, run, and return the exit status */
int vdn_bench_whole(int argc, char **argv);
int vdn_vae_bench(int argc, char **argv);
int vdn_text_bench(int argc, char **argv);
/* `vdn bench encode ...` (argv[0] = "encode"), `vdn bench --clip ...` (cli/bench_clip_args.c) */
int vdn_encode_bench(int argc, char **argv);
int vdn_clip_bench(int argc, char **argv);

#endif
