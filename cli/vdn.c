/* vdn: one CLI for everything a user does, like git. This file only dispatches (after registering
 * the backends this build has, so every command can open a "cuda" device). */
#include <stdio.h>
#include <string.h>

#include "backends.h"
#include "commands.h"
#include "env.h"
#include "engine.h" /* VDN_ENGINE_VERSION */

typedef struct {
    const char *name;
    int (*fn)(int, char **);
    const char *help;
} command;

static const command commands[] = {
#ifdef VDN_FARM
    {"up", vdn_cmd_up, "start coordinator + local worker + SQLite + file store in one directory"},
    {"submit", vdn_cmd_submit, "submit a batch of renders from a JSONL file"},
    {"status", vdn_cmd_status,
     "show a batch, a job, or everything (--db FILE reads SQLite offline)"},
    {"ls", vdn_cmd_ls, "list batches"},
    {"watch", vdn_cmd_watch, "live progress of a batch"},
    {"cancel", vdn_cmd_cancel, "cancel a batch or job"},
    {"retry", vdn_cmd_retry, "retry failed jobs of a batch or a job"},
    {"logs", vdn_cmd_logs, "events and attempts of a job"},
    {"workers", vdn_cmd_workers, "list workers"},
    {"drain", vdn_cmd_drain, "let a worker finish its job and take no more"},
    {"coordinator", vdn_cmd_coordinator, "run the coordinator daemon"},
    {"worker", vdn_cmd_worker, "run a worker daemon"},
    {"keygen", vdn_cmd_keygen, "make a CURVE key pair for a worker, client or coordinator"},
#endif
    {"store", vdn_cmd_store, "put/get/list objects in a file:// or s3:// store"},
    {"render", vdn_cmd_render, "render one request in this process"},
    {"ckpt", vdn_cmd_ckpt, "make random checkpoints in the released layouts (ckpt init)"},
    {"inspect", vdn_cmd_inspect, "show what a checkpoint holds"},
    {"decode", vdn_cmd_decode, "decode latents into an mp4 with the released VAEs"},
    {"bench", vdn_cmd_bench, "benchmark the engine (whole model, decoders, text encoder, ops)"},
    {"encode", vdn_cmd_encode,
     "encode a text prompt into a prompt cache (tokenizer + text encoder)"},
    {"tokenize", vdn_cmd_tokenize, "token ids of JSON-string lines (the prompt tokenizer)"},
#ifdef VDN_FARM
    {"eval", vdn_cmd_eval, "evaluation suites, sweeps and reports"},
#endif
};

static void usage(FILE *f) {
    fprintf(f, "usage: vdn COMMAND [ARGS]   (vdn COMMAND --help for details)\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof *commands; i++)
        fprintf(f, "  %-12s %s\n", commands[i].name, commands[i].help);
}

int main(int argc, char **argv) {
    cli_env_log_level();
    if (vdn_backends_register() != 0) {
        fprintf(stderr, "vdn: the op layer's backend registry is full\n");
        return 1;
    }
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") ||
        !strcmp(argv[1], "help")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "version")) {
        printf("vdn %s\n", VDN_ENGINE_VERSION);
        return 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof *commands; i++)
        if (!strcmp(argv[1], commands[i].name)) return commands[i].fn(argc - 1, argv + 1);
#ifndef VDN_FARM
    fprintf(stderr,
            "vdn: unknown command '%s' (this build has the engine's commands only: it was "
            "configured with -DVDN_FARM=OFF)\n\n",
            argv[1]);
#else
    fprintf(stderr, "vdn: unknown command '%s'\n\n", argv[1]);
#endif
    usage(stderr);
    return 2;
}
