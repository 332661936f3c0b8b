/* `vdn submit FILE.jsonl [--tag T] [--priority P]`: every line checked first (all problems
 * reported with their line numbers), then one all-or-nothing batch. */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "cli_common.h"
#include "commands.h"
#include "cost.h"
#include "memfit.h"
#include "precision.h"
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

/* The worker kinds the dry run estimates on: those of the workers the coordinator lists (its
 * registered ones), else the rate table's own rows. */
static int dry_run_kinds(const cli_args *a, const cost_caps *caps, cost_kind *k, char *from,
                         size_t len) {
    cli_args q = *a;
    if (q.timeout <= 0) q.timeout = 2; /* a dry run does not wait long for a farm */
    int n = 0;
    char err[VDN_ERR_LEN] = "";
    vdn_client *c = cli_connect("submit --dry-run", &q);
    Vdn__WorkersReply *r = c ? vdn_client_workers(c, err, sizeof err) : NULL;
    for (size_t i = 0; r && i < r->n_workers; i++) {
        const Vdn__WorkerInfo *w = r->workers[i];
        const char *gpu = w->n_gpus && w->gpus[0]->name ? w->gpus[0]->name : "";
        unsigned m = 0;
        for (size_t p = 0; p < w->n_precisions; p++) {
            vdn_precision pp;
            if (!vdn_precision_parse(w->precisions[p], &pp)) m |= 1u << pp;
        }
        if (!m) m = 1u << VDN_PRECISION_BF16;
        for (int p = 0; p < VDN_PRECISION_COUNT; p++)
            if (m >> p & 1) n = cost_kind_add(caps, k, n, w->backend, gpu, p);
    }
    if (r && n)
        snprintf(from, len, "the %zu worker(s) registered with the coordinator", r->n_workers);
    vdn_client_free(r);
    vdn_client_close(c);
    if (n) return n;
    snprintf(from, len, "the rate table's (%s)",
             r ? "no worker registered yet" : "no coordinator answered");
    for (int i = 0; i < caps->nrates; i++)
        for (int p = 0; p < VDN_PRECISION_COUNT; p++) {
            const int cpu = !strcmp(caps->rates[i].match, "cpu");
            n = cost_kind_add(caps, k, n, cpu ? "cpu" : "cuda", cpu ? "" : caps->rates[i].match, p);
            k[n - 1].workers = 0;
        }
    return n;
}

/* --dry-run: what each job would cost, from the request alone: memory (the coordinator checks
 * the same against its registered workers at submit) and seconds on each worker kind. */
static void print_estimates(const char *fname, const vdn_job_spec *jobs, int n, const cli_args *a) {
    cost_caps caps;
    cost_caps_default(&caps);
    cost_kind kinds[COST_MAX_KINDS];
    char from[160];
    const int nk = dry_run_kinds(a, &caps, kinds, from, sizeof from);
    printf("%s: estimates on %s; the caps (--max-job-seconds, --max-job-memory) are the "
           "coordinator's\n",
           fname, from);
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
               "of GPU memory (%.1f GiB of H3 %s weights + %.1f GiB of activations over %d "
               "GPU(s) + %.1f GiB for a feed-forward piece)\n",
               fname, s->line_no, s->frames, s->height, s->width, s->steps, c, m.rows,
               (m.weights + m.activations + m.ffn) / 1073741824.0, m.weights / 1073741824.0,
               m.precision, m.activations / 1073741824.0, m.gpus, m.ffn / 1073741824.0);
        vdn_precision p = VDN_PRECISION_BF16;
        if (s->precision) vdn_precision_parse(s->precision, &p);
        for (int k = 0; k < nk; k++) {
            if (kinds[k].precision != (int)p) continue;
            cost_time t;
            cost_time_of(s, &kinds[k], &t);
            char name[100], dur[32], nfe[32], dec[32], txt[32], w[48] = "";
            cost_kind_name(&kinds[k], name, sizeof name);
            if (kinds[k].workers) snprintf(w, sizeof w, ", %d worker(s)", kinds[k].workers);
            if (t.seconds < 0) {
                printf("  %s%s: no estimate (a size or steps left to the engine)\n", name, w);
                continue;
            }
            cost_duration(t.seconds, dur, sizeof dur);
            cost_duration(t.nfe_seconds, nfe, sizeof nfe);
            cost_duration(t.decode, dec, sizeof dec);
            cost_duration(t.text, txt, sizeof txt);
            printf("  %s%s: estimated %s (%s a model evaluation x %d steps + decode %s + text "
                   "%s)%s\n",
                   name, w, dur, nfe, s->steps, dec, txt,
                   kinds[k].assumed_rate ? " (no rate for this GPU: the table's first assumed)"
                                         : "");
        }
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
               "width), sequence rows, least GPU memory (the H3 DiT at its precision) and\n"
               "estimated seconds on each worker kind the coordinator has registered (or the\n"
               "rate table's kinds when none answers; docs/cluster.md \"Sizes by cost\"), and\n"
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
        print_estimates(a.pos[0], jobs, n, &a);
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
