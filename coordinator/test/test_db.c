/* Schema and migrations: a fresh database reaches the current version with WAL on; an older
 * database is migrated forward keeping its rows; a newer one is refused with a clear message;
 * read-only opens refuse files that are not vdn databases. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "db.h"
#include "vdn_util.h"
#include "../../ops/test/check.h"

static int64_t q(sqlite3 *db, const char *sql) {
    return cdb_int(db, -1, sql, "");
}

int main(void) {
    char dir[] = "/tmp/vdn_db_XXXXXX", path[128], err[VDN_ERR_LEN];
    if (!mkdtemp(dir)) return 1;
    snprintf(path, sizeof path, "%s/c.db", dir);

    sqlite3 *db = cdb_open(path, 0, err, sizeof err);
    CHECK(db != NULL);
    if (!db) return 1;
    CHECK(cdb_schema_version(db) == CDB_SCHEMA_VERSION);
    sqlite3_stmt *st = cdb_prep(db, "PRAGMA journal_mode", "");
    CHECK(st && sqlite3_step(st) == SQLITE_ROW &&
          !strcmp((const char *)sqlite3_column_text(st, 0), "wal"));
    sqlite3_finalize(st);
    const char *tables[] = {"batches", "jobs", "attempts", "workers", "events", "schema_version"};
    for (size_t i = 0; i < sizeof tables / sizeof *tables; i++)
        CHECK(cdb_int(db, 0, "SELECT count(*) FROM sqlite_master WHERE type='table' AND name=?",
                      "s", tables[i]) == 1);
    /* constraints hold: a job in an unknown state is rejected by the database itself */
    CHECK(cdb_run(db, err, sizeof err,
                  "INSERT INTO batches(tag,priority,submitted_at) VALUES('t',0,1)", "") == 0);
    CHECK(cdb_run(db, err, sizeof err,
                  "INSERT INTO jobs(batch_id,state,request,output_prefix,submitted_at) "
                  "VALUES(1,'weird','{}','o',1)",
                  "") == -1);
    CHECK(cdb_run(db, err, sizeof err,
                  "INSERT INTO jobs(batch_id,state,request,output_prefix,submitted_at) "
                  "VALUES(1,'queued','{}','o',1)",
                  "") == 0);
    /* schema 4: an attempt's store operation is one of three words or NULL */
    CHECK(cdb_run(db, err, sizeof err,
                  "INSERT INTO attempts(job_id,worker_id,state,started_at,lease_until,store_op) "
                  "VALUES(1,'w','failed',1,1,'upload')",
                  "") == 0,
          "%s", err);
    CHECK(cdb_run(db, err, sizeof err,
                  "INSERT INTO attempts(job_id,worker_id,state,started_at,lease_until,store_op) "
                  "VALUES(1,'w','failed',1,1,'elsewhere')",
                  "") == -1);
    CHECK(cdb_run(db, err, sizeof err, "DELETE FROM attempts", "") == 0);
    /* schema 9: a crash belongs to an attempt, once */
    CHECK(cdb_run(db, err, sizeof err,
                  "INSERT INTO attempts(id,job_id,worker_id,state,started_at,lease_until,fault) "
                  "VALUES(5,1,'w','failed',1,1,'crash')",
                  "") == 0,
          "%s", err);
    CHECK(cdb_run(db, err, sizeof err,
                  "INSERT INTO crashes(attempt_id,job_id,worker_id,at) VALUES(5,1,'w',1)", "") == 0,
          "%s", err);
    CHECK(cdb_run(db, err, sizeof err,
                  "INSERT INTO crashes(attempt_id,job_id,worker_id,at) VALUES(5,1,'w',2)",
                  "") == -1);
    CHECK(q(db, "SELECT job_record + worker_record FROM crashes") == 2);
    CHECK(cdb_run(db, err, sizeof err, "DELETE FROM crashes", "") == 0);
    CHECK(cdb_run(db, err, sizeof err, "DELETE FROM attempts", "") == 0);
    /* pretend this database predates migration 2: the reopen applies 2 to 9 again, rows
     * survive */
    CHECK(cdb_run(db, err, sizeof err, "DELETE FROM schema_version WHERE version >= 2", "") == 0);
    CHECK(cdb_run(db, err, sizeof err, "DROP INDEX events_job", "") == 0);
    CHECK(cdb_run(db, err, sizeof err, "DROP INDEX attempts_job", "") == 0);
    CHECK(cdb_run(db, err, sizeof err, "DROP INDEX attempts_running", "") == 0);
    const char *undo3[] = {"DROP TABLE crashes",
                           "ALTER TABLE jobs DROP COLUMN crashes",
                           "ALTER TABLE jobs DROP COLUMN quarantined",
                           "ALTER TABLE jobs DROP COLUMN waiting",
                           "ALTER TABLE batches DROP COLUMN owner",
                           "ALTER TABLE jobs DROP COLUMN worker_faults",
                           "ALTER TABLE workers DROP COLUMN precisions",
                           "ALTER TABLE attempts DROP COLUMN store_op",
                           "ALTER TABLE workers DROP COLUMN store_retries",
                           "DROP TABLE worker_blocks",
                           "ALTER TABLE attempts DROP COLUMN fault",
                           "ALTER TABLE attempts DROP COLUMN nfe_evaluated",
                           "ALTER TABLE jobs DROP COLUMN job_class",
                           "ALTER TABLE jobs DROP COLUMN snapshot_key",
                           "ALTER TABLE jobs DROP COLUMN snapshot_step",
                           "ALTER TABLE jobs DROP COLUMN nfe_evaluated"};
    for (size_t i = 0; i < sizeof undo3 / sizeof *undo3; i++)
        CHECK(cdb_run(db, err, sizeof err, undo3[i], "") == 0, "%s: %s", undo3[i], err);
    cdb_close(db);
    db = cdb_open(path, 0, err, sizeof err);
    CHECK(db && cdb_schema_version(db) == 9);
    CHECK(db && q(db, "SELECT count(*) FROM pragma_table_info('jobs') WHERE "
                      "name IN ('crashes','quarantined') AND dflt_value='0'") == 2);
    CHECK(db && q(db, "SELECT count(*) FROM pragma_table_info('crashes')") == 6);
    CHECK(db && q(db, "SELECT count(*) FROM jobs WHERE crashes=0 AND NOT quarantined") == 1);
    CHECK(db && q(db, "SELECT count(*) FROM sqlite_master WHERE type='index' AND name IN "
                      "('crashes_job','crashes_worker')") == 2);
    CHECK(db && q(db, "SELECT count(*) FROM pragma_table_info('jobs') WHERE name='waiting'") == 1);
    CHECK(db && q(db, "SELECT count(*) FROM pragma_table_info('jobs') WHERE "
                      "name='worker_faults' AND dflt_value='0'") == 1);
    CHECK(db && q(db, "SELECT count(*) FROM pragma_table_info('batches') WHERE name='owner'") == 1);
    CHECK(db && q(db, "SELECT count(*) FROM pragma_table_info('workers') WHERE "
                      "name='precisions' AND dflt_value='''bf16'''") == 1);
    CHECK(db &&
          q(db, "SELECT count(*) FROM pragma_table_info('attempts') WHERE name='store_op'") == 1);
    CHECK(db && q(db, "SELECT count(*) FROM pragma_table_info('workers') WHERE "
                      "name='store_retries' AND dflt_value='0'") == 1);
    CHECK(db &&
          q(db, "SELECT count(*) FROM pragma_table_info('jobs') WHERE name='job_class'") == 1);
    CHECK(db && q(db, "SELECT count(*) FROM jobs WHERE job_class=''") == 1); /* from before */
    CHECK(db &&
          q(db, "SELECT count(*) FROM sqlite_master WHERE type='index' AND name='events_job'") ==
              1);
    CHECK(db && q(db, "SELECT count(*) FROM jobs") == 1);
    /* a database from a newer vdn is refused, not modified */
    CHECK(cdb_run(db, err, sizeof err, "INSERT INTO schema_version VALUES(99)", "") == 0);
    cdb_close(db);
    CHECK(cdb_open(path, 0, err, sizeof err) == NULL && strstr(err, "schema version 99") &&
          strstr(err, path));
    CHECK(cdb_open(path, 1, err, sizeof err) == NULL && strstr(err, "99"));

    /* read-only: a missing file and a non-vdn file are clear errors */
    char other[128];
    snprintf(other, sizeof other, "%s/missing.db", dir);
    CHECK(cdb_open(other, 1, err, sizeof err) == NULL && strstr(err, other));
    CHECK(access(other, F_OK) != 0); /* read-only open created nothing */
    snprintf(other, sizeof other, "%s/text.db", dir);
    CHECK(vdn_write_file_atomic(other, "hello, not sqlite\n", 18, err, sizeof err) == 0);
    CHECK(cdb_open(other, 1, err, sizeof err) == NULL && strstr(err, other));
    CHECK(cdb_open(other, 0, err, sizeof err) == NULL && strstr(err, other));
    snprintf(other, sizeof other, "%s/plain.db", dir);
    sqlite3 *p;
    sqlite3_open(other, &p);
    sqlite3_exec(p, "CREATE TABLE t(x)", NULL, NULL, NULL);
    sqlite3_close(p);
    CHECK(cdb_open(other, 1, err, sizeof err) == NULL &&
          strstr(err, "not a vdn coordinator database"));

    char cmd[64];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd)) {
    }
    return check_report("db");
}
