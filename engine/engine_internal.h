/* The engine struct, shared by engine.c (open/close) and render.c (render). Not public. */
#ifndef VDN_ENGINE_INTERNAL_H
#define VDN_ENGINE_INTERNAL_H

#include "backend.h"
#include "ckpt.h"
#include "config.h"

struct vdn_engine {
    vdn_ckpt *ck;
    vdn_config cfg;
    const vdn_backend_ops *ops;
    vdn_backend *be;
};

#endif
