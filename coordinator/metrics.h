/* The coordinator's /metrics in the Prometheus text exposition format (version 0.0.4), built
 * from the database on every scrape so it says the same as `vdn status` (docs/cluster.md
 * "Watching the farm" lists the metrics). */
#ifndef VDN_COORD_METRICS_H
#define VDN_COORD_METRICS_H

#include <sqlite3.h>

/* malloc'd text; never NULL. */
char *coord_metrics_text(sqlite3 *db);

#endif
