/* The NCCL communicator (engine/comm.h): one rank per GPU, on the rank's CUDA device stream.
 * Built only where nccl.h is found (optional in CMake; on the GPU machine the nvidia-nccl wheel
 * ships it). Pieces of strided views (of one tensor, or of several: rows_to_cols_parts) are packed
 * into one contiguous staging buffer per direction with 2-D copies on the stream, exchanged with
 * grouped ncclSend/ncclRecv (one message per peer), and unpacked. */
#include <cuda_runtime.h>
#include <nccl.h>

#include <stdlib.h>
#include <string.h>

#include "op_cuda.h"
extern "C" {
#include "comm_nccl.h"
#include "vdn_util.h"
}

namespace {

struct NcclState {
    ncclComm_t comm;
    char *send, *recv; /* staging, grow-only */
    size_t send_bytes, recv_bytes;
};

NcclState *ns(vdn_comm *c) {
    return (NcclState *)c->state;
}
cudaStream_t stream_of(vdn_comm *c) {
    return cdev(c->dev)->st;
}

int fail_nccl(vdn_comm *c, const char *what, ncclResult_t r) {
    c->failed = 1;
    return vdn_dev_fault(c->dev, VDN_DEV_FAULT_DEVICE, "comm nccl (rank %d of %d): %s: %s", c->rank,
                         c->size, what, ncclGetErrorString(r));
}

int fail_cuda(vdn_comm *c, const char *what, cudaError_t e) {
    return vdn_dev_fault(c->dev, op_cuda_fault_kind(e), "comm nccl (rank %d): %s: %s", c->rank,
                         what, cudaGetErrorString(e));
}

int grow(vdn_comm *c, char **p, size_t *have, size_t want) {
    if (want <= *have) return 0;
    cudaError_t e = cudaStreamSynchronize(stream_of(c));
    if (e == cudaSuccess) e = cudaFree(*p);
    *p = NULL, *have = 0;
    if (e == cudaSuccess) e = cudaMalloc((void **)p, want);
    if (e != cudaSuccess) return fail_cuda(c, "staging buffer", e);
    *have = want;
    return 0;
}

/* a [rows, cols] block of t starting at (r0, c0): its address and pitch */
struct Block {
    char *ptr;
    size_t pitch, width; /* bytes */
    int64_t rows;
};
Block block(const vdn_tensor *t, int64_t r0, int64_t rows, int64_t c0, int64_t cols) {
    const size_t es = vdn_dtype_size(t->dtype);
    Block b;
    b.ptr = (char *)t->data + (size_t)(r0 * t->ld + c0) * es;
    b.pitch = (size_t)t->ld * es, b.width = (size_t)cols * es, b.rows = rows;
    return b;
}

/* One exchange: to each peer q the blocks send_block(q, i) of `in` tensors, i < n, and from it the
 * blocks recv_block(q, i) of `out` tensors (callbacks of (q, i) -> Block); a peer's blocks are
 * packed one after another into one message, sent, and unpacked, all on the stream. */
template <class SendF, class RecvF>
int exchange(vdn_comm *c, int n, SendF send_block, RecvF recv_block) {
    NcclState *s = ns(c);
    cudaStream_t st = stream_of(c);
    const int P = c->size;
    size_t soff[VDN_COMM_MAX_RANKS + 1] = {0}, roff[VDN_COMM_MAX_RANKS + 1] = {0};
    for (int q = 0; q < P; q++) {
        soff[q + 1] = soff[q], roff[q + 1] = roff[q];
        for (int i = 0; i < n; i++) {
            Block sb = send_block(q, i), rb = recv_block(q, i);
            soff[q + 1] += sb.width * (size_t)sb.rows;
            roff[q + 1] += rb.width * (size_t)rb.rows;
        }
    }
    if (grow(c, &s->send, &s->send_bytes, soff[P] ? soff[P] : 1) ||
        grow(c, &s->recv, &s->recv_bytes, roff[P] ? roff[P] : 1))
        return -1;
    for (int q = 0; q < P; q++) {
        size_t at = soff[q];
        for (int i = 0; i < n; i++) {
            Block b = send_block(q, i);
            if (b.rows && b.width) {
                cudaError_t e = cudaMemcpy2DAsync(s->send + at, b.width, b.ptr, b.pitch, b.width,
                                                  (size_t)b.rows, cudaMemcpyDeviceToDevice, st);
                if (e != cudaSuccess) return fail_cuda(c, "pack", e);
            }
            at += b.width * (size_t)b.rows;
        }
    }
    ncclResult_t r = ncclGroupStart();
    for (int q = 0; q < P && r == ncclSuccess; q++) {
        const size_t sn = soff[q + 1] - soff[q], rn = roff[q + 1] - roff[q];
        if (sn) r = ncclSend(s->send + soff[q], sn, ncclChar, q, s->comm, st);
        if (rn && r == ncclSuccess) r = ncclRecv(s->recv + roff[q], rn, ncclChar, q, s->comm, st);
        if (q != c->rank) c->bytes += rn;
    }
    ncclResult_t r2 = ncclGroupEnd();
    if (r != ncclSuccess || r2 != ncclSuccess)
        return fail_nccl(c, "send/recv", r != ncclSuccess ? r : r2);
    for (int q = 0; q < P; q++) {
        size_t at = roff[q];
        for (int i = 0; i < n; i++) {
            Block b = recv_block(q, i);
            if (b.rows && b.width) {
                cudaError_t e = cudaMemcpy2DAsync(b.ptr, b.pitch, s->recv + at, b.width, b.width,
                                                  (size_t)b.rows, cudaMemcpyDeviceToDevice, st);
                if (e != cudaSuccess) return fail_cuda(c, "unpack", e);
            }
            at += b.width * (size_t)b.rows;
        }
    }
    return 0;
}

/* The front end passes out = NULL when this rank's shapes were wrong: NCCL has no way to tell the
 * peers, so the group is aborted (their pending operations fail). */
int refuse(vdn_comm *c) {
    vdn_comm_abort(c);
    return -1;
}

/* part i's columns for rank q: its split's, or (cols NULL: gathered) all of them */
int64_t part_col0(const vdn_comm_part *p, int q) {
    return p->cols ? p->cols->off[q] : 0;
}
int64_t part_ncols(const vdn_comm_part *p, int q) {
    return p->cols ? vdn_split_len(p->cols, q) : vdn_tensor_cols(p->in);
}

int n_rows_to_cols_parts(vdn_comm *c, const vdn_comm_part *parts, int n, const vdn_split *rows) {
    if (!parts) return refuse(c);
    const int me = c->rank;
    return exchange(
        c, n,
        [&](int q, int i) {
            const vdn_comm_part *p = &parts[i];
            return block(p->in, 0, vdn_split_len(rows, me), part_col0(p, q), part_ncols(p, q));
        },
        [&](int q, int i) {
            const vdn_comm_part *p = &parts[i];
            return block(p->out, rows->off[q], vdn_split_len(rows, q), 0, part_ncols(p, me));
        });
}

int n_cols_to_rows(vdn_comm *c, vdn_tensor *out, const vdn_tensor *in, const vdn_split *rows,
                   const vdn_split *cols) {
    if (!out) return refuse(c);
    const int me = c->rank;
    return exchange(
        c, 1,
        [&](int q, int) {
            return block(in, rows->off[q], vdn_split_len(rows, q), 0, vdn_split_len(cols, me));
        },
        [&](int q, int) {
            return block(out, 0, vdn_split_len(rows, me), cols->off[q], vdn_split_len(cols, q));
        });
}

int n_all_reduce_sum(vdn_comm *c, vdn_tensor *x) {
    if (!x) return refuse(c);
    if (x->ld != vdn_tensor_cols(x))
        return vdn_dev_fail(c->dev, "comm nccl: all_reduce_sum of a strided view");
    ncclDataType_t dt = x->dtype == VDN_DT_F32    ? ncclFloat32
                        : x->dtype == VDN_DT_BF16 ? ncclBfloat16
                        : x->dtype == VDN_DT_F64  ? ncclFloat64
                                                  : ncclInt32;
    const size_t n = (size_t)vdn_tensor_numel(x);
    ncclResult_t r = ncclAllReduce(x->data, x->data, n, dt, ncclSum, ns(c)->comm, stream_of(c));
    /* what a ring all-reduce receives: (P - 1) / P of the data twice (reduce, then gather) */
    c->bytes += 2 * (uint64_t)(c->size - 1) * n * vdn_dtype_size(x->dtype) / (uint64_t)c->size;
    return r == ncclSuccess ? 0 : fail_nccl(c, "all-reduce", r);
}

int n_barrier(vdn_comm *c) {
    NcclState *s = ns(c);
    if (grow(c, &s->send, &s->send_bytes, 4)) return -1;
    ncclResult_t r = ncclAllReduce(s->send, s->send, 1, ncclInt32, ncclSum, s->comm, stream_of(c));
    if (r != ncclSuccess) return fail_nccl(c, "barrier", r);
    cudaError_t e = cudaStreamSynchronize(stream_of(c));
    return e == cudaSuccess ? 0 : fail_cuda(c, "barrier", e);
}

int n_abort(vdn_comm *c) {
    ncclCommAbort(ns(c)->comm);
    ns(c)->comm = NULL;
    return -1;
}

void n_free(vdn_comm *c) {
    NcclState *s = ns(c);
    if (s->comm) ncclCommDestroy(s->comm);
    cudaFree(s->send);
    cudaFree(s->recv);
    free(s);
    free(c);
}

const vdn_comm_impl nccl_impl = {
    "nccl", n_rows_to_cols_parts, n_cols_to_rows, n_all_reduce_sum, n_barrier, n_abort, n_free};

} // namespace

