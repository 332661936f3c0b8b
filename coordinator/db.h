/* The coordinator's SQLite database: open (WAL), schema migrations, small statement helpers.
 * The database is the truth; docs/schema.md describes every table. Only the coordinator's main
 * loop writes; `vdn status --db` opens it read-only. */
#ifndef VDN_COORD_DB_H
#define VDN_COORD_DB_H

#include <sqlite3.h>
#include <stddef.h>
#include <stdint.h>

#define CDB_SCHEMA_VERSION 9

/* Read-write: creates the file, enables WAL, migrates to CDB_SCHEMA_VERSION (refusing a newer
 * schema). Read-only: refuses a missing file or a schema this build does not know. */
sqlite3 *cdb_open(const char *path, int readonly, char *err, size_t errlen);
void cdb_close(sqlite3 *db);
int cdb_schema_version(sqlite3 *db); /* -1 on error */

/* Bind arguments by a type string: 'i' int64_t, 'd' double, 's' const char * (NULL binds NULL),
 * 'I' int64_t where 0 binds NULL. */
sqlite3_stmt *cdb_prep(sqlite3 *db, const char *sql, const char *types, ...);
/* Runs a statement that returns no rows. 0, or -1 with the SQLite message in err. */
int cdb_run(sqlite3 *db, char *err, size_t errlen, const char *sql, const char *types, ...);
/* First column of the first row as int64 (def when no row). */
int64_t cdb_int(sqlite3 *db, int64_t def, const char *sql, const char *types, ...);

int cdb_begin(sqlite3 *db, char *err, size_t errlen); /* BEGIN IMMEDIATE */
int cdb_commit(sqlite3 *db, char *err, size_t errlen);
void cdb_rollback(sqlite3 *db);

/* One row of the events table; ids 0 = none. */
int cdb_event(sqlite3 *db, int64_t batch, int64_t job, int64_t attempt, const char *worker,
              const char *kind, const char *detail);

/* malloc'd copy of a text column, NULL for NULL */
char *cdb_col_str(sqlite3_stmt *st, int col);

#endif
