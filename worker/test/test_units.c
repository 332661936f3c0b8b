/* Unit tests of the worker's parsers: --gpus specs, nvidia-smi output, the cluster config file,
 * and the choice of output keys. Expected values are written out by hand from the formats'
 * definitions, and every malformed input must give an error naming what was wrong. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "attempt.h"
#include "blame.h"
#include "conf.h"
#include "gpus.h"
#include "vdn_util.h"
#include "../../ops/test/check.h"

static void test_gpu_spec(void) {
    int sel[64];
    char err[VDN_ERR_LEN];
    CHECK(vdn_parse_gpu_spec("0-7", sel, 64, err, sizeof err) == 8, "0-7");
    for (int i = 0; i < 8; i++)
        CHECK(sel[i] == i, "0-7 [%d] = %d", i, sel[i]);
    CHECK(vdn_parse_gpu_spec("5,1-2,1", sel, 64, err, sizeof err) == 3, "dedupe");
    CHECK(sel[0] == 1 && sel[1] == 2 && sel[2] == 5, "sorted %d %d %d", sel[0], sel[1], sel[2]);
    CHECK(vdn_parse_gpu_spec("none", sel, 64, err, sizeof err) == 0, "none");
    CHECK(vdn_parse_gpu_spec("", sel, 64, err, sizeof err) == 0, "empty");
    const char *bad[] = {"a", "0-", "-1", "3-1", "0,,1", "0;1", "1-2-3", "99999999", "0-100"};
    const char *want[] = {"expected a GPU index", "end of a range",       "expected a GPU index",
                          "runs backwards",       "expected a GPU index", "unexpected ';'",
                          "unexpected '-'",       "expected a GPU index", "more than 64"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        err[0] = 0;
        int n = vdn_parse_gpu_spec(bad[i], sel, 64, err, sizeof err);
        CHECK(n == -1, "'%s' accepted (%d)", bad[i], n);
        CHECK(strstr(err, want[i]) && strstr(err, bad[i]), "'%s': error '%s' lacks '%s'", bad[i],
              err, want[i]);
    }
}

static void test_nvidia_smi(void) {
    vdn_gpu_list l;
    char err[VDN_ERR_LEN];
    const char *ok = "0, NVIDIA H200, 143771\n1, NVIDIA H200, 143771\n\n";
    CHECK(vdn_parse_nvidia_smi(ok, &l, err, sizeof err) == 0, "%s", err);
    CHECK(l.n == 2, "n = %d", l.n);
    CHECK(l.gpu[1].index == 1 && l.gpu[1].memory_mib == 143771, "gpu1 %d %llu", l.gpu[1].index,
          (unsigned long long)l.gpu[1].memory_mib);
    CHECK(!strcmp(l.gpu[0].name, "NVIDIA H200"), "name '%s'", l.gpu[0].name);
    const char *bad[] = {"0, H200\n", "x, H200, 10\n", "0, H200, lots\n", "0, H200, -5\n",
                         "0 H200 10\n"};
    const char *want[] = {"expected 'index, name, memory.total'", "index 'x'",
                          "memory.total 'lots'", "memory.total '-5'", "expected 'index, name"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        err[0] = 0;
        CHECK(vdn_parse_nvidia_smi(bad[i], &l, err, sizeof err) == -1, "'%s' accepted", bad[i]);
        CHECK(strstr(err, want[i]) && strstr(err, "line 1"), "error '%s' lacks '%s'", err, want[i]);
    }
}

static void test_conf(void) {
    vdn_conf c;
    char err[VDN_ERR_LEN];
    const char *ok = "# comment\n\nworker_endpoint = tcp://10.0.0.1:5555\r\n"
                     "  store=s3://b/p  \nworker = gpu01 gpus=0-7\nworker = gpu02\n";
    CHECK(vdn_conf_parse(&c, "x.conf", ok, err, sizeof err) == 0, "%s", err);
    CHECK(c.n == 4, "n = %d", c.n);
    CHECK(!strcmp(vdn_conf_get(&c, "worker_endpoint"), "tcp://10.0.0.1:5555"), "endpoint '%s'",
          vdn_conf_get(&c, "worker_endpoint"));
    CHECK(!strcmp(vdn_conf_get(&c, "store"), "s3://b/p"), "store '%s'", vdn_conf_get(&c, "store"));
    CHECK(!strcmp(vdn_conf_get_nth(&c, "worker", 1), "gpu02"), "worker 1");
    CHECK(vdn_conf_get_nth(&c, "worker", 2) == NULL, "worker 2");
    CHECK(vdn_conf_get(&c, "db") == NULL, "db");
    vdn_conf_free(&c);
    /* the text encoder's precision is a worker setting of the file (vdn worker checks the value) */
    CHECK(vdn_conf_parse(&c, "x.conf", "text_precision = fp8\n", err, sizeof err) == 0, "%s", err);
    CHECK(vdn_conf_get(&c, "text_precision") && !strcmp(vdn_conf_get(&c, "text_precision"), "fp8"),
          "text_precision '%s'", vdn_conf_get(&c, "text_precision"));
    vdn_conf_free(&c);
    /* so is the video decoder's */
    CHECK(vdn_conf_parse(&c, "x.conf", "vae_precision = fp8\n", err, sizeof err) == 0, "%s", err);
    CHECK(vdn_conf_get(&c, "vae_precision") && !strcmp(vdn_conf_get(&c, "vae_precision"), "fp8"),
          "vae_precision '%s'", vdn_conf_get(&c, "vae_precision"));
    vdn_conf_free(&c);

    struct {
        const char *text, *want;
    } bad[] = {
        {"store\n", "x.conf:1: expected 'key = value'"},
        {"\n= v\n", "x.conf:2: missing key"},
        {"Store = a\n", "x.conf:1: key 'Store': expected lowercase"},
        {"stor = a\n", "x.conf:1: unknown key 'stor'"},
        {"db =\n", "x.conf:1: key 'db' has an empty value"},
        {"db = a\ndb = b\n", "x.conf:2: key 'db' given again (first on line 1)"},
        {"db = a\x01\n", "x.conf:1: control character 0x01"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        err[0] = 0;
        CHECK(vdn_conf_parse(&c, "x.conf", bad[i].text, err, sizeof err) == -1, "case %zu accepted",
              i);
        CHECK(strstr(err, bad[i].want), "case %zu: error '%s' lacks '%s'", i, err, bad[i].want);
    }
    char *longline = vdn_xmalloc(6000);
    memset(longline, 'a', 5999);
    longline[5999] = 0;
    CHECK(vdn_conf_parse(&c, "x.conf", longline, err, sizeof err) == -1 &&
              strstr(err, "x.conf:1: line longer"),
          "long line: '%s'", err);
    free(longline);

    /* Round trip through the writer `vdn up` uses. */
    char path[] = "/tmp/vdn-test-conf-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0, "mkstemp");
    close(fd);
    const char *k[] = {"client_endpoint", "db"}, *v[] = {"tcp://127.0.0.1:1", "/a b/vdn.db"};
    CHECK(vdn_conf_write(path, k, v, 2, err, sizeof err) == 0, "%s", err);
    CHECK(vdn_conf_load(&c, path, err, sizeof err) == 0, "%s", err);
    CHECK(c.n == 2 && !strcmp(vdn_conf_get(&c, "db"), "/a b/vdn.db"), "round trip");
    vdn_conf_free(&c);
    unlink(path);
}

