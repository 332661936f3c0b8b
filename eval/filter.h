/* Separable 1-D filters with scipy.ndimage's border modes, shared by SSIM and optical flow. */
#ifndef VDN_EVAL_FILTER_H
#define VDN_EVAL_FILTER_H

typedef enum {
    VDN_BORDER_REFLECT, /* ndimage 'reflect': d c b a | a b c d (edge sample repeated) */
    VDN_BORDER_MIRROR,  /* ndimage 'mirror':  d c b | a b c d (edge sample not repeated) */
    VDN_BORDER_NEAREST, /* ndimage 'nearest': a a a | a b c d */
} vdn_border;

int vdn_border_index(int i, int n, vdn_border mode);

/* Correlate every row, then every column, of img (h, w) with the symmetric kernel k of
 * length 2r+1; out may alias img. */
void vdn_filter_sep(const double *img, int h, int w, const double *k, int r, vdn_border mode,
                    double *out);

/* scipy.ndimage Gaussian kernel: radius = int(truncate * sigma + 0.5), normalized.
 * k must hold 2*radius+1 values; returns the radius. */
int vdn_gaussian_kernel(double sigma, double truncate, double *k, int kmax);

#endif
