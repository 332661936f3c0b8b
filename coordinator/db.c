/* SQLite open, migrations and statement helpers; see db.h and docs/schema.md. */
#include "db.h"

#include <stdarg.h>
#include <string.h>

#include "vdn_util.h"

/* migrations[i] takes the schema from version i to i + 1; never edit one that shipped, append. */
static const char *const migrations[] = {
    /* 0 -> 1: the five tables */
    "CREATE TABLE batches(\n"
    "  id INTEGER PRIMARY KEY,\n"
    "  tag TEXT,\n"
    "  priority INTEGER NOT NULL DEFAULT 0,\n"
    "  source TEXT,\n"
    "  submitted_at REAL NOT NULL);\n"
    "CREATE TABLE jobs(\n"
    "  id INTEGER PRIMARY KEY,\n"
    "  batch_id INTEGER NOT NULL REFERENCES batches(id),\n"
    "  state TEXT NOT NULL CHECK(state IN ('queued','running','done','failed','cancelled')),\n"
    "  priority INTEGER NOT NULL DEFAULT 0,\n"
    "  tag TEXT,\n"
    "  request TEXT NOT NULL,\n"
    "  checkpoint TEXT,\n"
    "  gpus INTEGER NOT NULL DEFAULT 1,\n"
    "  min_gpu_memory INTEGER NOT NULL DEFAULT 0,\n"
    "  output_prefix TEXT NOT NULL,\n"
    "  submitted_at REAL NOT NULL,\n"
    "  attempts INTEGER NOT NULL DEFAULT 0,\n"
    "  current_attempt INTEGER,\n"
    "  finished_at REAL,\n"
    "  object_keys TEXT,\n"
    "  run_record TEXT,\n"
    "  last_error TEXT,\n"
    "  nfe_done INTEGER NOT NULL DEFAULT 0,\n"
    "  nfe_total INTEGER NOT NULL DEFAULT 0,\n"
    "  nfe_seconds REAL NOT NULL DEFAULT 0,\n"
    "  elapsed_seconds REAL NOT NULL DEFAULT 0);\n"
    "CREATE INDEX jobs_queue ON jobs(state, priority DESC, submitted_at, id);\n"
    "CREATE INDEX jobs_batch ON jobs(batch_id);\n"
    "CREATE TABLE attempts(\n"
    "  id INTEGER PRIMARY KEY,\n"
    "  job_id INTEGER NOT NULL REFERENCES jobs(id),\n"
    "  worker_id TEXT NOT NULL,\n"
    "  state TEXT NOT NULL CHECK(state IN "
    "('running','done','failed','expired','cancelled')),\n"
    "  started_at REAL NOT NULL,\n"
    "  lease_until REAL NOT NULL,\n"
    "  finished_at REAL,\n"
    "  reason TEXT);\n"
    "CREATE TABLE workers(\n"
    "  id TEXT PRIMARY KEY,\n"
    "  state TEXT NOT NULL,\n"
    "  gpus TEXT,\n"
    "  checkpoint TEXT,\n"
    "  checkpoint_identity TEXT,\n"
    "  engine_version TEXT,\n"
    "  backend TEXT,\n"
    "  hostname TEXT,\n"
    "  first_seen REAL NOT NULL,\n"
    "  last_seen REAL NOT NULL,\n"
    "  failures INTEGER NOT NULL DEFAULT 0,\n"
    "  blocked_until REAL NOT NULL DEFAULT 0,\n"
    "  draining INTEGER NOT NULL DEFAULT 0);\n"
    "CREATE TABLE events(\n"
    "  id INTEGER PRIMARY KEY,\n"
    "  at REAL NOT NULL,\n"
    "  batch_id INTEGER,\n"
    "  job_id INTEGER,\n"
    "  attempt_id INTEGER,\n"
    "  worker_id TEXT,\n"
    "  kind TEXT NOT NULL,\n"
    "  detail TEXT);\n",
    /* 1 -> 2: `vdn logs` and lease checks look these up by job and by state */
    "CREATE INDEX events_job ON events(job_id, id);\n"
    "CREATE INDEX attempts_job ON attempts(job_id, id);\n"
    "CREATE INDEX attempts_running ON attempts(state, lease_until);\n",
    /* 2 -> 3: failure blame (whose fault each attempt's end was), blocklists per job class,
     * resumable renders (the newest sampler snapshot of a job, NFEs evaluated in all) */
    "ALTER TABLE attempts ADD COLUMN fault TEXT;\n"
    "ALTER TABLE jobs ADD COLUMN job_class TEXT NOT NULL DEFAULT '';\n"
    "ALTER TABLE jobs ADD COLUMN snapshot_key TEXT;\n"
    "ALTER TABLE jobs ADD COLUMN snapshot_step INTEGER NOT NULL DEFAULT 0;\n"
    "ALTER TABLE jobs ADD COLUMN nfe_evaluated INTEGER NOT NULL DEFAULT 0;\n"
    "ALTER TABLE attempts ADD COLUMN nfe_evaluated INTEGER NOT NULL DEFAULT 0;\n"
    "CREATE TABLE worker_blocks(\n"
    "  worker_id TEXT NOT NULL,\n"
    "  job_class TEXT NOT NULL,\n"
    "  failures INTEGER NOT NULL DEFAULT 0,\n"
    "  blocked_until REAL NOT NULL DEFAULT 0,\n"
    "  PRIMARY KEY(worker_id, job_class));\n",
    /* 3 -> 4: store errors counted exactly: the object-store operation an attempt's failure came
     * from, as the worker typed it (Fail.store_op), and each worker's store retries that cured a
     * failure (Heartbeat.store_retries) */
    "ALTER TABLE attempts ADD COLUMN store_op TEXT CHECK(store_op IN "
    "('download','upload','open'));\n"
    "ALTER TABLE workers ADD COLUMN store_retries INTEGER NOT NULL DEFAULT 0;\n",
    /* 4 -> 5: the DiT precisions each worker loaded (Ready.precisions), as "bf16,fp8" */
    "ALTER TABLE workers ADD COLUMN precisions TEXT NOT NULL DEFAULT 'bf16';\n",
    /* 5 -> 6: attempts lost with their worker (it vanished, was killed, lost its lease, its GPU
     * faulted) have their own budget (--max-worker-faults), apart from --max-attempts */
    "ALTER TABLE jobs ADD COLUMN worker_faults INTEGER NOT NULL DEFAULT 0;\n",
    /* 6 -> 7: who submitted a batch (the name its client key has in the keys file; NULL: the
     * local user of a farm without keys), for cancel/retry by its owner only */
    "ALTER TABLE batches ADD COLUMN owner TEXT;\n",
    /* 7 -> 8: why a queued job has not started, as the coordinator's placement last saw it */
    "ALTER TABLE jobs ADD COLUMN waiting TEXT;\n",
    /* 8 -> 9: crash blame (docs/cluster.md "Crash blame"): attempts that ended in a renderer
     * crash, charged to neither budget of the job; each crash with what it still counts for (the
     * job's crash record, the worker's crash blocklist); the quarantine of a job that crashed
     * renderers on two workers */
    "ALTER TABLE jobs ADD COLUMN crashes INTEGER NOT NULL DEFAULT 0;\n"
    "ALTER TABLE jobs ADD COLUMN quarantined INTEGER NOT NULL DEFAULT 0;\n"
    "CREATE TABLE crashes(\n"
    "  attempt_id INTEGER PRIMARY KEY REFERENCES attempts(id),\n"
    "  job_id INTEGER NOT NULL REFERENCES jobs(id),\n"
    "  worker_id TEXT NOT NULL,\n"
    "  at REAL NOT NULL,\n"
    "  job_record INTEGER NOT NULL DEFAULT 1,\n"
    "  worker_record INTEGER NOT NULL DEFAULT 1);\n"
    "CREATE INDEX crashes_job ON crashes(job_id);\n"
    "CREATE INDEX crashes_worker ON crashes(worker_id, at);\n",
};