extern "C" int vdn_comm_nccl_unique_id(void *id, char *err, size_t errlen) {
    ncclUniqueId u;
    ncclResult_t r = ncclGetUniqueId(&u);
    if (r != ncclSuccess)
        return vdn_fail(err, errlen, "comm nccl: unique id: %s", ncclGetErrorString(r));
    memcpy(id, &u, sizeof u);
    return 0;
}

extern "C" vdn_comm *vdn_comm_nccl_open(vdn_dev *dev, int rank, int size, const void *id, char *err,
                                        size_t errlen) {
    if (!dev || strncmp(vdn_dev_name(dev), "cuda", 4) != 0) {
        vdn_fail(err, errlen, "comm nccl: rank %d needs a cuda device", rank);
        return NULL;
    }
    if (size < 1 || size > VDN_COMM_MAX_RANKS || rank < 0 || rank >= size) {
        vdn_fail(err, errlen, "comm nccl: rank %d of %d", rank, size);
        return NULL;
    }
    cudaSetDevice(cdev(dev)->gpu);
    ncclUniqueId u;
    memcpy(&u, id, sizeof u);
    NcclState *s = (NcclState *)calloc(1, sizeof *s);
    ncclResult_t r = ncclCommInitRank(&s->comm, size, u, rank);
    if (r != ncclSuccess) {
        vdn_fail(err, errlen, "comm nccl: init rank %d of %d: %s", rank, size,
                 ncclGetErrorString(r));
        free(s);
        return NULL;
    }
    vdn_comm *c = (vdn_comm *)calloc(1, sizeof *c);
    c->impl = &nccl_impl, c->rank = rank, c->size = size, c->dev = dev, c->state = s;
    return c;
}
