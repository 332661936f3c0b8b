/* Human-readable tables of the API replies (shared by status, ls, watch, logs, workers). */
#ifndef VDN_COORD_PRINT_H
#define VDN_COORD_PRINT_H

#include <stdio.h>

#include "vdn.pb-c.h"

void print_batches(FILE *f, Vdn__BatchInfo **b, size_t n);
void print_jobs(FILE *f, Vdn__JobInfo **j, size_t n);
void print_job_detail(FILE *f, const Vdn__JobInfo *j);
/* One GPU of a worker: "gpu 3   j12      NFE 5/30  40.1/140 GiB", "free", "OUT OF SERVICE". */
void print_gpu_line(char *buf, size_t len, const Vdn__Gpu *g);
void print_workers(FILE *f, Vdn__WorkerInfo **w, size_t n);
void print_logs(FILE *f, const Vdn__LogsReply *r);
/* "12.3 s", "4 m 05 s", "1 h 02 m" */
const char *fmt_duration(double s, char *buf, size_t n);

#endif
