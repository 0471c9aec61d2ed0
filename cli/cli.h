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
int cmd_run_transaction(int argc, char **argv);
int cmd_run_transaction_execute(int argc, char **argv);
int cmd_run_commit_token(int argc, char **argv);
/* tclone.c: the tclone runtime (gensee-tcloned) */
int cmd_tclone(int argc, char **argv);
int cmd_tclone_sub(int argc, char **argv);
int tclone_is_subcommand(const char *s);
int tclone_wanted(int argc, char **argv);
int cmd_debug(int argc, char **argv);
int cmd_debug_fanotify(int argc, char **argv);
int cmd_timeline(int argc, char **argv);
int cmd_agent(int argc, char **argv);

struct landlock_opts;
struct mountview_opts;
/* Fill in what a sandboxed run's defaults are made of (run.c). */
int run_host_opts(struct landlock_opts *llo, struct mountview_opts *mvo, int create,
    char **cause);

/*
 * Exit status of a usage error: 125, as gensee's own failures (docker run's
 * convention), so that it is never taken for the launched command's status.
 */
#define CLI_EXIT_USAGE 125

/*
 * Print a usage text: on stdout and 0 when it was asked for (--help), on
 * stderr and CLI_EXIT_USAGE when the arguments were wrong.
 */
int cli_usage(int help, const char *text);
/* Whether argv[1..] asks for help (--help or -h) before any "--". */
int cli_help_asked(int argc, char **argv);

/* Print a json object to stdout, pretty. */
void cli_print_json(struct json_object *o);

#endif
