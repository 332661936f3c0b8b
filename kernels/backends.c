/* Registration of the built-in backends (backends.h). Compiled as C into every build; the CUDA
 * table exists only where the toolkit was found (VDN_HAVE_CUDA). */
#include "backends.h"

#include "op_backend.h"

#ifdef VDN_HAVE_CUDA
extern const vdn_dev_backend vdn_cuda_dev_backend; /* kernels/op_cuda.cu */
#endif

int vdn_backends_register(void) {
#ifdef VDN_HAVE_CUDA
    return vdn_dev_backend_register(&vdn_cuda_dev_backend);
#else
    return 0;
#endif
}