static void test_output_keys(void) {
    char buf[2200], err[VDN_ERR_LEN];
    const char *lat, *rec;
    vdn_assignment s = {0};
    s.job_id = 34;
    CHECK(vdn_attempt_output_keys(&s, &lat, &rec, buf, sizeof buf, err, sizeof err) == 0, "%s",
          err);
    CHECK(!strcmp(lat, "jobs/34/out.safetensors") && !strcmp(rec, "jobs/34/out.json"), "%s %s", lat,
          rec);
    s.output_prefix = "b1/j2/clip";
    CHECK(vdn_attempt_output_keys(&s, &lat, &rec, buf, sizeof buf, err, sizeof err) == 0, "%s",
          err);
    CHECK(!strcmp(lat, "b1/j2/clip.safetensors") && !strcmp(rec, "b1/j2/clip.json"), "%s %s", lat,
          rec);
    char *keys[] = {"x/run.json", "x/lat.safetensors"};
    s.keys = keys;
    s.nkeys = 2;
    CHECK(vdn_attempt_output_keys(&s, &lat, &rec, buf, sizeof buf, err, sizeof err) == 0, "%s",
          err);
    CHECK(lat == keys[1] && rec == keys[0], "keys by suffix");
    char *bad1[] = {"x/run.json", "x/out.mp4"}, *bad2[] = {"a.json", "b.json"},
         *bad3[] = {"a.json"};
    s.keys = bad1;
    CHECK(vdn_attempt_output_keys(&s, &lat, &rec, buf, sizeof buf, err, sizeof err) == -1 &&
              strstr(err, "output_keys[1] 'x/out.mp4'"),
          "mp4: %s", err);
    s.keys = bad2;
    CHECK(vdn_attempt_output_keys(&s, &lat, &rec, buf, sizeof buf, err, sizeof err) == -1 &&
              strstr(err, "name the same output"),
          "two json: %s", err);
    s.keys = bad3;
    s.nkeys = 1;
    CHECK(vdn_attempt_output_keys(&s, &lat, &rec, buf, sizeof buf, err, sizeof err) == -1 &&
              strstr(err, "expected one .safetensors and one .json"),
          "one key: %s", err);
}

