/* Inline SVG charts for the report, in the manner of the paper's quality figures: one small
 * panel per metric, a bar per variant with its 95% bootstrap interval, a dashed line at the
 * baseline, '*' over variants whose paired test against the baseline is significant, and a
 * labelled, truncated vertical scale. */
#ifndef VDN_EVAL_SVG_H
#define VDN_EVAL_SVG_H

#include "strbuf.h"

/* n bars; NAN means are drawn as "n/a". baseline: index drawn as the dashed reference line,
 * or -1. */
void vdn_svg_bars(vdn_sb *b, const char *title, const char *unit, int n, char *const *names,
                  const double *mean, const double *lo, const double *hi, const int *sig,
                  int baseline);

/* Line chart: series i has lens[i] points ys[i][0..]. x axis = latent frame. */
void vdn_svg_lines(vdn_sb *b, const char *title, int n, char *const *names, const double *const *ys,
                   const int *lens);

#endif