int cdb_schema_version(sqlite3 *db) {
    return (int)cdb_int(db, -1, "SELECT max(version) FROM schema_version", "");
}

static int has_table(sqlite3 *db, const char *name) {
    return cdb_int(db, 0, "SELECT count(*) FROM sqlite_master WHERE type='table' AND name=?", "s",
                   name) > 0;
}

static int migrate(sqlite3 *db, const char *path, char *err, size_t errlen) {
    char e2[VDN_ERR_LEN];
    if (cdb_begin(db, e2, sizeof e2)) return vdn_fail(err, errlen, "%s: %s", path, e2);
    if (!has_table(db, "schema_version") &&
        cdb_run(db, e2, sizeof e2, "CREATE TABLE schema_version(version INTEGER NOT NULL)", "")) {
        cdb_rollback(db);
        return vdn_fail(err, errlen, "%s: %s", path, e2);
    }
    int v = (int)cdb_int(db, 0, "SELECT coalesce(max(version),0) FROM schema_version", "");
    if (v > CDB_SCHEMA_VERSION) {
        cdb_rollback(db);
        return vdn_fail(err, errlen,
                        "%s: database schema version %d is newer than this vdn understands (%d); "
                        "use a newer vdn",
                        path, v, CDB_SCHEMA_VERSION);
    }
    for (; v < CDB_SCHEMA_VERSION; v++) {
        char *msg = NULL;
        if (sqlite3_exec(db, migrations[v], NULL, NULL, &msg) != SQLITE_OK ||
            cdb_run(db, e2, sizeof e2, "INSERT INTO schema_version(version) VALUES(?)", "i",
                    (int64_t)(v + 1))) {
            vdn_fail(err, errlen, "%s: migration %d -> %d failed: %s", path, v, v + 1,
                     msg ? msg : e2);
            sqlite3_free(msg);
            cdb_rollback(db);
            return -1;
        }
        VDN_INFO("%s: schema migrated to version %d", path, v + 1);
    }
    if (cdb_commit(db, e2, sizeof e2)) return vdn_fail(err, errlen, "%s: %s", path, e2);
    return 0;
}

