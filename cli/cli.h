/*
 * cli.h: the gensee subcommands. Each returns the process exit status.
 */
#ifndef GENSEE_CLI_H
#define GENSEE_CLI_H

struct json_object;

int cmd_run(int argc, char **argv);
int cmd_status(int argc, char **argv);
int cmd_watch(int argc, char **argv);
int cmd_operation(int argc, char **argv);
int cmd_run_network(int argc, char **argv);
int cmd_run_fault(int argc, char **argv);
int cmd_debug(int argc, char **argv);
int cmd_debug_fanotify(int argc, char **argv);
int cmd_timeline(int argc, char **argv);

struct landlock_opts;
struct mountview_opts;
/* Fill in what a sandboxed run's defaults are made of (run.c). */
int run_host_opts(struct landlock_opts *llo, struct mountview_opts *mvo, int create,
    char **cause);

/* Print a json object to stdout, pretty. */
void cli_print_json(struct json_object *o);

#endif
