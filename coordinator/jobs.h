/* Job and attempt state transitions, each one SQLite transaction (BEGIN IMMEDIATE) with its
 * events row. States: docs/protocol.md "Job state machine". */
#ifndef VDN_COORD_JOBS_H
#define VDN_COORD_JOBS_H

#include <sqlite3.h>
#include <stdint.h>

#include "client.h"
#include "cost.h"
#include "vdn.pb-c.h"

typedef struct {
    int64_t job, batch, attempt;
    char *request_json; /* normalized request (jsonl.c) */
    char *output_prefix;
    char *resume_key; /* newest sampler snapshot of the job, NULL = none */
} job_claim;

/* Whose fault an attempt's end was (docs/protocol.md "Failure blame"): the values of the wire's
 * Fail.Fault. Only WORKER counts toward the fault blocklists; JOB fails the job at once; CRASH
 * (the renderer process died under the attempt) goes to the job's crash record (jobs_crash). */
typedef enum { FAULT_JOB = 1, FAULT_WORKER = 2, FAULT_TRANSIENT = 3, FAULT_CRASH = 4 } job_fault;
const char *job_fault_name(job_fault f); /* "job" "worker" "transient" "crash" */

/* The class a worker is blocklisted for after repeated worker faults: checkpoint, variant and
 * size class (a power of two of frames x height x width). Written into buf. */
void jobs_class_of(const vdn_job_spec *s, char *buf, size_t len);
void job_claim_free(job_claim *c);

/* Who submits, for ownership and output namespaces: owner = the client key's name (NULL: the local
 * user of a farm without keys), admin = its role is admin (the local user is); and the limits
 * the batch is checked against (0 = none): jobs in it, characters of a text prompt. */
typedef struct {
    const char *owner;
    int admin;
    int max_jobs, max_prompt_chars;
} jobs_submitter;

/* The store prefix a job writes (docs/cluster.md "Tenants"). A client with a name writes under
 * users/NAME/: no `out` gives users/NAME/batches/bB/jJ/out, an `out` outside users/ is put under
 * users/NAME/, one in another user's folder is refused; an admin's `out` is taken as given. For
 * everyone the prefixes the farm writes itself are refused: prompt-cache/ (text prompts' cache)
 * and any PREFIX.snapshots/ folder (resumable renders). 0, or -1 with a line in errs naming
 * `where` and the field. */
int jobs_output_prefix(const char *out, const jobs_submitter *who, int64_t batch, int64_t job,
                       char *buf, size_t len, vdn_errlist *errs, const char *where);

/* Validates every job (errs gets one line per problem), refuses those over the caps or that no
 * registered worker's GPU can hold (cost.h, memfit.h) and inserts all or nothing, the batch
 * owned by who->owner. */
int jobs_submit(sqlite3 *db, const Vdn__SubmitRequest *req, const cost_caps *caps,
                const jobs_submitter *who, int64_t *batch, int64_t **job_ids, vdn_errlist *errs);

/* The owner of batch `id` (kind 'b') or of job `id`'s batch (kind 'j'), into buf ("" = none: the
 * local user's). 0, or -1 when there is no such batch or job. */
int jobs_owner(sqlite3 *db, char kind, int64_t id, char *buf, size_t len);

/* Makes queued job `job` running under a new attempt held by worker_id, with lease_until =
 * now + lease (which job, which worker: coordinator/place.h decides). 1 claimed, 0 the job is
 * no longer queued, -1 error. */
int jobs_claim(sqlite3 *db, int64_t job, const char *worker_id, double lease, job_claim *out,
               char *err, size_t errlen);

typedef struct {
    int64_t job, batch;
    char state[16]; /* the attempt's state */
    char job_state[16];
    char worker[128];
    int current; /* the job's current attempt and still running */
} attempt_info;
/* 1 found, 0 no such attempt. */
int jobs_attempt(sqlite3 *db, int64_t attempt, attempt_info *out);

