/* A fencing token (attempt id) is never issued twice, power cut included. Attempt ids are
 * rowids: a claim whose commit sat only in the OS's cache when the power went would be lost, and
 * its id handed out again to another worker after the restart, while the first worker still
 * holds it. So the commit that issues an attempt must be on the disk before the ASSIGN leaves:
 * jobs_claim commits with synchronous=FULL (an fsync of the WAL), other commits stay NORMAL.
 *
 * Checked through a VFS shim below SQLite that notes every write to a -wal file and every fsync
 * of it: after jobs_claim returns, nothing written to the WAL may be unsynced (what a power cut
 * could lose). A plain NORMAL commit beside it must leave unsynced bytes, which shows the
 * instrument sees them. Then a simulated crash: the process is SIGKILLed right after claiming
 * (the WAL is not checkpointed), the database is reopened, and the next claim gets a new id. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../ops/test/check.h"
#include "db.h"
#include "jobs.h"
#include "vdn_util.h"

/* ---- the VFS shim: every method forwards to the real file; writes and syncs of WALs noted ---- */

typedef struct {
    sqlite3_file base;
    sqlite3_file *real;
    int wal;
} shim_file;

static sqlite3_vfs *real_vfs, shim_vfs;
static int wal_unsynced; /* a -wal file was written since its last xSync */
static int wal_syncs;

#define REAL(f) (((shim_file *)(f))->real)
static int s_close(sqlite3_file *f) {
    int rc = REAL(f)->pMethods->xClose(REAL(f));
    return rc;
}
static int s_read(sqlite3_file *f, void *b, int n, sqlite3_int64 o) {
    return REAL(f)->pMethods->xRead(REAL(f), b, n, o);
}
static int s_write(sqlite3_file *f, const void *b, int n, sqlite3_int64 o) {
    if (((shim_file *)f)->wal) wal_unsynced = 1;
    return REAL(f)->pMethods->xWrite(REAL(f), b, n, o);
}
static int s_truncate(sqlite3_file *f, sqlite3_int64 n) {
    return REAL(f)->pMethods->xTruncate(REAL(f), n);
}
static int s_sync(sqlite3_file *f, int flags) {
    int rc = REAL(f)->pMethods->xSync(REAL(f), flags);
    if (((shim_file *)f)->wal && rc == SQLITE_OK) wal_unsynced = 0, wal_syncs++;
    return rc;
}
static int s_size(sqlite3_file *f, sqlite3_int64 *n) {
    return REAL(f)->pMethods->xFileSize(REAL(f), n);
}
static int s_lock(sqlite3_file *f, int l) {
    return REAL(f)->pMethods->xLock(REAL(f), l);
}
static int s_unlock(sqlite3_file *f, int l) {
    return REAL(f)->pMethods->xUnlock(REAL(f), l);
}
static int s_reserved(sqlite3_file *f, int *r) {
    return REAL(f)->pMethods->xCheckReservedLock(REAL(f), r);
}
static int s_fcntl(sqlite3_file *f, int op, void *a) {
    return REAL(f)->pMethods->xFileControl(REAL(f), op, a);
}
static int s_sector(sqlite3_file *f) {
    return REAL(f)->pMethods->xSectorSize(REAL(f));
}
static int s_devchar(sqlite3_file *f) {
    return REAL(f)->pMethods->xDeviceCharacteristics(REAL(f));
}
static int s_shmmap(sqlite3_file *f, int pg, int sz, int ext, void volatile **p) {
    return REAL(f)->pMethods->xShmMap(REAL(f), pg, sz, ext, p);
}
static int s_shmlock(sqlite3_file *f, int off, int n, int flags) {
    return REAL(f)->pMethods->xShmLock(REAL(f), off, n, flags);
}
static void s_shmbarrier(sqlite3_file *f) {
    REAL(f)->pMethods->xShmBarrier(REAL(f));
}
static int s_shmunmap(sqlite3_file *f, int del) {
    return REAL(f)->pMethods->xShmUnmap(REAL(f), del);
}
static const sqlite3_io_methods shim_io = {
    2,         s_close,      s_read,     s_write, s_truncate, s_sync,    s_size,
    s_lock,    s_unlock,     s_reserved, s_fcntl, s_sector,   s_devchar, s_shmmap,
    s_shmlock, s_shmbarrier, s_shmunmap, NULL,    NULL};

