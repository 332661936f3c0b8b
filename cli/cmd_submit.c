/* `vdn submit FILE.jsonl [--tag T] [--priority P]`: every line checked first (all problems
 * reported with their line numbers), then one all-or-nothing batch. */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "cli_common.h"
#include "commands.h"
#include "memfit.h"
#include "vdn_util.h"

typedef struct {
    const char *tag;
    int priority;
    int check_files;
    int bad;
    unsigned flags; /* VDN_SUBMIT_* */
    int dry_run;    /* print each job's estimate, submit nothing */
} submit_opts;

static int own(void *user, int argc, char **argv, int i) {
    submit_opts *o = user;
    if (!strcmp(argv[i], "--tag") || !strcmp(argv[i], "--priority")) {
        if (i + 1 >= argc) {
            fprintf(stderr, "vdn submit: %s needs a value\n", argv[i]);
            return -1;
        }
        if (argv[i][2] == 't') {
            o->tag = argv[i + 1];
            return 2;
        }
        char *end;
        long p = strtol(argv[i + 1], &end, 10);
        if (*end || end == argv[i + 1] || p < -1000000 || p > 1000000) {
            fprintf(stderr,
                    "vdn submit: --priority: expected an integer in -1000000..1000000, "
                    "got '%s'\n",
                    argv[i + 1]);
            return -1;
        }
        o->priority = (int)p;
        return 2;
    }
    if (!strcmp(argv[i], "--no-check-files")) {
        o->check_files = 0;
        return 1;
    }
    if (!strcmp(argv[i], "--dry-run")) {
        o->dry_run = 1;
        return 1;
    }
    if (!strcmp(argv[i], "--allow-wait")) {
        o->flags |= VDN_SUBMIT_ALLOW_WAIT;
        return 1;
    }
    return 0;
}

/* The coordinator names a refused job by its place in the batch ("job 3 of the batch: ...",
 * e.g. a size no registered worker's GPU can hold); say FILE:LINE instead, as for the checks
 * made here. */
static void print_refusals(const char *err, const char *fname, const vdn_job_spec *jobs, int n) {
    for (const char *s = err; *s;) {
        const char *nl = strchr(s, '\n');
        int len = nl ? (int)(nl - s) : (int)strlen(s), k = 0, used = 0;
        if (sscanf(s, "job %d of the batch: %n", &k, &used) == 1 && used > 0 && k >= 1 && k <= n &&
            jobs[k - 1].line_no > 0 && used <= len)
            fprintf(stderr, "%s:%d: %.*s\n", fname, jobs[k - 1].line_no, len - used, s + used);
        else
            fprintf(stderr, "%.*s\n", len, s);
        s += len + (nl ? 1 : 0);
    }
}

/* --dry-run: what each job would cost, from the request alone (the coordinator checks the
 * same memory against its registered workers at submit). */
static void print_estimates(const char *fname, const vdn_job_spec *jobs, int n) {
    double total = 0;
    for (int i = 0; i < n; i++) {
        const vdn_job_spec *s = &jobs[i];
        coord_mem_need m;
        coord_mem_need_of(s, &m);
        const double cost = (double)s->steps * s->frames * s->height * s->width;
        total += cost;
        char c[64] = "cost unknown (a size or steps not given)";
        if (cost > 0) snprintf(c, sizeof c, "cost %.4g NFE pixel-frames", cost);
        printf("%s:%d: %d frames x %d x %d, %d steps: %s, %lld sequence rows, at least %.1f GiB "
               "of GPU memory (%.1f GiB of H3 weights + %.1f GiB of activations over %d GPU(s) + "
               "%.1f GiB for a feed-forward piece)\n",
               fname, s->line_no, s->frames, s->height, s->width, s->steps, c, m.rows,
               (m.weights + m.activations + m.ffn) / 1073741824.0, m.weights / 1073741824.0,
               m.activations / 1073741824.0, m.gpus, m.ffn / 1073741824.0);
    }
    printf("%s: %d job(s), cost %.4g NFE pixel-frames in all; nothing submitted (--dry-run)\n",
           fname, n, total);
}

