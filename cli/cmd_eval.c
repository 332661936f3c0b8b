/* `vdn eval`: suites, sweeps and reports. See docs/eval.md. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <unistd.h>

#include "cli_common.h"
#include "env.h"
#include "commands.h"
#include "pictures.h"
#include "store.h"
#include "suite.h"
#include "suite_init.h"
#include "suite_keyframes.h"
#include "sweep.h"
#include "variants.h"
#include "vdn_util.h"

static void usage(FILE *f) {
    fprintf(
        f,
        "usage: vdn eval suite init DIR --checkpoint CKPT [--prompts 103] [--frames N]\n"
        "                          [--height H] [--width W] [--seed S] [--text-dim D]\n"
        "       vdn eval suite check SUITE.jsonl [--store URI]\n"
        "       vdn eval suite keyframes SUITE.jsonl --out DIR (--from SWEEP.json [--variant V]\n"
        "                                | --pictures PICDIR)\n"
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
    o.base_dir = cli_env_base_dir();
    char err[VDN_ERR_LEN];
    if (vdn_suite_init(&o, err, sizeof err)) {
        fprintf(stderr, "vdn eval suite init: %s\n", err);
        return 1;
    }
    printf("suite: %s/suite.jsonl (%d prompts, %d frames, %dx%d)\n", o.dir, o.n_prompts, o.frames,
           o.width, o.height);
    return 0;
}

/* One file named by a suite line: a local file must be there (a picture must also decode within
 * the workers' limits); a name that is no local file is looked up as a key in --store when
 * given; other URIs (s3://) are not checked (*unchecked counts them). 0, or 1 (bad). */
static int check_file(const vdn_suite *s, const vdn_suite_item *it, const char *field,
                      const char *name, int picture, vdn_store *st, int *pictures, int *unchecked) {
    char err[VDN_ERR_LEN] = "";
    char *p = vdn_suite_resolve(s, name);
    const char *local = !strncmp(p, "file://", 7) ? p + 7 : p;
    int bad = 0;
    vdn_eval_picture_info pi;
    if (strstr(local, "://")) {
        (*unchecked)++;
    } else if (access(local, F_OK) == 0) {
        bad = picture && vdn_eval_picture_check(local, &pi, err, sizeof err);
        *pictures += picture && !bad;
    } else if (local != p || name[0] == '/' || !st) { /* file://, an absolute path: no key */
        snprintf(err, sizeof err, "no such file (%s)%s", local,
                 local != p || name[0] == '/' ? ""
                                              : "; a store key? give --store URI to look there");
        bad = 1;
    } else {
        int have = vdn_store_exists(st, name, NULL, err, sizeof err);
        if (have == 0)
            snprintf(err, sizeof err, "no such file (%s) nor key in %s", local, vdn_store_uri(st));
        bad = have != 1;
    }
    if (bad) fprintf(stderr, "%s:%d: %s '%s': %s\n", s->path, it->line, field, name, err);
    free(p);
    return bad;
}

static int suite_check_main(int argc, char **argv) {
    const char *path = NULL, *store_uri = NULL;
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "--store") && i + 1 < argc)
            store_uri = argv[++i];
        else if (argv[i][0] != '-' && !path)
            path = argv[i];
        else {
            fprintf(stderr, "vdn eval suite check: unexpected argument '%s'\n", argv[i]);
            return 2;
        }
    }
    if (!path) {
        usage(stderr);
        return 2;
    }
    char err[VDN_ERR_LEN];
    vdn_suite s;
    if (vdn_suite_load(path, &s, err, sizeof err)) {
        fprintf(stderr, "vdn eval suite check: %s\n", err);
        return 1;
    }
    vdn_store *st = store_uri ? vdn_store_open(store_uri, NULL, err, sizeof err) : NULL;
    if (store_uri && !st) {
        fprintf(stderr, "vdn eval suite check: --store %s: %s\n", store_uri, err);
        vdn_suite_free(&s);
        return 1;
    }
    int bad = 0, modes[4] = {0}, pictures = 0, texts = 0, unchecked = 0;
    for (int i = 0; i < s.n; i++) {
        const vdn_suite_item *it = &s.items[i];
        modes[it->mode]++;
        texts += !it->prompt_cache;
        const char *fields[4] = {"prompt_cache", "keyframes", "first_frame", "last_frame"};
        const char *files[4] = {it->prompt_cache, it->keyframes, it->first_frame, it->last_frame};
        for (int k = 0; k < 4; k++)
            if (files[k])
                bad += check_file(&s, it, fields[k], files[k], k >= 2, st, &pictures, &unchecked);
    }
    printf("%s: %d prompts (t2va %d, i2va %d, l2va %d, fl2va %d), %d rendered from text, %d "
           "pictures decoded%s",
           s.path, s.n, modes[0], modes[1], modes[2], modes[3], texts, pictures,
           bad ? "" : ", every file present");
    if (unchecked) printf(" (%d URIs not checked)", unchecked);
    printf("\n");
    if (st) vdn_store_close(st);
    vdn_suite_free(&s);
    return bad ? 1 : 0;
}

static int suite_keyframes_main(int argc, char **argv) {
    vdn_suite_keyframes_opts o = {0};
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--out") && v)
            o.out_dir = v, i++;
        else if (!strcmp(a, "--from") && v)
            o.from = v, i++;
        else if (!strcmp(a, "--variant") && v)
            o.variant = v, i++;
        else if (!strcmp(a, "--pictures") && v)
            o.pictures = v, i++;
        else if (a[0] != '-' && !o.suite)
            o.suite = a;
        else {
            fprintf(stderr, "vdn eval suite keyframes: unexpected argument '%s'\n", a);
            return 2;
        }
    }
    if (!o.suite || !o.out_dir || !o.from == !o.pictures) {
        usage(stderr);
        return 2;
    }
    char err[VDN_ERR_LEN];
    int n;
    if (vdn_suite_keyframes(&o, &n, err, sizeof err)) {
        fprintf(stderr, "vdn eval suite keyframes: %s\n", err);
        return 1;
    }
    printf("suite: %s/suite.jsonl (%d keyframe lines with pictures in %s/keyframes/)\n", o.out_dir,
           n, o.out_dir);
    return 0;
}

int vdn_cmd_eval(int argc, char **argv) {
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (!strcmp(argv[1], "suite")) {
        if (argc >= 3 && !strcmp(argv[2], "init")) return suite_init_main(argc - 1, argv + 1);
        if (argc >= 3 && !strcmp(argv[2], "check")) return suite_check_main(argc - 1, argv + 1);
        if (argc >= 3 && !strcmp(argv[2], "keyframes"))
            return suite_keyframes_main(argc - 1, argv + 1);
        usage(stderr);
        return 2;
    }
    const vdn_client_env env = cli_env_client();
    if (!strcmp(argv[1], "sweep")) return vdn_eval_sweep_main(argc - 1, argv + 1, &env);
    if (!strcmp(argv[1], "report")) return vdn_eval_report_main(argc - 1, argv + 1);
    if (!strcmp(argv[1], "score")) return vdn_eval_score_main(argc - 1, argv + 1, &env);
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
