/*
 * gensee.c: the unprivileged CLI. It parses arguments, launches agents as
 * their parent and prints results; everything privileged is a request to a
 * daemon.
 */
#include <stdio.h>
#include <string.h>

#include <json-c/json.h>

#include "cli.h"
#include "ids.h"
#include "policy.h"

static void
usage(FILE *f)
{
	fprintf(f,
	    "usage: gensee COMMAND [ARGS...]\n"
	    "\n"
	    "  run [--timeout SECONDS] [--json] -- CMD [ARGS...]\n"
	    "                            launch CMD as a supervised operation\n"
	    "  status [--json]           host capabilities and which daemons answer\n"
	    "  watch --pid PID [--duration-seconds N] [--json] [--linux-fanotify]\n"
	    "                            exec events of a running process tree (and, as\n"
	    "                            root, its sensitive-path opens judged)\n"
	    "  run --sandbox linux [--allow-net X]... [--deny-net X]... [--deny-all] [--monitor]\n"
	    "      [--lease-scope X]... [--max-lease-ttl S] [--network-config FILE]\n"
	    "      [--linux-seccomp | --no-linux-seccomp] [--linux-landlock-ro PATH]...\n"
	    "      [--linux-landlock-rw PATH]... [--linux-fanotify] [--linux-network]\n"
	    "      [--agent codex|claude|gemini|none] -- CMD\n"
	    "                            X is CIDR[,tcp|udp[,PORT|LO-HI]]; --allow-net\n"
	    "                            also takes NAME,tcp|udp,PORT (NAME or *.SUFFIX:\n"
	    "                            resolved through the operation's DNS proxy); seccomp,\n"
	    "                            Landlock and fanotify default to linux.* in policy\n"
	    "  run network inspect|event|revoke (--socket PATH | --operation ID) ...\n"
	    "  run fault (--socket PATH | --operation ID) --fault FILE\n"
	    "  operation inspect ID [--json]\n"
	    "  operation list [--json]\n"
	    "  operation end ID [--kill | --grace SECONDS] [--json]\n"
	    "                            SIGTERM to the tree, SIGKILL after the grace\n"
	    "  operation prune [--older-than DURATION] [--keep N] [--dry-run] [--json]   (root)\n"
	    "  timeline [--operation ID [--follow]] [--json] [--ocsf]\n"
	    "  policy setup [--force] | show [--json] | get KEY [--json] | set KEY VALUE [--json]\n"
	    "                            $GENSEE_HOME/policy.json (gensee policy help: the keys)\n"
	    "  agent state NAME [--json] [--reset]\n"
	    "                            what Gensee runs of agent NAME (codex, claude, gemini)\n"
	    "                            kept of its state, in $GENSEE_HOME/agents/NAME\n"
	    "  debug network-plan --session-id ID --pid PID [--allow X]... [--deny X]... [--json]\n"
	    "  debug network-apply --session-id ID --pid PID ... (root)\n"
	    "  debug seccomp-profile [--json]\n"
	    "                            the seccomp filter of run --sandbox linux\n"
	    "  debug plan [--json]       the host controls run --sandbox linux would apply\n"
	    "  debug fanotify-plan [--json]\n"
	    "                            the fanotify marks of the policy, with warnings\n"
	    "  debug fanotify-once [--seconds N] [--events N] [--json] (root)\n"
	    "                            judge opens of the policy's paths for a while\n"
	    "\n"
	    "\n"
	    "Every command takes --help. Exit status 125: gensee itself failed or was\n"
	    "called wrongly (for run: the command did not run).\n"
	    "Sockets are found in $GENSEE_RUNTIME_DIR (default /run/gensee).\n");
}

int
cli_usage(int help, const char *text)
{
	fputs(text, help ? stdout : stderr);
	return help ? 0 : CLI_EXIT_USAGE;
}

int
cli_help_asked(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--") == 0)
			break;
		if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
			return 1;
	}
	return 0;
}

void
cli_print_json(struct json_object *o)
{
	printf("%s\n", json_object_to_json_string_ext(o,
	    JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_SPACED | JSON_C_TO_STRING_NOSLASHESCAPE));
}

int
main(int argc, char **argv)
{
	static const struct {
		const char *name;
		int (*fn)(int, char **);
	} cmds[] = {
		{ "run", cmd_run },
		{ "status", cmd_status },
		{ "watch", cmd_watch },
		{ "operation", cmd_operation },
		{ "debug", cmd_debug },
		{ "timeline", cmd_timeline },
		{ "policy", cmd_policy },
		{ "agent", cmd_agent },
	};

	if (argc < 2) {
		usage(stderr);
		return CLI_EXIT_USAGE;
	}
	if (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0 ||
	    strcmp(argv[1], "help") == 0) {
		usage(stdout);
		return 0;
	}
	if (strcmp(argv[1], "-V") == 0 || strcmp(argv[1], "--version") == 0 ||
	    strcmp(argv[1], "version") == 0) {
		printf("gensee %s\n", GENSEE_VERSION);
		return 0;
	}
	if (ids_init() != 0) {
		fprintf(stderr, "gensee: libsodium initialisation failed\n");
		return 1;
	}
	/* The older `gensee linux ...` form is kept as an alias (seed 003). */
	if (strcmp(argv[1], "linux") == 0 && argc >= 3) {
		argv++;
		argc--;
	}
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
		if (strcmp(argv[1], cmds[i].name) == 0)
			return cmds[i].fn(argc - 1, argv + 1);
	fprintf(stderr, "gensee: unknown command '%s'\n", argv[1]);
	usage(stderr);
	return CLI_EXIT_USAGE;
}
