/* The element types of tensors: what a safetensors file may hold and what the op layer computes
 * in. Here in the core, below the models and the checkpoint reader that share them. */
#ifndef VDN_DTYPE_H
#define VDN_DTYPE_H

/* Every dtype a safetensors file may hold is parsed, so a file is never refused for a tensor
 * nobody reads (e.g. float64 position_ids beside the noise). Only F32/BF16/F16 convert to float. */
typedef enum {
    VDN_DT_F32 = 0,
    VDN_DT_BF16,
    VDN_DT_F16,
    VDN_DT_I64,
    VDN_DT_I32,
    VDN_DT_U8,
    VDN_DT_F64,
    VDN_DT_I16,
    VDN_DT_I8,
    VDN_DT_U16,
    VDN_DT_U32,
    VDN_DT_U64,
    VDN_DT_BOOL,
    VDN_DT_F8_E4M3, /* fp8 e4m3 (OCP "fn": max 448, no infinities): quantised weights */
    VDN_DT_COUNT
} vdn_dtype;

#endif
