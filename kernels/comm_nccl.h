/* The NCCL communicator (comm.h; kernels/comm_nccl.cu, built only where nccl.h is found:
 * VDN_HAVE_NCCL). One rank per GPU; rank 0 makes the unique id and hands it to the others (a
 * worker: through its own process launch or a file). */
#ifndef VDN_COMM_NCCL_H
#define VDN_COMM_NCCL_H

#include <stddef.h>

#include "comm.h"

#ifdef __cplusplus
extern "C" {
#endif

#define VDN_NCCL_ID_BYTES VDN_COMM_ID_BYTES /* sizeof(ncclUniqueId), checked in comm_nccl.cu */

int vdn_comm_nccl_unique_id(void *id, char *err, size_t errlen);
/* rank `rank` of `size` on dev (a cuda device), joining the group of id; NULL + err */
vdn_comm *vdn_comm_nccl_open(vdn_dev *dev, int rank, int size, const void *id, char *err,
                             size_t errlen);

#ifdef __cplusplus
}
#endif
#endif
