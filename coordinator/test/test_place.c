/* The placement policy (coordinator/place.h) on hand-made farms: k-GPU jobs on k free GPUs of one
 * worker, best fit, the reservation for the job at the head of the queue and backfill only of
 * what cannot delay it, unknown durations never backfilled into a reservation, out-of-service
 * GPUs, one-job workers, checkpoints and DiT precisions. Expected picks are worked out by hand in
 * the comments. */
#include <string.h>

#include "../../ops/test/check.h"
#include "place.h"

/* n GPUs of 80 GiB, all free; rate so that a 1-step 1x1x1 job takes `rate` seconds. */
static place_worker worker(int n, double rate) {
    place_worker w;
    memset(&w, 0, sizeof w);
    w.n = n;
    w.eligible = 1;
    w.rate = rate;
    w.checkpoint = "ckpt";
    for (int i = 0; i < n; i++)
        w.in_service[i] = 1, w.memory[i] = 80ull << 30;
    return w;
}

static void busy(place_worker *w, int pos, double release_in) {
    w->busy[pos] = 1;
    w->release_in[pos] = release_in;
}

/* a job of `gpus` GPUs taking `seconds` at rate 1 (steps = seconds, 1x1x1), or unknown (< 0) */
static place_job job(int64_t id, int gpus, double seconds) {
    place_job j = {.id = id, .gpus = gpus};
    if (seconds >= 0) j.steps = (int)seconds, j.frames = j.height = j.width = 1;
    return j;
}

static int picked(const place_pick *p, int np, int job) {
    for (int i = 0; i < np; i++)
        if (p[i].job == job) return 1;
    return 0;
}

