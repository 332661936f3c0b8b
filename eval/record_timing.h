/* The timing of one render, from its run record (engine/record.h writes it):
 * timing.nfe_seconds (array of numbers, one per model evaluation) and timing.total_seconds. */
#ifndef VDN_EVAL_RECORD_TIMING_H
#define VDN_EVAL_RECORD_TIMING_H

#include <stddef.h>

/* *s_per_nfe = mean of nfe_seconds, *total = total_seconds. -1 with "LABEL: ..." naming the
 * field and what was expected. */
int vdn_record_timing_parse(const char *text, size_t len, const char *label, double *s_per_nfe,
                            double *total, char *err, size_t errlen);

#endif
