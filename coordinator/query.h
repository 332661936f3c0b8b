/* Read-only queries that build the client API replies straight from the database, so the live
 * API and `vdn status --db FILE` (no coordinator) show the same thing. Replies are heap-built
 * protobuf-c messages: free with protobuf_c_message_free_unpacked(msg, NULL). */
#ifndef VDN_COORD_QUERY_H
#define VDN_COORD_QUERY_H

#include <sqlite3.h>
#include <stdint.h>

#include "vdn.pb-c.h"

/* kind 0: every batch (no jobs); 'b': that batch and its jobs; 'j': that job (and its batch).
 * NULL with "no batch b12" / "no job j34" when absent. Workers are always included. */
Vdn__StatusReply *query_status(sqlite3 *db, char kind, int64_t id, char *err, size_t errlen);
Vdn__ListReply *query_list(sqlite3 *db, const char *tag, int limit);
Vdn__LogsReply *query_logs(sqlite3 *db, int64_t job, char *err, size_t errlen);
Vdn__WorkersReply *query_workers(sqlite3 *db);

/* A GPU's state for WorkerInfo (Gpu.state), the status page and /metrics: "unavailable" when
 * its worker is gone, "out_of_service" after a GPU fault, "busy" while it runs an attempt,
 * "unavailable" when its worker takes no work (draining, drained, blocked), "reserved" when
 * held back for a waiting multi-GPU job (docs/cluster.md "Placement"), else "idle". */
const char *query_gpu_state(const char *worker_state, const Vdn__Gpu *g);

#endif