static int s_open(sqlite3_vfs *v, const char *name, sqlite3_file *f, int flags, int *out) {
    (void)v;
    shim_file *s = (shim_file *)f;
    s->real = (sqlite3_file *)(s + 1);
    s->wal = (flags & SQLITE_OPEN_WAL) != 0;
    int rc = real_vfs->xOpen(real_vfs, name, s->real, flags, out);
    s->base.pMethods = rc == SQLITE_OK && s->real->pMethods ? &shim_io : NULL;
    return rc;
}

static void shim_install(void) {
    real_vfs = sqlite3_vfs_find(NULL);
    shim_vfs = *real_vfs;
    shim_vfs.zName = "vdn-test-shim";
    shim_vfs.szOsFile = (int)sizeof(shim_file) + real_vfs->szOsFile;
    shim_vfs.xOpen = s_open;
    sqlite3_vfs_register(&shim_vfs, 1);
}

/* ---- the test ---- */

static int64_t add_job(sqlite3 *db) {
    char err[VDN_ERR_LEN];
    if (cdb_run(db, err, sizeof err,
                "INSERT INTO batches(tag,priority,source,submitted_at) VALUES('t',0,'s',1)", "") ||
        cdb_run(db, err, sizeof err,
                "INSERT INTO jobs(batch_id,state,request,output_prefix,submitted_at) "
                "VALUES(last_insert_rowid(),'queued','{}','o',1)",
                ""))
        fprintf(stderr, "%s\n", err);
    return sqlite3_last_insert_rowid(db);
}

int main(void) {
    char dir[] = "/tmp/vdn_durable_XXXXXX", path[128], err[VDN_ERR_LEN];
    if (!mkdtemp(dir)) return 1;
    snprintf(path, sizeof path, "%s/d.db", dir);
    shim_install();
    sqlite3 *db = cdb_open(path, 0, err, sizeof err);
    CHECK(db != NULL, "%s", err);
    if (!db) return 1;

    /* the instrument: a NORMAL commit leaves its WAL frames unsynced */
    int64_t j1 = add_job(db);
    CHECK(wal_unsynced, "a NORMAL commit synced the WAL: the shim sees nothing");

    job_claim cl;
    int syncs = wal_syncs;
    CHECK(jobs_claim(db, j1, "w1", 30, &cl, err, sizeof err) == 1, "%s", err);
    int64_t first = cl.attempt;
    job_claim_free(&cl);
    CHECK(!wal_unsynced && wal_syncs > syncs,
          "the claim of attempt %lld returned with its commit not on the disk (unsynced %d, "
          "%d WAL syncs)",
          (long long)first, wal_unsynced, wal_syncs - syncs);
    /* and the connection is back to NORMAL for everything else */
    add_job(db);
    CHECK(wal_unsynced, "commits after a claim are synced too (synchronous left at FULL)");
    sqlite3_stmt *st = cdb_prep(db, "PRAGMA synchronous", "");
    CHECK(st && sqlite3_step(st) == SQLITE_ROW && sqlite3_column_int(st, 0) == 1,
          "synchronous is %d after a claim, expected 1 (NORMAL)",
          st ? sqlite3_column_int(st, 0) : -1);
    sqlite3_finalize(st);
    cdb_close(db);

    /* kill -9 between issuing an attempt and any checkpoint: the reopened database still has
     * it, and the next attempt gets another id */
    pid_t pid = fork();
    if (pid == 0) {
        sqlite3 *d = cdb_open(path, 0, err, sizeof err);
        int64_t j = d ? add_job(d) : 0;
        job_claim c;
        if (!d || jobs_claim(d, j, "w2", 30, &c, err, sizeof err) != 1) _exit(2);
        kill(getpid(), SIGKILL);
    }
    int status;
    waitpid(pid, &status, 0);
    CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "the child did not die by SIGKILL");
    db = cdb_open(path, 0, err, sizeof err);
    CHECK(db != NULL, "%s", err);
    if (db) {
        int64_t issued = cdb_int(db, 0, "SELECT max(id) FROM attempts", "");
        int64_t j = add_job(db);
        CHECK(jobs_claim(db, j, "w3", 30, &cl, err, sizeof err) == 1, "%s", err);
        CHECK(cl.attempt > issued && issued > first,
              "after the crash: attempts up to %lld kept, the next one %lld", (long long)issued,
              (long long)cl.attempt);
        job_claim_free(&cl);
        cdb_close(db);
    }
    char cmd[200];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (!failures && system(cmd)) {
    }
    return check_report("durable fencing tokens");
}