int vdn_cmd_submit(int argc, char **argv) {
    submit_opts so = {NULL, 0, 1, 0, 0, 0};
    cli_args a;
    if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        printf("usage: vdn submit FILE.jsonl [--tag T] [--priority P] [--no-check-files]\n"
               "       [--allow-wait] [--dry-run] [--coordinator EP | --dir DIR]\n"
               "       [--key NAME.key --coordinator-key PUB] [--json]\n\n"
               "One render per line (official requests.jsonl fields accepted). Every bad line is\n"
               "reported with its number; nothing is submitted unless all lines are good.\n"
               "A job no registered worker could ever take (its gpus, checkpoint, precision or\n"
               "min_gpu_memory) is refused with the reason; --allow-wait queues it anyway, and\n"
               "`vdn status` says why it waits.\n"
               "--dry-run checks the file and prints each job's cost (NFEs x frames x height x\n"
               "width), sequence rows and least GPU memory (the H3 DiT; docs/cluster.md), and\n"
               "submits nothing.\n");
        return 0;
    }
    if (cli_parse("submit", argc, argv, &a, own, &so)) return VDN_EXIT_USAGE;
    if (a.npos != 1) {
        fprintf(stderr, "usage: vdn submit FILE.jsonl [--tag T] [--priority P]\n");
        return VDN_EXIT_USAGE;
    }
    vdn_job_spec *jobs;
    int n;
    vdn_errlist errs = {0};
    if (vdn_jsonl_parse_file(a.pos[0], so.check_files, &jobs, &n, &errs)) {
        for (int i = 0; i < errs.n; i++)
            fprintf(stderr, "%s\n", errs.lines[i]);
        fprintf(stderr, "vdn submit: %d problem(s) in %s; nothing submitted\n", errs.n, a.pos[0]);
        if (a.json) { /* the same list for scripts */
            cJSON *o = cJSON_CreateObject(), *arr = cJSON_AddArrayToObject(o, "errors");
            for (int i = 0; i < errs.n; i++)
                cJSON_AddItemToArray(arr, cJSON_CreateString(errs.lines[i]));
            char *txt = cJSON_PrintUnformatted(o);
            puts(txt);
            free(txt);
            cJSON_Delete(o);
        }
        vdn_errlist_free(&errs);
        return VDN_EXIT_INVALID;
    }
    if (so.dry_run) {
        print_estimates(a.pos[0], jobs, n);
        vdn_jobs_free(jobs, n);
        return VDN_EXIT_OK;
    }
    vdn_client *c = cli_connect("submit", &a);
    if (!c) {
        vdn_jobs_free(jobs, n);
        return VDN_EXIT_UNREACHABLE;
    }
    char err[VDN_ERR_LEN];
    uint64_t batch;
    uint64_t *ids = vdn_xcalloc((size_t)n, sizeof *ids);
    int rc = VDN_EXIT_OK;
    if (vdn_client_submit_flags(c, jobs, n, so.tag, so.priority, a.pos[0], so.flags, &batch, ids,
                                err, sizeof err)) {
        if (vdn_client_error_code(c) == VDN__ERROR__CODE__INVALID) {
            print_refusals(err, a.pos[0], jobs, n);
            fprintf(stderr, "vdn submit: the coordinator refused %s; nothing submitted\n",
                    a.pos[0]);
            rc = VDN_EXIT_INVALID;
        } else {
            rc = cli_fail("submit", c, err);
        }
    } else if (a.json) {
        printf("{\"batch\": \"b%llu\", \"batch_id\": %llu, \"jobs\": [", (unsigned long long)batch,
               (unsigned long long)batch);
        for (int i = 0; i < n; i++)
            printf("%s{\"job\": \"j%llu\", \"line\": %d}", i ? ", " : "",
                   (unsigned long long)ids[i], jobs[i].line_no);
        printf("]}\n");
    } else {
        printf("submitted batch b%llu: %d job(s) (j%llu..j%llu)\n", (unsigned long long)batch, n,
               (unsigned long long)ids[0], (unsigned long long)ids[n - 1]);
    }
    free(ids);
    vdn_jobs_free(jobs, n);
    vdn_client_close(c);
    return rc;
}