int jobs_renew(sqlite3 *db, int64_t attempt, double lease_until);
int jobs_progress(sqlite3 *db, int64_t attempt, int nfe_done, int nfe_total, double nfe_seconds,
                  double elapsed, double lease_until);
/* The attempt's own NFE count, and a snapshot it saved (key NULL = none new). */
int jobs_snapshot(sqlite3 *db, int64_t attempt, int nfe_evaluated, const char *key, int step);
int jobs_complete(sqlite3 *db, int64_t attempt, char **keys, size_t nkeys, const char *record,
                  char *err, size_t errlen);
/* A job's two budgets (vdn coordinator --max-attempts, --max-worker-faults). An attempt lost
 * with its worker (a worker fault: it vanished, was killed, let its lease run out, its GPU
 * faulted; or the worker or coordinator went away under it) takes one from max_worker_faults
 * only, so a job never fails because machines died under it; any other ended attempt (a FAIL the
 * worker reports as transient, e.g. the store down) takes one from max_attempts. */
typedef struct {
    int max_attempts;
    int max_worker_faults;
    int max_crashes; /* crashes in a job's record that quarantine it even all on one worker */
} job_budget;

/* Ends a running attempt as attempt_state ("failed", "expired") and requeues the job, or fails
 * it when the fault is the job's or its budget is spent (lost: the attempt was lost with its
 * worker, see job_budget; jobs.worker_faults counts those). A worker fault adds one to the
 * worker's failures and to its failures in the job's class. A crash is charged to neither budget
 * (jobs.crashes counts those): it joins the job's crash record (table crashes), and a record
 * naming two workers, or budget->max_crashes crashes, quarantines the job (failed, jobs.
 * quarantined = 1, event `quarantined`; docs/cluster.md "Crash blame"). store_op: the
 * object-store operation the failure came from ("download", "upload", "open"; NULL = not the
 * store's), kept in attempts.store_op for vdn_store_errors_total. job_state_out gets the job's
 * new state ("quarantined" for a quarantined job). */
int jobs_end_attempt(sqlite3 *db, int64_t attempt, const char *attempt_state, const char *reason,
                     job_fault fault, const char *store_op, int lost, const job_budget *budget,
                     char job_state_out[16], char *err, size_t errlen);
/* The wire's Fail.StoreOp as stored: "download" "upload" "open", or NULL (none or unknown). */
const char *job_store_op_name(int op);

/* Cancel: queued jobs -> cancelled; running ones -> cancelled with their attempt 'cancelled';
 * on_running(user, attempt, worker) is called for each so the worker can be told. */
int jobs_cancel(sqlite3 *db, char kind, int64_t id, int *count,
                void (*on_running)(void *user, int64_t attempt, const char *worker), void *user,
                char *err, size_t errlen);
/* Retry: failed/cancelled jobs -> queued with fresh budgets (attempts, worker faults, crashes).
 * Quarantined jobs are left alone (*quarantined counts them) unless force; force also clears the
 * crash record of every job it requeues. The crash record otherwise survives a retry. */
int jobs_retry(sqlite3 *db, char kind, int64_t id, int force, int *count, int *quarantined,
               char *err, size_t errlen);

/* The worker side of crash blame: the distinct jobs whose crashes on worker_id since `since`
 * (wall clock) still count against it; their ids into jobs (up to max), the count returned.
 * jobs_crash_blocklisted then takes those crashes off both records: the worker's (it is blocked
 * for them now) and the jobs' (the machine, not they, was at fault). */
int jobs_crashed_jobs(sqlite3 *db, const char *worker_id, double since, int64_t *jobs, int max);
int jobs_crash_blocklisted(sqlite3 *db, const char *worker_id, double since, char *err,
                           size_t errlen);

/* Attempts still 'running' whose lease is past `now`: fn called for each (the caller ends
 * them). Returns how many. */
int jobs_each_expired(sqlite3 *db, double now, void (*fn)(void *user, int64_t attempt), void *user);

#endif
