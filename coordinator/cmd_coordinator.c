/* Placeholder until the owning capability lands. */
#include <stdio.h>
#include "commands.h"
int vdn_cmd_coordinator(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "vdn coordinator: not built yet\n");
    return 2;
}
int vdn_cmd_submit(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "vdn submit: not built yet\n");
    return 2;
}
int vdn_cmd_status(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "vdn status: not built yet\n");
    return 2;
}
int vdn_cmd_ls(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "vdn ls: not built yet\n");
    return 2;
}
int vdn_cmd_watch(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "vdn watch: not built yet\n");
    return 2;
}
int vdn_cmd_cancel(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "vdn cancel: not built yet\n");
    return 2;
}
int vdn_cmd_retry(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "vdn retry: not built yet\n");
    return 2;
}
int vdn_cmd_logs(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "vdn logs: not built yet\n");
    return 2;
}
int vdn_cmd_workers(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "vdn workers: not built yet\n");
    return 2;
}
int vdn_cmd_drain(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "vdn drain: not built yet\n");
    return 2;
}
int vdn_cmd_keygen(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "vdn keygen: not built yet\n");
    return 2;
}