int main(void) {
    place_pick p[64];
    place_reservation r;

    { /* 8 one-GPU jobs on an idle 8-GPU worker: all start, each on its own GPU */
        place_worker w = worker(8, 1);
        place_job js[9];
        for (int i = 0; i < 9; i++)
            js[i] = job(i + 1, 1, 10);
        int np = place_plan(&w, 1, js, 9, p, 64, NULL, &r);
        CHECK(np == 8, "%d picks", np);
        uint64_t all = 0;
        for (int i = 0; i < np; i++) {
            CHECK(__builtin_popcountll(p[i].mask) == 1);
            CHECK(!(all & p[i].mask), "GPU given twice");
            all |= p[i].mask;
        }
        CHECK(all == 0xff);
        CHECK(r.job == 8 && r.worker == 0, "the 9th waits with a reservation: job %d", r.job);
        CHECK(r.start_in == 10, "start in %g", r.start_in);
    }
    { /* 6 of 8 busy for 10 s; queue: 8-GPU job, then 1-GPU jobs of 5 s, 20 s, unknown, 3 s.
       * The 8-GPU job reserves (T = 10, spare 0). 5 s ends by T: backfilled. 20 s and unknown
       * would delay it: wait. The 3 s job takes the last free GPU. */
        place_worker w = worker(8, 1);
        for (int i = 0; i < 6; i++)
            busy(&w, i, 10);
        place_job js[5] = {job(1, 8, 100), job(2, 1, 5), job(3, 1, 20), job(4, 1, -1),
                           job(5, 1, 3)};
        int np = place_plan(&w, 1, js, 5, p, 64, NULL, &r);
        CHECK(r.job == 0 && r.worker == 0 && r.start_in == 10, "reservation %d %g", r.job,
              r.start_in);
        CHECK(np == 2 && picked(p, np, 1) && picked(p, np, 4), "%d picks", np);
        CHECK(!picked(p, np, 2) && !picked(p, np, 3));
    }
    { /* a running job with no estimate: T unknown, so nothing is backfilled on that worker,
       * however short (the big job is never starved); the other worker takes the small jobs */
        place_worker ws[2] = {worker(8, 1), worker(2, 1)};
        busy(&ws[0], 3, -1);
        busy(&ws[1], 0, 50);
        busy(&ws[1], 1, 50);
        place_job js[3] = {job(1, 8, 100), job(2, 1, 1), job(3, 1, 1)};
        int np = place_plan(ws, 2, js, 3, p, 64, NULL, &r);
        CHECK(r.job == 0 && r.worker == 0 && r.start_in < 0, "reservation %d %g", r.job,
              r.start_in);
        CHECK(np == 0, "%d picks", np);
        ws[1].busy[0] = 0; /* one GPU frees on the other worker: a small job goes there */
        np = place_plan(ws, 2, js, 3, p, 64, NULL, &r);
        CHECK(np == 1 && p[0].job == 1 && p[0].worker == 1, "%d picks", np);
    }
    { /* spare GPUs: a 10-GPU worker, 2 busy for 10 s, a 4-GPU job of 30 s at the head starts
       * now. Then a 9-GPU job reserves: T = 30, when all 10 are free, one more than it needs
       * (spare 1): one 1-GPU job of unknown length may start (it cannot delay the 9-GPU job),
       * a second may not. */
        place_worker w = worker(10, 1);
        busy(&w, 0, 10);
        busy(&w, 1, 10);
        place_job js[4] = {job(1, 4, 30), job(2, 9, 100), job(3, 1, -1), job(4, 1, -1)};
        int np = place_plan(&w, 1, js, 4, p, 64, NULL, &r);
        CHECK(picked(p, np, 0) && r.job == 1 && r.start_in == 30, "reservation %d %g", r.job,
              r.start_in);
        CHECK(np == 2 && picked(p, np, 2) && !picked(p, np, 3), "%d picks", np);
    }
    { /* the deadline holds: the next plan, 4 s later, sees the reservation's jobs still with
       * 10 s left (they overran their estimate) and a 1-GPU job of 8 s; with the previous
       * deadline brought to now (10 - 4 = 6 s) it would end after it: not backfilled. Without
       * a previous reservation it would be. */
        place_worker w = worker(8, 1);
        for (int i = 0; i < 7; i++)
            busy(&w, i, 10);
        place_job js[2] = {job(1, 8, 100), job(2, 1, 8)};
        place_reservation prev = {.job = 0, .worker = 0, .job_id = 1, .start_in = 6};
        int np = place_plan(&w, 1, js, 2, p, 64, &prev, &r);
        CHECK(np == 0 && r.job_id == 1 && r.start_in == 6, "%d picks, start in %g", np, r.start_in);
        np = place_plan(&w, 1, js, 2, p, 64, NULL, &r);
        CHECK(np == 1 && p[0].job == 1 && r.start_in == 10, "%d picks", np);
    }
    { /* best fit: a 1-GPU job goes where the fewest GPUs are free, keeping the idle 8 whole */
        place_worker ws[2] = {worker(8, 1), worker(8, 1)};
        for (int i = 0; i < 7; i++)
            busy(&ws[1], i, 100);
        place_job js[2] = {job(1, 1, 5), job(2, 8, 5)};
        int np = place_plan(ws, 2, js, 2, p, 64, NULL, &r);
        CHECK(np == 2 && p[0].worker == 1 && p[1].worker == 0, "best fit");
        CHECK(p[1].mask == 0xff);
    }
    { /* out of service: an 8-GPU job cannot run on 7 good GPUs and reserves nothing; a GPU
       * job never lands on the bad GPU; a job for another checkpoint waits */
        place_worker w = worker(8, 1);
        w.in_service[2] = 0;
        place_job js[3] = {job(1, 8, 5), job(2, 7, 5), job(3, 1, 5)};
        js[2].checkpoint = "other";
        int np = place_plan(&w, 1, js, 3, p, 64, NULL, &r);
        CHECK(r.job == -1, "reservation for a job that can never run here");
        CHECK(np == 1 && p[0].job == 1 && !(p[0].mask >> 2 & 1) &&
                  __builtin_popcountll(p[0].mask) == 7,
              "7-GPU job");
    }
    { /* one-job worker (CPU or older): busy means busy; idle takes one job on all it has */
        place_worker w = worker(1, 1);
        w.one_job = 1;
        place_job js[2] = {job(1, 1, 5), job(2, 1, 5)};
        int np = place_plan(&w, 1, js, 2, p, 64, NULL, &r);
        CHECK(np == 1 && p[0].job == 0);
        busy(&w, 0, 5);
        np = place_plan(&w, 1, js, 2, p, 64, NULL, &r);
        CHECK(np == 0);
        place_worker d = worker(4, 1); /* draining: nothing */
        d.eligible = 0;
        np = place_plan(&d, 1, js, 2, p, 64, NULL, &r);
        CHECK(np == 0 && r.job == -1);
    }
    { /* precisions (bit 0 bf16, bit 1 fp8): worker 0 loaded bf16 only, worker 1 fp8 only,
       * worker 2 (an older worker naming none) counts as bf16 only. Jobs: fp8, bf16, fp8, bf16.
       * Each fp8 job can only go to worker 1 (2 GPUs: both start there); the bf16 jobs go to
       * workers 0 and 2 (best fit: both have 1 GPU, the first found wins, then the other). */
        place_worker ws[3] = {worker(1, 1), worker(2, 1), worker(1, 1)};
        ws[0].precisions = 1u;
        ws[1].precisions = 2u;
        ws[2].precisions = 0;
        CHECK(place_has_precision(&ws[0], 0) && !place_has_precision(&ws[0], 1));
        CHECK(!place_has_precision(&ws[1], 0) && place_has_precision(&ws[1], 1));
        CHECK(place_has_precision(&ws[2], 0) && !place_has_precision(&ws[2], 1));
        CHECK(!place_has_precision(&ws[0], -1) && !place_has_precision(&ws[0], 40));
        place_job js[4] = {job(1, 1, 10), job(2, 1, 10), job(3, 1, 10), job(4, 1, 10)};
        js[0].precision = js[2].precision = 1;
        int np = place_plan(ws, 3, js, 4, p, 64, NULL, &r);
        CHECK(np == 4, "%d picks", np);
        for (int i = 0; i < np; i++) {
            if (js[p[i].job].precision == 1)
                CHECK(p[i].worker == 1, "fp8 job %d on worker %d", p[i].job, p[i].worker);
            else
                CHECK(p[i].worker != 1, "bf16 job %d on the fp8-only worker", p[i].job);
        }
        /* a third fp8 job while worker 1 is full: it waits there (a reservation), never on the
         * free bf16 workers */
        place_worker w2[2] = {worker(2, 1), worker(2, 1)};
        w2[0].precisions = 1u;
        w2[1].precisions = 3u;
        busy(&w2[1], 0, 10);
        busy(&w2[1], 1, 10);
        place_job f = job(5, 1, 10);
        f.precision = 1;
        np = place_plan(w2, 2, &f, 1, p, 64, NULL, &r);
        CHECK(np == 0 && r.job == 0 && r.worker == 1 && r.start_in == 10,
              "%d picks, reservation on %d in %g", np, r.worker, r.start_in);
        /* no worker has it: no pick and no reservation (nothing held back for it) */
        w2[1].precisions = 1u;
        np = place_plan(w2, 2, &f, 1, p, 64, NULL, &r);
        CHECK(np == 0 && r.job == -1);
    }
    { /* a job lost with worker "a" goes elsewhere when another worker takes it now, even one
       * that best fit would rank lower (b has more free GPUs than a); back to a only when none
       * other can (b busy, c on another checkpoint) */
        place_worker ws[3] = {worker(1, 1), worker(2, 1), worker(1, 1)};
        ws[0].id = "a", ws[1].id = "b", ws[2].id = "c";
        ws[2].checkpoint = "other";
        place_job j = job(1, 1, 10);
        j.checkpoint = "ckpt";
        j.avoid = "a";
        int np = place_plan(ws, 3, &j, 1, p, 64, NULL, &r);
        CHECK(np == 1 && p[0].worker == 1, "lost job placed on worker %d", np ? p[0].worker : -1);
        place_worker ws2[3] = {worker(1, 1), worker(2, 1), worker(1, 1)};
        ws2[0].id = "a", ws2[1].id = "b", ws2[2].id = "c";
        ws2[2].checkpoint = "other";
        busy(&ws2[1], 0, 10);
        busy(&ws2[1], 1, 10);
        np = place_plan(ws2, 3, &j, 1, p, 64, NULL, &r);
        CHECK(np == 1 && p[0].worker == 0, "no other free: worker %d", np ? p[0].worker : -1);
        /* without avoid, best fit picks a (fewest free GPUs) */
        place_worker ws3[2] = {worker(1, 1), worker(2, 1)};
        ws3[0].id = "a", ws3[1].id = "b";
        j.avoid = NULL;
        np = place_plan(ws3, 2, &j, 1, p, 64, NULL, &r);
        CHECK(np == 1 && p[0].worker == 0);
    }
    { /* why no worker could ever take a job: checkpoint first, then precision, GPUs, memory;
       * busy, draining or blocklisted workers still count (place_unfit is about capability) */
        place_worker ws[2] = {worker(1, 1), worker(4, 1)};
        ws[1].checkpoint = "big";
        ws[1].precisions = 3u;
        busy(&ws[0], 0, 10);
        ws[0].eligible = 0;
        const char *field = NULL;
        char why[200];
        place_job j = job(1, 1, 10);
        CHECK(place_unfit(ws, 2, &j, &field, why, sizeof why) == 0);
        j.checkpoint = "ckpt";
        CHECK(place_unfit(ws, 2, &j, &field, why, sizeof why) == 0, "busy/ineligible still able");
        j.checkpoint = "nope";
        CHECK(place_unfit(ws, 2, &j, &field, why, sizeof why) == 1 &&
                  !strcmp(field, "checkpoint") && !strcmp(why, "no worker has checkpoint nope"),
              "%s: %s", field, why);
        j.checkpoint = "ckpt";
        j.precision = 1;
        CHECK(place_unfit(ws, 2, &j, &field, why, sizeof why) == 1 && !strcmp(field, "precision") &&
                  !strcmp(why, "no worker renders precision fp8 with checkpoint ckpt"),
              "%s: %s", field, why);
        j.checkpoint = NULL;
        CHECK(place_unfit(ws, 2, &j, &field, why, sizeof why) == 0); /* "big" has fp8 */
        j.precision = 0;
        j.gpus = 5;
        ws[1].in_service[3] = 0;
        CHECK(place_unfit(ws, 2, &j, &field, why, sizeof why) == 1 && !strcmp(field, "gpus") &&
                  !strcmp(why, "no worker with 5 GPUs (the most any has in service: 3)"),
              "%s: %s", field, why);
        j.gpus = 2;
        j.min_memory = 100ull << 30;
        CHECK(place_unfit(ws, 2, &j, &field, why, sizeof why) == 1 &&
                  !strcmp(field, "min_gpu_memory") &&
                  !strcmp(why, "no worker with 2 GPUs of at least 100.0 GiB (at most 0)"),
              "%s: %s", field, why);
        ws[1].memory[0] = ws[1].memory[1] = 141ull << 30;
        CHECK(place_unfit(ws, 2, &j, &field, why, sizeof why) == 0);
    }
    { /* estimates: rate x steps x frames x height x width; unknown without a size or a rate */
        place_worker w = worker(1, 2e-6);
        place_job j = {.id = 1, .gpus = 1, .steps = 10, .frames = 56, .height = 32, .width = 32};
        CHECK(place_estimate(&w, &j) > 1.1468 && place_estimate(&w, &j) < 1.1469);
        j.frames = 0;
        CHECK(place_estimate(&w, &j) < 0);
        w.rate = 0;
        j.frames = 56;
        CHECK(place_estimate(&w, &j) < 0);
    }
    return check_report("test_place");
}