/* The shipped example must parse, or the docs lead users into an error. */
static void test_example(const char *path) {
    vdn_conf c;
    char err[VDN_ERR_LEN];
    CHECK(vdn_conf_load(&c, path, err, sizeof err) == 0, "%s", err);
    CHECK(vdn_conf_get(&c, "worker_endpoint") && vdn_conf_get(&c, "store"), "%s lacks keys", path);
    CHECK(vdn_conf_get_nth(&c, "worker", 2) != NULL, "%s: expected 3 worker lines", path);
    vdn_conf_free(&c);
}

static int same_bytes(const char *a, const char *b) {
    char err[VDN_ERR_LEN];
    size_t na, nb;
    char *x = vdn_read_file(a, &na, err, sizeof err), *y = vdn_read_file(b, &nb, err, sizeof err);
    int same = x && y && na == nb && !memcmp(x, y, na);
    free(x);
    free(y);
    return same;
}

/* --data-root (roots.c): a path under a root as spelled, opened beneath the root's descriptor
 * without following any symlink, copied privately; a root's name as a mere string prefix
 * ("/x/data" vs "/x/data2") is not inside. */
static void test_data_roots(void) {
    char dir[] = "/tmp/vdn_roots_XXXXXX", p[512], err[VDN_ERR_LEN];
    if (!mkdtemp(dir)) return;
    char root[300], root2[300], inside[400], outside[400], link[400], dotdot[500], dest[400];
    char sub[400], linkdir[400], via[500], inlink[400], fifo[400];
    snprintf(root, sizeof root, "%s/data", dir);
    snprintf(root2, sizeof root2, "%s/data2", dir);
    snprintf(inside, sizeof inside, "%s/a.safetensors", root);
    snprintf(outside, sizeof outside, "%s/b.safetensors", root2);
    snprintf(link, sizeof link, "%s/link.safetensors", root);
    snprintf(dotdot, sizeof dotdot, "%s/../data2/b.safetensors", root);
    snprintf(dest, sizeof dest, "%s/copy.safetensors", dir);
    snprintf(sub, sizeof sub, "%s/sub", root);
    snprintf(linkdir, sizeof linkdir, "%s/linkdir", root); /* a symlink to a folder outside */
    snprintf(via, sizeof via, "%s/linkdir/b.safetensors", root);
    snprintf(inlink, sizeof inlink, "%s/inlink.safetensors", root); /* to a file inside */
    snprintf(fifo, sizeof fifo, "%s/fifo", root);
    CHECK(vdn_mkdir_p(root, err, sizeof err) == 0 && vdn_mkdir_p(root2, err, sizeof err) == 0 &&
          vdn_mkdir_p(sub, err, sizeof err) == 0);
    CHECK(vdn_write_file_atomic(inside, "inside bytes", 12, err, sizeof err) == 0);
    CHECK(vdn_write_file_atomic(outside, "secret outside", 14, err, sizeof err) == 0);
    CHECK(symlink(outside, link) == 0 && symlink(root2, linkdir) == 0 &&
          symlink(inside, inlink) == 0 && mkfifo(fifo, 0600) == 0);
    const char *roots[1] = {root};
    /* a file under the root: copied, byte for byte, private (0600) */
    CHECK(vdn_root_copy(inside, roots, 1, dest, err, sizeof err) == 0 && same_bytes(dest, inside),
          "%s", err);
    struct stat sb;
    CHECK(stat(dest, &sb) == 0 && (sb.st_mode & 0777) == 0600, "copy mode %o", sb.st_mode & 0777);
    /* the copy is the render's: truncating the original afterwards changes nothing */
    CHECK(truncate(inside, 0) == 0 && stat(dest, &sb) == 0 && sb.st_size == 12);
    CHECK(vdn_write_file_atomic(inside, "inside bytes", 12, err, sizeof err) == 0);
    CHECK(vdn_root_copy(outside, roots, 1, dest, err, sizeof err) == -1 && strstr(err, "outside") &&
              strstr(err, outside) && strstr(err, root),
          "%s", err);
    /* symlinks: to a file outside, through a folder outside, even to a file inside: refused */
    CHECK(vdn_root_copy(link, roots, 1, dest, err, sizeof err) == -1 && strstr(err, "symlink"),
          "symlink: %s", err);
    CHECK(vdn_root_copy(via, roots, 1, dest, err, sizeof err) == -1 && strstr(err, "symlink"),
          "symlinked folder: %s", err);
    CHECK(vdn_root_copy(inlink, roots, 1, dest, err, sizeof err) == -1 && strstr(err, "symlink"),
          "symlink inside: %s", err);
    CHECK(vdn_root_copy(dotdot, roots, 1, dest, err, sizeof err) == -1 && strstr(err, "'..'"),
          "..: %s", err);
    CHECK(vdn_root_copy(fifo, roots, 1, dest, err, sizeof err) == -1 &&
              strstr(err, "not a regular file"),
          "fifo: %s", err);
    CHECK(vdn_root_copy(sub, roots, 1, dest, err, sizeof err) == -1 &&
              strstr(err, "not a regular file"),
          "folder: %s", err);
    CHECK(vdn_root_copy(inside, roots, 0, dest, err, sizeof err) == -1 &&
              strstr(err, "--data-root"),
          "no roots: %s", err);
    snprintf(p, sizeof p, "%s/missing.safetensors", root);
    CHECK(vdn_root_copy(p, roots, 1, dest, err, sizeof err) == -1 && strstr(err, "no such file"),
          "missing: %s", err);
    const char *both[2] = {root2, root}, *slash[1] = {"/"};
    CHECK(vdn_root_copy(outside, both, 2, dest, err, sizeof err) == 0 && same_bytes(dest, outside),
          "%s", err);
    CHECK(vdn_root_copy(link, slash, 1, dest, err, sizeof err) == -1 && strstr(err, "symlink"),
          "root /: %s", err);
    CHECK(vdn_root_copy(inside, slash, 1, dest, err, sizeof err) == 0, "root /: %s", err);
    /* the walk older kernels get: the same refusals */
    int rfd = open(root, O_RDONLY | O_DIRECTORY);
    int fd = vdn_open_beneath_walk(rfd, "a.safetensors", O_RDONLY, 0);
    CHECK(fd >= 0, "walk: %s", strerror(errno));
    if (fd >= 0) close(fd);
    CHECK(vdn_open_beneath_walk(rfd, "link.safetensors", O_RDONLY, 0) < 0 && errno == ELOOP,
          "walk: link");
    CHECK(vdn_open_beneath_walk(rfd, "linkdir/b.safetensors", O_RDONLY, 0) < 0 &&
              (errno == ENOTDIR || errno == ELOOP),
          "walk: linked folder");
    CHECK(vdn_open_beneath_walk(rfd, "missing", O_RDONLY, 0) < 0 && errno == ENOENT,
          "walk: missing");
    close(rfd);
    remove(link), remove(linkdir), remove(inlink), remove(fifo), remove(inside), remove(outside);
    remove(dest), rmdir(sub), rmdir(root), rmdir(root2), rmdir(dir);
}

