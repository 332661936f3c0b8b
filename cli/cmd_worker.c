/* `vdn worker`: parse the command line, then run the daemon (loop.c). */
#include <stdio.h>

#include "commands.h"
#include "score_job.h"
#include "vdn_util.h"
#include "worker.h"

int vdn_cmd_worker(int argc, char **argv) {
    vdn_worker_opts o;
    char err[VDN_ERR_LEN];
    int rc = vdn_worker_parse_args(argc, argv, &o, err, sizeof err);
    if (rc == 1) return 0;
    if (rc < 0) {
        fprintf(stderr, "%s\n", err);
        return 2;
    }
    o.score = vdn_eval_score_job; /* scoring jobs: eval's work, on this worker */
    return vdn_worker_run(&o);
}
