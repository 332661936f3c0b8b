/* Request checks and conversions used inside coordinator/ (the public ones are in client.h). */
#ifndef VDN_COORD_SPEC_H
#define VDN_COORD_SPEC_H

#include "client.h"

/* Range checks; messages start with `where` ("job 3 of the batch"). 0 ok, -1 with errors. */
int vdn_job_spec_validate(const vdn_job_spec *s, vdn_errlist *errs, const char *where);
/* The fewest sequence rows the request makes on any released checkpoint (2 x 2 latent patches,
 * one text row, no keyframes); 0 when a size is left out. */
long long vdn_job_min_rows(const vdn_job_spec *s);
/* Normalized JSON of a spec (what the jobs table stores); malloc'd. */
char *vdn_job_spec_to_json(const vdn_job_spec *s);
/* Deep copy out of a decoded RenderRequest; free with vdn_job_spec_free. */
void vdn_job_spec_from_proto(const Vdn__RenderRequest *r, vdn_job_spec *s);

#endif