sqlite3 *cdb_open(const char *path, int readonly, char *err, size_t errlen) {
    sqlite3 *db = NULL;
    int flags = readonly ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE;
    if (sqlite3_open_v2(path, &db, flags, NULL) != SQLITE_OK) {
        vdn_fail(err, errlen, "%s: cannot open database: %s", path,
                 db ? sqlite3_errmsg(db) : "out of memory");
        sqlite3_close(db);
        return NULL;
    }
    sqlite3_busy_timeout(db, 5000);
    char *msg = NULL;
    const char *pragmas = readonly ? "PRAGMA query_only=1;"
                                   : "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; "
                                     "PRAGMA foreign_keys=ON;";
    if (sqlite3_exec(db, pragmas, NULL, NULL, &msg) != SQLITE_OK) {
        vdn_fail(err, errlen, "%s: %s (is it an SQLite database?)", path, msg);
        sqlite3_free(msg);
        sqlite3_close(db);
        return NULL;
    }
    if (readonly) {
        int v = -1;
        if (!has_table(db, "schema_version") || (v = cdb_schema_version(db)) < 1 ||
            v > CDB_SCHEMA_VERSION) {
            if (v > CDB_SCHEMA_VERSION)
                vdn_fail(err, errlen, "%s: database schema version %d is newer than this vdn (%d)",
                         path, v, CDB_SCHEMA_VERSION);
            else
                vdn_fail(err, errlen,
                         "%s: not a vdn coordinator database (no schema_version table)", path);
            sqlite3_close(db);
            return NULL;
        }
        return db;
    }
    if (migrate(db, path, err, errlen)) {
        sqlite3_close(db);
        return NULL;
    }
    return db;
}

void cdb_close(sqlite3 *db) {
    sqlite3_close(db);
}

static sqlite3_stmt *vprep(sqlite3 *db, const char *sql, const char *types, va_list ap) {
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) {
        VDN_ERROR("sqlite prepare failed: %s: %s", sqlite3_errmsg(db), sql);
        return NULL;
    }
    for (int i = 0; types[i]; i++) {
        int col = i + 1;
        switch (types[i]) {
        case 'i':
            sqlite3_bind_int64(st, col, va_arg(ap, int64_t));
            break;
        case 'I': {
            int64_t x = va_arg(ap, int64_t);
            if (x)
                sqlite3_bind_int64(st, col, x);
            else
                sqlite3_bind_null(st, col);
            break;
        }
        case 'd':
            sqlite3_bind_double(st, col, va_arg(ap, double));
            break;
        case 's': {
            const char *s = va_arg(ap, const char *);
            if (s)
                sqlite3_bind_text(st, col, s, -1, SQLITE_TRANSIENT);
            else
                sqlite3_bind_null(st, col);
            break;
        }
        default:
            VDN_ASSERT(!"bad bind type");
        }
    }
    return st;
}

sqlite3_stmt *cdb_prep(sqlite3 *db, const char *sql, const char *types, ...) {
    va_list ap;
    va_start(ap, types);
    sqlite3_stmt *st = vprep(db, sql, types, ap);
    va_end(ap);
    return st;
}

int cdb_run(sqlite3 *db, char *err, size_t errlen, const char *sql, const char *types, ...) {
    va_list ap;
    va_start(ap, types);
    sqlite3_stmt *st = vprep(db, sql, types, ap);
    va_end(ap);
    if (!st) return vdn_fail(err, errlen, "sqlite: %s", sqlite3_errmsg(db));
    int rc = sqlite3_step(st);
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE && rc != SQLITE_ROW)
        return vdn_fail(err, errlen, "sqlite: %s", sqlite3_errmsg(db));
    return 0;
}

int64_t cdb_int(sqlite3 *db, int64_t def, const char *sql, const char *types, ...) {
    va_list ap;
    va_start(ap, types);
    sqlite3_stmt *st = vprep(db, sql, types, ap);
    va_end(ap);
    if (!st) return def;
    int64_t v = def;
    if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_type(st, 0) != SQLITE_NULL)
        v = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return v;
}

int cdb_begin(sqlite3 *db, char *err, size_t errlen) {
    return cdb_run(db, err, errlen, "BEGIN IMMEDIATE", "");
}
int cdb_commit(sqlite3 *db, char *err, size_t errlen) {
    return cdb_run(db, err, errlen, "COMMIT", "");
}
void cdb_rollback(sqlite3 *db) {
    sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
}

int cdb_event(sqlite3 *db, int64_t batch, int64_t job, int64_t attempt, const char *worker,
              const char *kind, const char *detail) {
    char err[VDN_ERR_LEN];
    int rc = cdb_run(db, err, sizeof err,
                     "INSERT INTO events(at,batch_id,job_id,attempt_id,worker_id,kind,detail) "
                     "VALUES(?,?,?,?,?,?,?)",
                     "dIIIsss", vdn_wall(), batch, job, attempt, worker, kind, detail);
    if (rc) VDN_ERROR("event %s: %s", kind, err);
    return rc;
}

char *cdb_col_str(sqlite3_stmt *st, int col) {
    const unsigned char *s = sqlite3_column_text(st, col);
    return s ? vdn_xstrdup((const char *)s) : NULL;
}
