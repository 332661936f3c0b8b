/* What a request costs, by worker kind (docs/cluster.md "Sizes by cost"): its seconds on each
 * kind of worker the farm has, from a table of measured rates, and the checks made at submit
 * against the coordinator's caps (--max-job-seconds, --max-job-memory) and the largest
 * registered GPU (memfit.h). The coordinator builds the kinds from its workers table; `vdn submit
 * --dry-run` from the workers the coordinator lists, or from the table alone. */
#ifndef VDN_COORD_COST_H
#define VDN_COORD_COST_H

#include <sqlite3.h>
#include <stdint.h>

#include "client.h"

/* One row of the rate table: the seconds per model evaluation (NFE) of the H3 DiT at the H3
 * workload (345 frames at 768 x 1344: 102,816 video rows + 512 text + 575 audio = 103,903
 * sequence rows), per variant and DiT precision, and of the stages around the render. */
typedef struct {
    char match[48];  /* a GPU name containing this ("H200"), or "cpu": the CPU backend */
    double vdn[2];   /* s/NFE, VDN variants, [bf16, fp8] */
    double dense[2]; /* s/NFE, dense attention */
    double decode;   /* s to decode that clip (video + audio VAE) */
    double text;     /* s to encode 512 prompt tokens (a cache miss) */
    char source[96]; /* where the figures come from (docs/PERF.md) */
} cost_rate;

#define COST_MAX_RATES 16
#define COST_MAX_KINDS 32

/* The checks at submit and the table they use (coordinator options). */
typedef struct {
    uint64_t gpu_memory_limit; /* --gpu-memory-limit bytes (memfit.h); 0 = none */
    double max_job_seconds; /* --max-job-seconds: on the fastest kind that can take it; 0 = off */
    double max_job_memory;  /* --max-job-memory bytes of GPU memory a job may need; 0 = off */
    cost_rate rates[COST_MAX_RATES];
    int nrates; /* rates[0] is the GPU row that stands in for a GPU the table does not name */
} cost_caps;

/* The default table: the H200's measured figures and the CPU backend's. */
void cost_caps_default(cost_caps *c);
/* --job-rate MATCH[/PREC]=S: S s/NFE of the VDN variants at the H3 workload on GPUs whose name
 * contains MATCH (or "cpu"), for one precision or both; the row's other figures scale with it
 * (a new row starts from rates[0]). -1 with a message naming what was expected. */
int cost_rate_parse(cost_caps *c, const char *spec, char *err, size_t errlen);

/* A kind of worker: its backend, GPU model and one DiT precision it renders. */
typedef struct {
    char gpu[64];  /* the GPU's name ("" on the CPU backend) */
    int cpu;       /* the CPU backend (stand-in GPUs included: they render on the CPU) */
    int precision; /* vdn_precision */
    int workers;   /* registered workers of this kind (0: assumed, none registered) */
    const cost_rate *rate;
    int assumed_rate; /* the table has no row for this GPU: rates[0]'s figures stand in */
} cost_kind;

/* "NVIDIA H200 fp8", "cpu bf16" */
void cost_kind_name(const cost_kind *k, char *buf, size_t len);
/* Adds (or counts one more worker of) the kind; returns the new count. */
int cost_kind_add(const cost_caps *c, cost_kind *k, int n, const char *backend,
                  const char *gpu_name, int precision);
/* The kinds among the registered workers (the workers table, gone ones too). */
int cost_kinds_of_db(const cost_caps *c, sqlite3 *db, cost_kind *k, int max);

typedef struct {
    long long rows;     /* sequence rows: video and audio as vdn_job_min_rows, text as estimated */
    int text_tokens;    /* estimated: UTF-8 bytes / 4 of a text prompt; 1 for a prompt cache */
    double nfe_seconds; /* one model evaluation */
    double render;      /* steps x nfe_seconds over its GPUs */
    double decode, text;
    double seconds; /* all of it; < 0: unknown (a size or steps left to the engine) */
} cost_time;

void cost_time_of(const vdn_job_spec *s, const cost_kind *k, cost_time *t);
/* "9.1 h", "12 min", "40 s" */
void cost_duration(double seconds, char *buf, size_t len);

/* The submit checks of one request: memory within --max-job-memory and the largest registered
 * GPU (memfit.h), seconds on the fastest registered kind that renders its precision (an
 * rates[0] GPU assumed while none is registered) within --max-job-seconds. Adds "WHERE: field
 * 'frames': ..." lines to errs. */
void cost_check(sqlite3 *db, const vdn_job_spec *s, const cost_caps *c, vdn_errlist *errs,
                const char *where);

#endif
