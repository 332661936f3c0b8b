/* `vdn worker` command line, with defaults from a cluster config file (--config). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "conf.h"
#include "env.h"
#include "vdn_util.h"
#include "worker.h"

static const char usage[] =
    "usage: vdn worker --connect tcp://HOST:5555 --checkpoint DIR [options]\n"
    "  --connect EP          the coordinator's worker endpoint\n"
    "  --checkpoint DIR      checkpoint to load (once, at start)\n"
    "  --checkpoint-name N   name jobs' \"checkpoint\" field matches (default: DIR's last\n"
    "                        component; a job may also name the identity hash)\n"
    "  --gpus SPEC           GPUs to drive: 0-7, 0,2,5, all (default) or none\n"
    "  --cpu                 CPU backend, report no GPUs\n"
    "  --store URI           default output store: file://DIR or s3://bucket/prefix\n"
    "  --id NAME             worker id (default HOST-gSPEC or HOST-cpu)\n"
    "  --keys DIR            CURVE: DIR/worker.key (or DIR/ID.key) and DIR/coordinator.pub\n"
    "  --key FILE            CURVE: this worker's secret key file\n"
    "  --server-key FILE     CURVE: the coordinator's public key file\n"
    "  --scratch DIR         working directory for outputs before upload (default /tmp)\n"
    "  --adapter DIR         extra PEFT adapter to fold in (repeatable)\n"
    "  --heartbeat-seconds S heartbeat interval (default 1)\n"
    "  --liveness N          silent heartbeats before reconnecting (default 5)\n"
    "  --upload-attempts N   whole-upload retries on top of the store's (default 3)\n"
    "  --threads N           CPU backend threads (default: the engine's)\n"
    "  --store-retry-seconds S  give up one store request after S s of retries (default 120)\n"
    "  --data-root DIR       local paths a request names (prompt cache, noise file) must lie\n"
    "                        under DIR (repeatable; none: only store URIs and keys); opened\n"
    "                        following no symlink and read from a private copy\n"
    "  --snapshot-seconds S  store the sampler state after S s of rendering, so a requeued\n"
    "                        job resumes there (default 60; 0 = never)\n"
    "  --snapshot-every K    also after every K model evaluations (default 0 = by time)\n"
    "  --precision P[,P]     the DiT precisions to load: bf16 (default), fp8 or bf16,fp8 (an\n"
    "                        engine, a copy of the weights, per precision on every GPU); a\n"
    "                        job's \"precision\" field picks one\n"
    "  --text-precision P    the text encoder's, for text prompts: bf16 (default) or fp8\n"
    "                        (e4m3 Linears; its own cache entries, never bf16's)\n"
    "  --vae-precision P     the video decoder's: bf16 (default) or fp8 (e4m3 ViT Linears)\n"
    "  --config FILE         cluster config (ops/cluster.example.conf); flags override it\n"
    "SIGTERM: finish the current jobs, then exit. A second SIGTERM: hand them back, exit.\n";

/* S3 settings from the cluster file reach the store through its documented environment
 * variables; an explicit environment wins. */
static int apply_s3_env(const vdn_conf *c, char *err, size_t errlen) {
    const char *ep = vdn_conf_get(c, "s3_endpoint"), *rg = vdn_conf_get(c, "s3_region");
    if (ep) setenv("VDN_S3_ENDPOINT", ep, 0);
    if (rg) setenv("AWS_REGION", rg, 0);
    const char *envf = vdn_conf_get(c, "s3_env_file");
    if (!envf) return 0;
    size_t len;
    char *text = vdn_read_file(envf, &len, err, errlen);
    if (!text) return -1;
    int line = 0, rc = 0;
    for (char *save = NULL, *s = strtok_r(text, "\n", &save); s; s = strtok_r(NULL, "\n", &save)) {
        line++;
        while (*s == ' ' || *s == '\t')
            s++;
        if (!*s || *s == '#') continue;
        char *eq = strchr(s, '=');
        if (!eq || strncmp(s, "AWS_", 4)) {
            /* Never echo the line: it may hold a secret. */
            rc = vdn_fail(err, errlen, "%s:%d: expected AWS_NAME=VALUE", envf, line);
            break;
        }
        *eq = '\0';
        setenv(s, eq + 1, 0);
    }
    memset(text, 0, len);
    free(text);
    return rc;
}

