#include "gpus.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "vdn_util.h"

static int cmp_int(const void *a, const void *b) {
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

/* Reads a non-negative decimal at *p, advancing it; -1 when there is none or it is too large. */
static long read_uint(const char **p) {
    const char *s = *p;
    if (!isdigit((unsigned char)*s)) return -1;
    long v = 0;
    while (isdigit((unsigned char)*s)) {
        v = v * 10 + (*s - '0');
        if (v > 100000) return -1;
        s++;
    }
    *p = s;
    return v;
}

int vdn_parse_gpu_spec(const char *spec, int *sel, int cap, char *err, size_t errlen) {
    if (!spec || !*spec || !strcmp(spec, "none")) return 0;
    int n = 0;
    const char *p = spec;
    for (;;) {
        long lo = read_uint(&p), hi = lo;
        if (lo < 0)
            return vdn_fail(err, errlen,
                            "--gpus '%s': expected a GPU index at offset %d (form: 0-7 or 0,2,5)",
                            spec, (int)(p - spec));
        if (*p == '-') {
            p++;
            hi = read_uint(&p);
            if (hi < 0)
                return vdn_fail(err, errlen,
                                "--gpus '%s': expected the end of a range at offset %d", spec,
                                (int)(p - spec));
            if (hi < lo)
                return vdn_fail(err, errlen, "--gpus '%s': range %ld-%ld runs backwards", spec, lo,
                                hi);
        }
        for (long g = lo; g <= hi; g++) {
            if (n >= cap) return vdn_fail(err, errlen, "--gpus '%s': more than %d GPUs", spec, cap);
            sel[n++] = (int)g;
        }
        if (*p == '\0') break;
        if (*p != ',')
            return vdn_fail(err, errlen, "--gpus '%s': unexpected '%c' at offset %d", spec, *p,
                            (int)(p - spec));
        p++;
    }
    qsort(sel, (size_t)n, sizeof *sel, cmp_int);
    int m = 0;
    for (int i = 0; i < n; i++)
        if (m == 0 || sel[m - 1] != sel[i]) sel[m++] = sel[i];
    return m;
}

static char *trim(char *s) {
    while (isspace((unsigned char)*s))
        s++;
    size_t n = strlen(s);
    while (n && isspace((unsigned char)s[n - 1]))
        s[--n] = '\0';
    return s;
}

int vdn_parse_nvidia_smi(const char *text, vdn_gpu_list *out, char *err, size_t errlen) {
    memset(out, 0, sizeof *out);
    int lineno = 0;
    const char *p = text;
    while (*p) {
        const char *eol = strchr(p, '\n');
        size_t len = eol ? (size_t)(eol - p) : strlen(p);
        lineno++;
        char line[512];
        if (len >= sizeof line)
            return vdn_fail(err, errlen, "nvidia-smi output line %d: longer than %zu bytes", lineno,
                            sizeof line - 1);
        memcpy(line, p, len);
        line[len] = '\0';
        p += len + (eol ? 1 : 0);
        char *s = trim(line);
        if (!*s) continue;
        /* index, name, memory.total — the name never holds a comma in NVIDIA's product names,
         * but split on the first and last comma so one would not break us. */
        char *c1 = strchr(s, ','), *c2 = strrchr(s, ',');
        if (!c1 || c1 == c2)
            return vdn_fail(err, errlen,
                            "nvidia-smi output line %d: expected 'index, name, memory.total', got "
                            "'%s'",
                            lineno, s);
        *c1 = *c2 = '\0';
        char *idx = trim(s), *name = trim(c1 + 1), *mem = trim(c2 + 1), *end;
        const char *q = idx;
        long index = read_uint(&q);
        if (index < 0 || *q)
            return vdn_fail(err, errlen, "nvidia-smi output line %d: index '%s' is not a number",
                            lineno, idx);
        errno = 0;
        unsigned long long mib = strtoull(mem, &end, 10);
        if (errno || end == mem || *end || mem[0] == '-')
            return vdn_fail(err, errlen,
                            "nvidia-smi output line %d: memory.total '%s' is not a number of MiB",
                            lineno, mem);
        if (out->n >= VDN_MAX_GPUS)
            return vdn_fail(err, errlen, "nvidia-smi output: more than %d GPUs", VDN_MAX_GPUS);
        vdn_gpu *g = &out->gpu[out->n++];
        g->index = (int)index;
        snprintf(g->name, sizeof g->name, "%s", name);
        g->memory_mib = mib;
    }
    return 0;
}

/* Runs argv, returns its stdout (malloc'd) or NULL when it cannot run or exits nonzero. */
static char *run_capture(char *const argv[]) {
    int fd[2];
    if (pipe(fd)) return NULL;
    pid_t pid = fork();
    if (pid < 0) {
        close(fd[0]);
        close(fd[1]);
        return NULL;
    }
    if (pid == 0) {
        dup2(fd[1], 1);
        close(fd[0]);
        close(fd[1]);
        execvp(argv[0], argv);
        _exit(127);
    }
    close(fd[1]);
    size_t cap = 4096, len = 0;
    char *buf = vdn_xmalloc(cap);
    for (;;) {
        if (len + 1 >= cap) buf = realloc(buf, cap *= 2);
        VDN_ASSERT(buf);
        ssize_t r = read(fd[0], buf + len, cap - len - 1);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        len += (size_t)r;
    }
    buf[len] = '\0';
    close(fd[0]);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        free(buf);
        return NULL;
    }
    return buf;
}

int vdn_gpu_inventory(const int *sel, int nsel, vdn_gpu_list *out, char *err, size_t errlen) {
    memset(out, 0, sizeof *out);
    if (nsel == 0) return 0;
    const char *smi = getenv("VDN_NVIDIA_SMI");
    char *argv[] = {(char *)(smi && *smi ? smi : "nvidia-smi"),
                    "--query-gpu=index,name,memory.total", "--format=csv,noheader,nounits", NULL};
    char *text = run_capture(argv);
    if (!text) {
        VDN_WARN("worker: %s not found or failed; reporting no GPUs (CPU backend)", argv[0]);
        return 0;
    }
    vdn_gpu_list all;
    int rc = vdn_parse_nvidia_smi(text, &all, err, errlen);
    free(text);
    if (rc) return -1;
    if (nsel < 0) {
        *out = all;
        return 0;
    }
    for (int i = 0; i < nsel; i++) {
        int found = -1;
        for (int j = 0; j < all.n; j++)
            if (all.gpu[j].index == sel[i]) found = j;
        if (found < 0) {
            if (all.n == 0) {
                VDN_WARN("worker: nvidia-smi lists no GPUs; reporting none (CPU backend)");
                memset(out, 0, sizeof *out);
                return 0;
            }
            return vdn_fail(err, errlen,
                            "--gpus: GPU %d is not on this machine (nvidia-smi lists "
                            "%d GPUs, indices %d..%d)",
                            sel[i], all.n, all.gpu[0].index, all.gpu[all.n - 1].index);
        }
        out->gpu[out->n++] = all.gpu[found];
    }
    return 0;
}
