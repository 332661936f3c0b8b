/* Qwen3-VL's image processor (transformers' Qwen2VLImageProcessor as the release's
 * processor/preprocessor_config.json sets it): a picture -> pixel_values rows and its grid.
 *
 *   smart resize: both sides to multiples of patch x merge (32), the area kept within
 *   [min_pixels, max_pixels] (size.shortest_edge / longest_edge);
 *   rescale and normalise: (x / 255 - mean) / std per channel, in float32;
 *   patches of patch x patch pixels, the picture repeated temporal_patch times (one picture is
 *   one frame pair: grid_t 1), rows in the 2 x 2 merge order (block row, block column, row in
 *   the block, column in the block), each row [channel][frame][y][x] as the patch embedding's
 *   Conv3d weight is laid out.
 *
 * A picture smart resize changes is resized with Pillow's BICUBIC (engine/core/resample.h, byte
 * for byte), as transformers' PIL backend does; its torchvision backend (the default where
 * torchvision is installed) resizes in float32 with antialiasing, a level off here and there.
 * MiniMax-H3 never resizes here: it puts keyframes on a canvas of multiples of 32 with a
 * 768-pixel short edge before they reach the processor, so smart resize keeps their size. */
#ifndef VDN_VISION_PREPROCESS_H
#define VDN_VISION_PREPROCESS_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    int64_t min_pixels, max_pixels; /* size.shortest_edge, size.longest_edge */
    int patch, temporal_patch, merge;
    float mean[3], std[3];
    double rescale; /* rescale_factor: 1 / 255 */
} vdn_vision_proc;

/* The release's settings (Qwen3-VL's preprocessor_config.json): 65536..16777216 pixels, 16-pixel
 * patches, 2 frames, 2 x 2 merge, mean = std = 0.5. */
vdn_vision_proc vdn_vision_proc_default(void);
/* path: a preprocessor_config.json. Errors name the file and field. */
int vdn_vision_proc_load(const char *path, vdn_vision_proc *p, char *err, size_t errlen);
/* The same from len bytes of JSON; path names them in errors. */
int vdn_vision_proc_parse(const char *json, size_t len, const char *path, vdn_vision_proc *p,
                          char *err, size_t errlen);

/* transformers' smart_resize: the size the processor resizes a height x width picture to. */
int vdn_vision_smart_resize(const vdn_vision_proc *p, int height, int width, int *out_h, int *out_w,
                            char *err, size_t errlen);

/* rgb: height rows of `stride` bytes, each width x (R, G, B) 8-bit. *rows: malloc'd float32
 * [grid[0] grid[1] grid[2], 3 temporal_patch patch^2]; grid: (t, h, w) in patches, as
 * image_grid_thw. 0, or -1 with an error (a size smart resize refuses). */
int vdn_vision_preprocess(const vdn_vision_proc *p, const uint8_t *rgb, int width, int height,
                          size_t stride, float **rows, int64_t grid[3], char *err, size_t errlen);

#endif