int vdn_worker_parse_args(int argc, char **argv, vdn_worker_opts *o, char *err, size_t errlen) {
    static vdn_conf conf; /* values are referenced by o for the life of the process */
    static char keybuf[2][4096], idbuf[256];
    memset(o, 0, sizeof *o);
    o->nsel = -1;
    o->heartbeat_s = 1.0;
    o->liveness = 5;
    o->reconnect_max_s = 30.0;
    o->upload_attempts = 3;
    o->snapshot_seconds = 60;
    const char *gpus = NULL, *keys = NULL, *text_precision = NULL, *vae_precision = NULL;
    const char *precisions = NULL;

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(usage, stdout);
            return 1;
        }
        if (!strcmp(a, "--cpu")) {
            o->cpu = 1;
            continue;
        }
        if (i + 1 >= argc)
            return vdn_fail(err, errlen, "vdn worker: %s needs a value\n%s", a, usage);
        const char *v = argv[++i];
        if (!strcmp(a, "--connect"))
            o->connect = v;
        else if (!strcmp(a, "--checkpoint"))
            o->checkpoint = v;
        else if (!strcmp(a, "--checkpoint-name"))
            o->checkpoint_name = v;
        else if (!strcmp(a, "--gpus"))
            gpus = v;
        else if (!strcmp(a, "--store"))
            o->store = v;
        else if (!strcmp(a, "--id"))
            o->id = v;
        else if (!strcmp(a, "--keys"))
            keys = v;
        else if (!strcmp(a, "--key"))
            o->key = v;
        else if (!strcmp(a, "--server-key"))
            o->server_key = v;
        else if (!strcmp(a, "--scratch"))
            o->scratch = v;
        else if (!strcmp(a, "--text-precision"))
            text_precision = v;
        else if (!strcmp(a, "--vae-precision"))
            vae_precision = v;
        else if (!strcmp(a, "--precision"))
            precisions = v;
        else if (!strcmp(a, "--data-root")) {
            if (o->n_data_roots >= 16)
                return vdn_fail(err, errlen, "vdn worker: more than 16 --data-root");
            if (access(v, X_OK))
                return vdn_fail(err, errlen,
                                "vdn worker: --data-root '%s': not a folder we can "
                                "enter",
                                v);
            o->data_roots[o->n_data_roots++] = v;
        } else if (!strcmp(a, "--snapshot-seconds") || !strcmp(a, "--snapshot-every")) {
            char *end;
            double x = strtod(v, &end);
            if (end == v || *end || !(x >= 0) || x > 1e6)
                return vdn_fail(err, errlen, "vdn worker: %s '%s': expected a number >= 0", a, v);
            if (!strcmp(a, "--snapshot-seconds"))
                o->snapshot_seconds = x;
            else
                o->snapshot_every = (int)x;
        } else if (!strcmp(a, "--adapter")) {
            if (o->n_adapters >= 16)
                return vdn_fail(err, errlen, "vdn worker: more than 16 --adapter");
            o->adapters[o->n_adapters++] = v;
        } else if (!strcmp(a, "--heartbeat-seconds") || !strcmp(a, "--liveness") ||
                   !strcmp(a, "--upload-attempts") || !strcmp(a, "--threads") ||
                   !strcmp(a, "--store-retry-seconds")) {
            char *end;
            double x = strtod(v, &end);
            if (end == v || *end || !(x > 0) || x > 3600)
                return vdn_fail(err, errlen, "vdn worker: %s '%s': expected a positive number", a,
                                v);
            if (!strcmp(a, "--heartbeat-seconds"))
                o->heartbeat_s = x;
            else if (!strcmp(a, "--liveness"))
                o->liveness = (int)x < 2 ? 2 : (int)x;
            else if (!strcmp(a, "--threads"))
                o->threads = (int)x;
            else if (!strcmp(a, "--store-retry-seconds"))
                o->store_retry_s = x;
            else
                o->upload_attempts = (int)x;
        } else if (!strcmp(a, "--config")) {
            if (conf.path) return vdn_fail(err, errlen, "vdn worker: --config given twice");
            if (vdn_conf_load(&conf, v, err, errlen)) return -1;
            if (apply_s3_env(&conf, err, errlen)) return -1;
        } else {
            return vdn_fail(err, errlen, "vdn worker: unknown option '%s'\n%s", a, usage);
        }
    }
    if (conf.path) { /* flags given on the command line win */
        if (!o->connect) o->connect = vdn_conf_get(&conf, "worker_endpoint");
        if (!o->checkpoint) o->checkpoint = vdn_conf_get(&conf, "checkpoint");
        if (!o->store) o->store = vdn_conf_get(&conf, "store");
        if (!o->scratch) o->scratch = vdn_conf_get(&conf, "scratch");
        if (!keys && !o->key) keys = vdn_conf_get(&conf, "keys");
        if (!text_precision) text_precision = vdn_conf_get(&conf, "text_precision");
        if (!vae_precision) vae_precision = vdn_conf_get(&conf, "vae_precision");
        if (!precisions) precisions = vdn_conf_get(&conf, "precision");
        /* data roots from the file add to those given as flags */
        const char *r;
        for (int i = 0; (r = vdn_conf_get_nth(&conf, "data_root", i)) && o->n_data_roots < 16; i++)
            o->data_roots[o->n_data_roots++] = r;
    }
    if (text_precision && vdn_precision_parse(text_precision, &o->text_precision))
        return vdn_fail(err, errlen,
                        "vdn worker: --text-precision (or text_precision in the config) '%s': "
                        "expected bf16 or fp8",
                        text_precision);
    if (vae_precision && vdn_precision_parse(vae_precision, &o->vae_precision))
        return vdn_fail(err, errlen,
                        "vdn worker: --vae-precision (or vae_precision in the config) '%s': "
                        "expected bf16 or fp8",
                        vae_precision);
    o->precisions = 1u << VDN_PRECISION_BF16;
    if (precisions && vdn_precision_parse_list(precisions, &o->precisions))
        return vdn_fail(err, errlen,
                        "vdn worker: --precision (or precision in the config) '%s': expected "
                        "bf16, fp8 or bf16,fp8 (each once)",
                        precisions);
    if (!o->connect) return vdn_fail(err, errlen, "vdn worker: --connect is required\n%s", usage);
    if (!o->checkpoint)
        return vdn_fail(err, errlen, "vdn worker: --checkpoint is required\n%s", usage);
    if (!o->checkpoint_name) {
        /* Jobs name a checkpoint the same way on every host, while its path may differ from
         * host to host: the directory's own name ("/models/VDN-H3/" -> "VDN-H3"). */
        static char name[256];
        size_t n = strlen(o->checkpoint);
        while (n > 1 && o->checkpoint[n - 1] == '/')
            n--;
        size_t b = n;
        while (b > 0 && o->checkpoint[b - 1] != '/')
            b--;
        snprintf(name, sizeof name, "%.*s", (int)(n - b), o->checkpoint + b);
        o->checkpoint_name = name[0] ? name : o->checkpoint;
    }
    if (o->cpu)
        o->nsel = 0;
    else if (gpus && strcmp(gpus, "all")) {
        o->nsel = vdn_parse_gpu_spec(gpus, o->sel, 64, err, errlen);
        if (o->nsel < 0) return -1;
    }
    if (!o->id) {
        char host[128] = "worker";
        gethostname(host, sizeof host - 1);
        if (o->nsel == 0)
            snprintf(idbuf, sizeof idbuf, "%s-cpu", host);
        else if (o->nsel < 0)
            snprintf(idbuf, sizeof idbuf, "%s", host);
        else
            snprintf(idbuf, sizeof idbuf, "%s-g%s", host, gpus);
        o->id = idbuf;
    }
    if (keys) {
        snprintf(keybuf[0], sizeof keybuf[0], "%s/%s.key", keys, o->id);
        if (access(keybuf[0], R_OK)) snprintf(keybuf[0], sizeof keybuf[0], "%s/worker.key", keys);
        snprintf(keybuf[1], sizeof keybuf[1], "%s/coordinator.pub", keys);
        if (!o->key) o->key = keybuf[0];
        if (!o->server_key) o->server_key = keybuf[1];
    }
    if ((o->key != NULL) != (o->server_key != NULL))
        return vdn_fail(err, errlen, "vdn worker: CURVE needs both --key and --server-key");
    if (!o->scratch) o->scratch = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    cli_env_text_prompts(&o->text_prompts);
    o->base_dir = cli_env_base_dir();
    return 0;
}
