/* `vdn eval`: suites, sweeps and reports. See docs/eval.md. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "suite.h"
#include "suite_init.h"
#include "sweep.h"
#include "variants.h"
#include "vdn_util.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: vdn eval suite init DIR --checkpoint CKPT [--prompts 103] [--frames N]\n"
            "                          [--height H] [--width W] [--seed S] [--text-dim D]\n"
            "       vdn eval suite check SUITE.jsonl\n"
            "       vdn eval sweep SUITE.jsonl --variants dense@50,vdn@8,... [...]  (--help)\n"
            "       vdn eval report SWEEP.json --out DIR [...]                      (--help)\n"
            "       vdn eval variants\n"
            "Variants: dense, vdn, vdn-no-anchors, window-only, vdn-additive, each NAME[@STEPS]\n"
            "(default 50 steps). Metrics, statistics and the report: docs/eval.md.\n");
}

static int int_arg(const char *flag, const char *v, int lo, int hi, int *out) {
    char *end;
    long x = v ? strtol(v, &end, 10) : 0;
    if (!v || *end || x < lo || x > hi) {
        fprintf(stderr, "vdn eval suite init: %s '%s': expected an integer in %d..%d\n", flag,
                v ? v : "", lo, hi);
        return -1;
    }
    *out = (int)x;
    return 0;
}

static int suite_init_main(int argc, char **argv) {
    vdn_suite_init_opts o = {.n_prompts = 103, .frames = 22, .height = 32, .width = 32};
    int seed = 0;
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int rc = 0;
        if (!strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--checkpoint") && v) {
            o.checkpoint = v, i++;
        } else if (!strcmp(a, "--prompts")) {
            rc = int_arg(a, v, 1, 100000, &o.n_prompts), i++;
        } else if (!strcmp(a, "--frames")) {
            rc = int_arg(a, v, 1, 100000, &o.frames), i++;
        } else if (!strcmp(a, "--height")) {
            rc = int_arg(a, v, 32, 16384, &o.height), i++;
        } else if (!strcmp(a, "--width")) {
            rc = int_arg(a, v, 32, 16384, &o.width), i++;
        } else if (!strcmp(a, "--seed")) {
            rc = int_arg(a, v, 0, 1 << 30, &seed), i++;
        } else if (!strcmp(a, "--text-dim")) {
            rc = int_arg(a, v, 1, 65536, &o.text_dim), i++;
        } else if (a[0] != '-' && !o.dir) {
            o.dir = a;
        } else {
            fprintf(stderr, "vdn eval suite init: unexpected argument '%s'\n", a);
            return 2;
        }
        if (rc) return 2;
    }
    if (!o.dir || (!o.checkpoint && !o.text_dim)) {
        usage(stderr);
        return 2;
    }
    o.seed = (uint64_t)seed;
    char err[VDN_ERR_LEN];
    if (vdn_suite_init(&o, err, sizeof err)) {
        fprintf(stderr, "vdn eval suite init: %s\n", err);
        return 1;
    }
    printf("suite: %s/suite.jsonl (%d prompts, %d frames, %dx%d)\n", o.dir, o.n_prompts, o.frames,
           o.width, o.height);
    return 0;
}

static int suite_check_main(int argc, char **argv) {
    if (argc < 3) {
        usage(stderr);
        return 2;
    }
    char err[VDN_ERR_LEN];
    vdn_suite s;
    if (vdn_suite_load(argv[2], &s, err, sizeof err)) {
        fprintf(stderr, "vdn eval suite check: %s\n", err);
        return 1;
    }
    int bad = 0, modes[4] = {0};
    for (int i = 0; i < s.n; i++) {
        modes[s.items[i].mode]++;
        const char *files[2] = {s.items[i].prompt_cache, s.items[i].keyframes};
        for (int k = 0; k < 2; k++) {
            if (!files[k] || strstr(files[k], "://")) continue;
            char *p = vdn_suite_resolve(&s, files[k]);
            FILE *f = fopen(p, "rb");
            if (!f) {
                fprintf(stderr, "%s:%d: %s '%s': no such file (%s)\n", s.path, s.items[i].line,
                        k ? "keyframes" : "prompt_cache", files[k], p);
                bad++;
            } else {
                fclose(f);
            }
            free(p);
        }
    }
    printf("%s: %d prompts (t2va %d, i2va %d, l2va %d, fl2va %d)%s\n", s.path, s.n, modes[0],
           modes[1], modes[2], modes[3], bad ? "" : ", every local file present");
    vdn_suite_free(&s);
    return bad ? 1 : 0;
}

int vdn_cmd_eval(int argc, char **argv) {
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (!strcmp(argv[1], "suite")) {
        if (argc >= 3 && !strcmp(argv[2], "init")) return suite_init_main(argc - 1, argv + 1);
        if (argc >= 3 && !strcmp(argv[2], "check")) return suite_check_main(argc - 1, argv + 1);
        usage(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "sweep")) {
        return vdn_eval_sweep_main(argc - 1, argv + 1);
    }
    if (!strcmp(argv[1], "report")) return vdn_eval_report_main(argc - 1, argv + 1);
    if (!strcmp(argv[1], "variants")) {
        const char *names[] = {"dense@50",       "vdn@50",      "vdn@8",        "vdn@4",
                               "vdn-no-anchors", "window-only", "vdn-additive", "vdn@8:fp8"};
        for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
            vdn_variant v;
            char err[VDN_ERR_LEN];
            if (vdn_variant_parse(names[i], &v, err, sizeof err) == 0)
                printf("%-18s engine variant %-15s %d NFE, %s\n", v.name, v.engine, v.steps,
                       v.precision);
        }
        return 0;
    }
    fprintf(stderr, "vdn eval: unknown subcommand '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
