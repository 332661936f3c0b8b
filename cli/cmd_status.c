/* `vdn status [BATCH|JOB] [--db FILE]`, `vdn ls`, `vdn logs JOB`, `vdn workers`. */
#include <stdlib.h>
#include <string.h>

#include "cli_common.h"
#include "commands.h"
#include "db.h"
#include "print.h"
#include "query.h"
#include "vdn_util.h"

typedef struct {
    const char *db;
    const char *tag;
    int limit;
} status_opts;

static int own(void *user, int argc, char **argv, int i) {
    status_opts *o = user;
    int is_db = !strcmp(argv[i], "--db"), is_tag = !strcmp(argv[i], "--tag"),
        is_limit = !strcmp(argv[i], "--limit");
    if (!is_db && !is_tag && !is_limit) return 0;
    if (i + 1 >= argc) {
        fprintf(stderr, "vdn: %s needs a value\n", argv[i]);
        return -1;
    }
    if (is_db) o->db = argv[i + 1];
    if (is_tag) o->tag = argv[i + 1];
    if (is_limit && (o->limit = atoi(argv[i + 1])) <= 0) {
        fprintf(stderr, "vdn: --limit needs a positive integer\n");
        return -1;
    }
    return 2;
}

static void show_status(const Vdn__StatusReply *r, const char *target, int json) {
    if (json) {
        cli_print_json(r);
        return;
    }
    if (!target) {
        print_batches(stdout, r->batches, r->n_batches);
        return;
    }
    if (target[0] == 'j' || target[0] == 'J') {
        if (r->n_jobs) print_job_detail(stdout, r->jobs[0]);
        return;
    }
    print_batches(stdout, r->batches, r->n_batches);
    printf("\n");
    print_jobs(stdout, r->jobs, r->n_jobs);
}

int vdn_cmd_status(int argc, char **argv) {
    status_opts so = {0};
    cli_args a;
    if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        printf("usage: vdn status [bN|jN] [--db FILE] [--json] [--coordinator EP | --dir DIR]\n"
               "  --db FILE reads the coordinator's SQLite database read-only (no coordinator "
               "needed)\n");
        return 0;
    }
    if (cli_parse("status", argc, argv, &a, own, &so)) return VDN_EXIT_USAGE;
    if (a.npos > 1) {
        fprintf(stderr, "usage: vdn status [bN|jN] [--db FILE] [--json]\n");
        return VDN_EXIT_USAGE;
    }
    const char *target = a.npos ? a.pos[0] : NULL;
    char err[VDN_ERR_LEN], kind = 0;
    uint64_t id = 0;
    if (target && vdn_parse_target(target, &kind, &id, err, sizeof err)) {
        fprintf(stderr, "vdn status: %s\n", err);
        return VDN_EXIT_USAGE;
    }
    if (so.db) {
        sqlite3 *db = cdb_open(so.db, 1, err, sizeof err);
        if (!db) {
            fprintf(stderr, "vdn status: %s\n", err);
            return VDN_EXIT_ERROR;
        }
        Vdn__StatusReply *r = query_status(db, kind, (int64_t)id, err, sizeof err);
        cdb_close(db);
        if (!r) {
            fprintf(stderr, "vdn status: %s\n", err);
            return VDN_EXIT_NOT_FOUND;
        }
        show_status(r, target, a.json);
        vdn_client_free(r);
        return VDN_EXIT_OK;
    }
    vdn_client *c = cli_connect("status", &a);
    if (!c) return VDN_EXIT_UNREACHABLE;
    Vdn__StatusReply *r = vdn_client_status(c, target, err, sizeof err);
    int rc = VDN_EXIT_OK;
    if (!r)
        rc = cli_fail("status", c, err);
    else
        show_status(r, target, a.json);
    vdn_client_free(r);
    vdn_client_close(c);
    return rc;
}