/* Failure blame (blame.h). The messages are the shapes the code really writes: kernels/op_cuda.h
 * OPC/OPK ("op NAME (cuda:N): CALL: cudaGetErrorString"), the cuBLAS statuses of
 * op_cuda_linear.cu, comm_nccl.cu, cuda_alloc and the op layer's tensor_new, as the render loop
 * wraps them ("cuda:0: ..."); and job faults: the front end's refusals, the CUDA backend's
 * refusals of shapes it cannot take, request errors, a bad prompt cache. */
static void test_blame(void) {
    struct {
        const char *msg;
        vdn_engine_fault words; /* what the message alone says */
    } cases[] = {
        {"cuda:0: op linear (cuda:0): cudaGetLastError(): an illegal memory access was "
         "encountered",
         VDN_ENGINE_FAULT_DEVICE},
        {"cuda:3: op sync (cuda:3): cudaStreamSynchronize(cdev(d)->st): unspecified launch "
         "failure",
         VDN_ENGINE_FAULT_DEVICE},
        {"cuda:1: op attention (cuda:1): vdn_attn_wgmma(...) failed (details on stderr)",
         VDN_ENGINE_FAULT_DEVICE},
        {"cuda:2: op linear (cuda:2): cublasSgemm (rows 4096, out 5120, in 5120): status 13",
         VDN_ENGINE_FAULT_DEVICE},
        {"cuda:0: comm nccl (rank 1 of 8): ncclGroupEnd: unhandled cuda error",
         VDN_ENGINE_FAULT_DEVICE},
        {"cuda:0: cuda: cudaMalloc of 8589934592 bytes on cuda:0: out of memory (100 of 143771 "
         "MiB free)",
         VDN_ENGINE_FAULT_MEMORY},
        {"cuda:0: op linear (cuda:0): cudaMallocAsync(&p, n, st): out of memory",
         VDN_ENGINE_FAULT_MEMORY},
        {"cpu: tensor_new: out of device memory for F32[2097152, 5120] (42949672960 bytes)",
         VDN_ENGINE_FAULT_MEMORY},
        {"bad prompt cache: /data/p.safetensors: not a safetensors file (header length "
         "1953719668 > file size 12)",
         VDN_ENGINE_FAULT_NONE},
        {"cuda:0: op linear: w is F32[6,7], expected [6, 8]", VDN_ENGINE_FAULT_NONE},
        {"cuda:0: op attention: head_dim 96 on cuda: the kernels take 64 or 128",
         VDN_ENGINE_FAULT_NONE},
        {"request: variant 'vdn' needs a VDN checkpoint (this one has no linear branch); use "
         "dense",
         VDN_ENGINE_FAULT_NONE},
        {"local path '/etc/passwd' refused: it is outside this worker's --data-root (/srv)",
         VDN_ENGINE_FAULT_NONE},
        {"dit: 3 rows cannot be sharded over 4 ranks (ceil(S/P) rows each leaves the last rank "
         "none)",
         VDN_ENGINE_FAULT_NONE},
        {"op linear (cuda:x): not a device name", VDN_ENGINE_FAULT_NONE},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const char *m = cases[i].msg;
        vdn_engine_fault w = cases[i].words;
        CHECK(vdn_blame_message(m) == w, "'%s': words say %d, expected %d", m,
              (int)vdn_blame_message(m), (int)w);
        int gpu = -1;
        /* no record: the words decide */
        vdn_fault f = vdn_blame_render(VDN_ENGINE_FAULT_NONE, m, &gpu);
        CHECK(f == (w == VDN_ENGINE_FAULT_NONE ? VDN_FAULT_JOB : VDN_FAULT_WORKER),
              "'%s': blamed %d", m, (int)f);
        CHECK(gpu == (w == VDN_ENGINE_FAULT_DEVICE), "'%s': gpu fault %d", m, gpu);
        /* the devices' record wins over any words */
        f = vdn_blame_render(VDN_ENGINE_FAULT_DEVICE, m, &gpu);
        CHECK(f == VDN_FAULT_WORKER && gpu == 1, "'%s' with a DEVICE record: %d, gpu %d", m, (int)f,
              gpu);
        f = vdn_blame_render(VDN_ENGINE_FAULT_MEMORY, m, &gpu);
        CHECK(f == VDN_FAULT_WORKER && gpu == 0, "'%s' with a MEMORY record: %d, gpu %d", m, (int)f,
              gpu);
    }
    int gpu = -1;
    CHECK(vdn_blame_render(VDN_ENGINE_FAULT_NONE, NULL, &gpu) == VDN_FAULT_JOB && gpu == 0,
          "no message");
}

int main(int argc, char **argv) {
    if (argc > 1) test_example(argv[1]);
    test_gpu_spec();
    test_nvidia_smi();
    test_conf();
    test_output_keys();
    test_data_roots();
    test_blame();
    if (failures)
        fprintf(stderr, "test_worker_units: %d failure(s)\n", failures);
    else
        printf("test_worker_units: all passed\n");
    return failures ? 1 : 0;
}
