/* `vdn worker`: parse the command line, then run the daemon (loop.c). `vdn worker --renderer FD
 * PID` (not for people: the daemon runs it) is one of the daemon's renderer processes
 * (worker/renderer.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "commands.h"
#include "score_job.h"
#include "vdn_util.h"
#include "renderer.h"
#include "worker.h"

int vdn_cmd_worker(int argc, char **argv) {
    if (argc == 4 && !strcmp(argv[1], "--renderer"))
        return vdn_worker_renderer(atoi(argv[2]), atol(argv[3]), vdn_eval_score_job);
    /* renderers: this very binary again (ps shows them as the worker's own program) */
    static char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    snprintf(self + (n > 0 ? n : 0), 4, "%s", n > 0 ? "" : "vdn"); /* terminated either way */
    static const char *renderer_argv[] = {self, "worker", "--renderer", NULL};
    vdn_worker_opts o;
    char err[VDN_ERR_LEN];
    int rc = vdn_worker_parse_args(argc, argv, &o, err, sizeof err);
    if (rc == 1) return 0;
    if (rc < 0) {
        fprintf(stderr, "%s\n", err);
        return 2;
    }
    o.score = vdn_eval_score_job; /* scoring jobs: eval's work, on this worker */
    o.renderer_exe = "/proc/self/exe";
    o.renderer_argv = renderer_argv;
    const char *poison = getenv("VDN_TEST_POISON_SEED"); /* tests: docs/cluster.md "Crash blame" */
    if (poison && *poison) {
        o.test_poison = 1;
        o.test_poison_seed = strtoull(poison, NULL, 10);
    }
    return vdn_worker_run(&o);
}