int vdn_cmd_ls(int argc, char **argv) {
    status_opts so = {0};
    cli_args a;
    if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        printf("usage: vdn ls [--tag T] [--limit N] [--json] [--coordinator EP | --dir DIR]\n");
        return 0;
    }
    if (cli_parse("ls", argc, argv, &a, own, &so) || a.npos) return VDN_EXIT_USAGE;
    char err[VDN_ERR_LEN];
    Vdn__ListReply *r;
    vdn_client *c = NULL;
    if (so.db) {
        sqlite3 *db = cdb_open(so.db, 1, err, sizeof err);
        if (!db) {
            fprintf(stderr, "vdn ls: %s\n", err);
            return VDN_EXIT_ERROR;
        }
        r = query_list(db, so.tag, so.limit);
        cdb_close(db);
    } else {
        if (!(c = cli_connect("ls", &a))) return VDN_EXIT_UNREACHABLE;
        r = vdn_client_list(c, so.tag, so.limit, err, sizeof err);
    }
    int rc = VDN_EXIT_OK;
    if (!r)
        rc = cli_fail("ls", c, err);
    else if (a.json)
        cli_print_json(r);
    else
        print_batches(stdout, r->batches, r->n_batches);
    vdn_client_free(r);
    vdn_client_close(c);
    return rc;
}

int vdn_cmd_logs(int argc, char **argv) {
    status_opts so = {0};
    cli_args a;
    if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        printf("usage: vdn logs jN [--db FILE] [--json] [--coordinator EP | --dir DIR]\n");
        return 0;
    }
    if (cli_parse("logs", argc, argv, &a, own, &so)) return VDN_EXIT_USAGE;
    char err[VDN_ERR_LEN], kind;
    uint64_t id;
    if (a.npos != 1) {
        fprintf(stderr, "usage: vdn logs jN\n");
        return VDN_EXIT_USAGE;
    }
    if (vdn_parse_target(a.pos[0], &kind, &id, err, sizeof err) || kind != 'j') {
        fprintf(stderr, "vdn logs: %s\n", kind == 'b' ? "expected a job id (j34)" : err);
        return VDN_EXIT_USAGE;
    }
    Vdn__LogsReply *r;
    vdn_client *c = NULL;
    if (so.db) {
        sqlite3 *db = cdb_open(so.db, 1, err, sizeof err);
        if (!db) {
            fprintf(stderr, "vdn logs: %s\n", err);
            return VDN_EXIT_ERROR;
        }
        r = query_logs(db, (int64_t)id, err, sizeof err);
        cdb_close(db);
        if (!r) {
            fprintf(stderr, "vdn logs: %s\n", err);
            return VDN_EXIT_NOT_FOUND;
        }
    } else {
        if (!(c = cli_connect("logs", &a))) return VDN_EXIT_UNREACHABLE;
        r = vdn_client_logs(c, a.pos[0], err, sizeof err);
    }
    int rc = VDN_EXIT_OK;
    if (!r)
        rc = cli_fail("logs", c, err);
    else if (a.json)
        cli_print_json(r);
    else
        print_logs(stdout, r);
    vdn_client_free(r);
    vdn_client_close(c);
    return rc;
}

int vdn_cmd_workers(int argc, char **argv) {
    status_opts so = {0};
    cli_args a;
    if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        printf("usage: vdn workers [--db FILE] [--json] [--coordinator EP | --dir DIR]\n");
        return 0;
    }
    if (cli_parse("workers", argc, argv, &a, own, &so) || a.npos) return VDN_EXIT_USAGE;
    char err[VDN_ERR_LEN];
    Vdn__WorkersReply *r;
    vdn_client *c = NULL;
    if (so.db) {
        sqlite3 *db = cdb_open(so.db, 1, err, sizeof err);
        if (!db) {
            fprintf(stderr, "vdn workers: %s\n", err);
            return VDN_EXIT_ERROR;
        }
        r = query_workers(db);
        cdb_close(db);
    } else {
        if (!(c = cli_connect("workers", &a))) return VDN_EXIT_UNREACHABLE;
        r = vdn_client_workers(c, err, sizeof err);
    }
    int rc = VDN_EXIT_OK;
    if (!r)
        rc = cli_fail("workers", c, err);
    else if (a.json)
        cli_print_json(r);
    else
        print_workers(stdout, r->workers, r->n_workers);
    vdn_client_free(r);
    vdn_client_close(c);
    return rc;
}
