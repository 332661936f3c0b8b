/* Why a queued job waits: the submit-time refusal of jobs no registered worker could take, and
 * the reasons placement leaves in jobs.waiting (docs/cluster.md "Why a job waits"). */
#ifndef VDN_COORD_WAITING_H
#define VDN_COORD_WAITING_H

#include "client.h"
#include "coord.h"
#include "place.h"
#include "vdn.pb-c.h"

/* Adds a line to errs for every valid job of the batch that no worker of the workers table (gone
 * ones included) could ever take: "job 2 of the batch: field 'gpus': no worker with 2 GPUs (the
 * most any has in service: 1) among the 3 registered worker(s), ..." (jobs_submit then refuses
 * the batch, adding what it finds itself). Nothing is refused while no worker has registered.
 * 0, or -1 when errs got lines. */
int coord_submit_check(coord *c, const Vdn__SubmitRequest *req, vdn_errlist *errs);

/* After a plan: every queued job of pj (in queue order) that is not among picks gets its reason
 * in jobs.waiting (written only when it changes); a job no connected worker can take also gets
 * an `unplaceable` event and a log line, once per reason. pw: the plan's workers, c->w's order. */
void coord_note_waiting(coord *c, const place_worker *pw, const place_job *pj, int nj,
                        const place_pick *picks, int np, const place_reservation *res);

#endif
