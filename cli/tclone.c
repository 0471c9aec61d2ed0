/*
 * tclone.c: `gensee run --runtime tclone -- CMD` and the tclone lifecycle
 * commands (`gensee run list|fork|diff|summary|compare|merge|switch|keep|
 * discard|delete|choose|attach|send`).
 *
 * The CLI only asks: gensee-tcloned (tclone.sock) decides, scoped to the
 * caller's uid. attach and send talk to the run's tmux server directly,
 * as the caller: the server runs as the caller and its socket directory
 * is theirs alone (0700), so this gives them nothing they did not have.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <json-c/json.h>

#include "cli.h"
#include "client.h"
#include "netspec.h"
#include "policy.h"
#include "schema.h"
#include "util.h"

#define TCLONE_EXIT_CONFLICT 1
#define TCLONE_EXIT_FAIL 125
#define TCLONE_TIMEOUT_MS (30 * 60 * 1000)	/* a 40k-file merge or fork is not instant */

static const char tclone_usage_text[] =
	"usage: gensee run --runtime tclone [--observe-only] [--podman [--image IMAGE]] [--name NAME]\n"
	"                  [--allow-net CIDR]... [--linux-landlock-rw PATH]... [--linux-fanotify]\n"
	"                  [--agent NAME] [--detach] [--json] -- CMD [ARGS...]\n"
	"       gensee run list [--json]\n"
	"       gensee run fork SRC [--copies N] [--name P] [--approach TEXT]...\n"
	"                  [--attach tmux:right] [--json]\n"
	"       gensee run diff ID [--json]\n"
	"       gensee run summary ID --json\n"
	"       gensee run compare ID --json\n"
	"       gensee run merge FORK --into SRC [--git|--filesystem|--paths P...] [--dry-run]\n"
	"                  [--force] [--json]\n"
	"       gensee run choose ID --merge|--promote|--discard-all [--json]\n"
	"       gensee run switch FORK [--json]\n"
	"       gensee run keep ID --to DIR [--json]\n"
	"       gensee run discard ID [--json]\n"
	"       gensee run delete ID|--all [--json]\n"
	"       gensee run attach ID [--tmux right]\n"
	"       gensee run send ID -- TEXT\n"
	"       gensee run exec ID -- CMD [ARGS...]\n"
	"       gensee run shell ID\n"
	"       gensee run approve ID --merge|--promote|--discard   (inside an agent)\n"
	"A source runs CMD on a snapshot of the current directory, in its own mount, pid,\n"
	"uts and ipc namespaces, inside a gensee-agent tmux session; forks get their own\n"
	"snapshot and operation with the source's authority and never more.\n"
	"Exit status: 0; 1 for a merge conflict (nothing was changed); 2 usage; 125 error.\n";

static const char *const tclone_subcommands[] = {
	"list", "fork", "diff", "summary", "compare", "merge", "choose", "switch", "keep",
	"discard", "delete", "attach", "send", "shell", "exec", "approve",
};

int
tclone_is_subcommand(const char *s)
{
	for (size_t i = 0; i < nitems(tclone_subcommands); i++)
		if (strcmp(s, tclone_subcommands[i]) == 0)
			return 1;
	return 0;
}

/* 1 when `gensee run` was given --runtime tclone (before --). */
int
tclone_wanted(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--") == 0)
			return 0;
		if (strcmp(argv[i], "--runtime=tclone") == 0 ||
		    (strcmp(argv[i], "--runtime") == 0 && i + 1 < argc &&
		    strcmp(argv[i + 1], "tclone") == 0))
			return 1;
	}
	return 0;
}

/*
 * Inside a tclone agent: the path of its control bridge (from
 * GENSEE_TCLONE_BRIDGE, or the socket at its fixed place), else NULL (the
 * host CLI, which uses tclone.sock). Through the bridge tcloned knows the
 * run from the socket; nothing this process says changes that.
 */
static const char *
bridge_path(void)
{
	static char path[PATH_MAX];
	const char *e = getenv("GENSEE_TCLONE_BRIDGE");
	struct stat st;

	if (e != NULL && e[0] == '/')
		return e;
	if ((size_t)snprintf(path, sizeof(path), "%s/tclone/control.sock", client_runtime_dir()) <
	    sizeof(path) && lstat(path, &st) == 0 && S_ISSOCK(st.st_mode))
		return path;
	return NULL;
}

static int
call(const char *method, struct json_object *params, struct json_object **res)
{
	struct client_error err = { NULL, NULL };
	const char *bridge = bridge_path(), *self = getenv("GENSEE_RUN_ID");

	client_set_timeout_ms(TCLONE_TIMEOUT_MS);
	/* A hint for tcloned's log only: the socket names the run. */
	if (bridge != NULL && self != NULL && self[0] != '\0')
		json_object_object_add(params, "caller_run_id", json_object_new_string(self));
	if (client_call(bridge != NULL ? bridge : "tclone.sock", method, params, res, &err) != 0) {
		fprintf(stderr, "gensee run: %s: %s\n", err.ce_code,
		    err.ce_message ? err.ce_message : "");
		client_error_clear(&err);
		return -1;
	}
	return 0;
}

static void
print_run_row(struct json_object *r)
{
	const char *src = schema_string(r, "source_run_id");
	printf("%-36s %-6s %-9s %-24s %s\n", schema_string(r, "run_id"), schema_string(r, "role"),
	    schema_string(r, "state"), schema_string(r, "name"), src ? src : "-");
}

static int
out_json_or(struct json_object *res, int json, void (*human)(struct json_object *))
{
	if (json || human == NULL)
		cli_print_json(res);
	else
		human(res);
	json_object_put(res);
	return 0;
}

static void
human_list(struct json_object *res)
{
	struct json_object *runs = schema_child(res, "runs");

	printf("Tclone runs\n%-36s %-6s %-9s %-24s %s\n", "RUN", "ROLE", "STATE", "NAME", "SOURCE");
	for (size_t i = 0; runs != NULL && i < json_object_array_length(runs); i++)
		print_run_row(json_object_array_get_idx(runs, i));
}

static void
human_fork(struct json_object *res)
{
	struct json_object *forks = schema_child(res, "forks"), *lc = schema_child(res, "live_clone");

	for (size_t i = 0; forks != NULL && i < json_object_array_length(forks); i++) {
		struct json_object *f = json_object_array_get_idx(forks, i);
		printf("fork %s (%s): operation %s\n", schema_string(f, "run_id"),
		    schema_string(f, "name"), schema_string(f, "operation_id"));
	}
	if (lc != NULL)
		fprintf(stderr, "gensee: live cloning unavailable (%s): each fork started the agent "
		    "fresh on a snapshot of the source's workspace\n", schema_string(lc, "reason"));
}

static void
human_diff(struct json_object *res)
{
	struct json_object *ch = schema_child(res, "changes");

	for (size_t i = 0; ch != NULL && i < json_object_array_length(ch); i++) {
		struct json_object *c = json_object_array_get_idx(ch, i);
		const char *k = schema_string(c, "change");
		printf("%c %s\n", k[0] == 'a' ? 'A' : k[0] == 'd' ? 'D' : 'M', schema_string(c, "path"));
	}
}

static void
human_merge(struct json_object *res)
{
	struct json_object *cf = schema_child(res, "conflicts");
	const char *st = schema_string(res, "status");

	struct json_object *files = schema_child(res, "files"), *left = schema_child(res, "left_out");
	struct json_object *skipped = schema_child(res, "skipped");

	if (files != NULL)
		printf("merge %s -> %s: %s (%zu file(s) in the patch)\n", schema_string(res, "fork"),
		    schema_string(res, "into"), st, json_object_array_length(files));
	else
		printf("merge %s -> %s: %s (%lld to apply)\n", schema_string(res, "fork"),
		    schema_string(res, "into"), st, (long long)schema_int(res, "apply", 0));
	for (size_t i = 0; cf != NULL && i < json_object_array_length(cf); i++) {
		struct json_object *c = json_object_array_get_idx(cf, i);
		const char *h = schema_string(c, "hunks");
		printf("conflict: %s: %s\n", schema_string(c, "path"), schema_string(c, "reason"));
		if (h != NULL && *h != '\0')
			printf("%s%s", h, h[strlen(h) - 1] == '\n' ? "" : "\n");
	}
	/* What the merge did not take is said, never silent. */
	for (size_t i = 0; left != NULL && i < json_object_array_length(left); i++) {
		struct json_object *c = json_object_array_get_idx(left, i);
		printf("left out: %s (%s): %s\n", schema_string(c, "path"),
		    schema_string(c, "change"), schema_string(c, "reason"));
	}
	if (left != NULL && schema_int(res, "left_out_total", 0) > (int64_t)json_object_array_length(left))
		printf("left out: %lld more\n", (long long)(schema_int(res, "left_out_total", 0) -
		    (int64_t)json_object_array_length(left)));
	for (size_t i = 0; skipped != NULL && i < json_object_array_length(skipped); i++) {
		struct json_object *c = json_object_array_get_idx(skipped, i);
		printf("skipped: %s (%lld entr%s): %s\n", schema_string(c, "path"),
		    (long long)schema_int(c, "entries", 1), schema_int(c, "entries", 1) == 1 ? "y" : "ies",
		    schema_string(c, "reason"));
	}
}

static int tmux_run(struct json_object *run, char *const *tail, int replace, int *status);

static int
tmux_exec(struct json_object *run, char *const *tail, int replace)
{
	int st;

	if (tmux_run(run, tail, replace, &st) != 0 || st != 0) {
		fprintf(stderr, "gensee run: tmux %s failed\n", tail[0]);
		return TCLONE_EXIT_FAIL;
	}
	return 0;
}

/* The exit status of the command tmux ran (run-shell passes it on). */
static int
tmux_exec_status(struct json_object *run, char *const *tail)
{
	int st;

	if (tmux_run(run, tail, 0, &st) != 0)
		return TCLONE_EXIT_FAIL;
	return st;
}

static int
tmux_run(struct json_object *run, char *const *tail, int replace, int *status)
{
	const char *sock = schema_string(run, "tmux_socket");
	const char *sess = schema_string(run, "tmux_session");
	char *argv[16];
	int n = 0;

	*status = TCLONE_EXIT_FAIL;
	if (sock == NULL || sess == NULL) {
		fprintf(stderr, "gensee run: the run has no tmux session\n");
		return -1;
	}
	argv[n++] = "tmux";
	argv[n++] = "-S";
	argv[n++] = (char *)sock;
	for (int i = 0; tail[i] != NULL && n < 14; i++)
		argv[n++] = strcmp(tail[i], "@SESSION@") == 0 ? (char *)sess : tail[i];
	argv[n] = NULL;
	fflush(NULL);
	if (replace) {
		execvp("tmux", argv);
		fprintf(stderr, "gensee run: tmux: %s\n", strerror(errno));
		return -1;
	}
	pid_t pid = fork();
	if (pid == 0) {
		execvp("tmux", argv);
		_exit(127);
	}
	int st;
	if (pid < 0 || waitpid(pid, &st, 0) != pid)
		return -1;
	*status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
	return 0;
}

struct sbuf {
	char *sb_p;
	size_t sb_len;
	size_t sb_cap;
};

static int
sb_add(struct sbuf *b, const char *s, size_t n)
{
	if (b->sb_len + n + 1 > b->sb_cap) {
		size_t nc = (b->sb_len + n + 1) * 2;
		char *np = realloc(b->sb_p, nc);
		if (np == NULL)
			return -1;
		b->sb_p = np;
		b->sb_cap = nc;
	}
	memcpy(b->sb_p + b->sb_len, s, n);
	b->sb_len += n;
	b->sb_p[b->sb_len] = '\0';
	return 0;
}

/*
 * s as one single-quoted shell word and a space; '#' doubled, since tmux
 * expands formats in run-shell's command first.
 */
static int
sb_word(struct sbuf *b, const char *s)
{
	int rv = sb_add(b, "'", 1);

	for (const char *c = s; rv == 0 && *c != '\0'; c++) {
		if (*c == '\'')
			rv = sb_add(b, "'\\''", 4);
		else if (*c == '#')
			rv = sb_add(b, "##", 2);
		else
			rv = sb_add(b, c, 1);
	}
	return rv == 0 ? sb_add(b, "' ", 2) : -1;
}

/* Copy a file to fd and remove it. */
static void
drain(const char *path, int fd)
{
	char *buf = NULL;
	size_t len = 0;

	if (util_read_path(path, 64u * 1024 * 1024, &buf, &len) == 0)
		(void)util_write_all(fd, buf, len);
	free(buf);
	unlink(path);
}

/*
 * `gensee run exec ID -- CMD...`: run CMD through the run's own tmux server
 * (tmux run-shell), so it runs where the agent runs: its namespaces and
 * snapshot, its operation's cgroup and network policy, as the caller. Its
 * output goes to files in the run's 0700 directory, then to ours.
 */
static int
tclone_exec(struct json_object *run, char **argv, int argc)
{
	const char *sock = schema_string(run, "tmux_socket"), *ws = schema_string(run, "workspace");
	char dir[PATH_MAX], out[PATH_MAX + 32], err[PATH_MAX + 32], *cmd;
	int fd, rc;

	if (sock == NULL || ws == NULL || strlen(sock) >= sizeof(dir))
		return TCLONE_EXIT_FAIL;
	util_strlcpy(dir, sock, sizeof(dir));
	*strrchr(dir, '/') = '\0';
	snprintf(out, sizeof(out), "%s/exec.%d.out", dir, (int)getpid());
	snprintf(err, sizeof(err), "%s/exec.%d.err", dir, (int)getpid());
	for (const char *const *f = (const char *const[]){ out, err, NULL }; *f != NULL; f++) {
		unlink(*f);
		if ((fd = open(*f, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600)) < 0) {
			fprintf(stderr, "gensee run exec: %s: %s\n", *f, strerror(errno));
			return TCLONE_EXIT_FAIL;
		}
		close(fd);
	}
	struct sbuf b = { NULL, 0, 0 };
	/* tmux 3.3's run-shell has no -c: the workspace is entered here. */
	int bad = sb_add(&b, "cd ", 3) != 0 || sb_word(&b, ws) != 0 ||
	    sb_add(&b, "|| exit 125; exec >", 19) != 0 || sb_word(&b, out) != 0 ||
	    sb_add(&b, "2>", 2) != 0 || sb_word(&b, err) != 0 || sb_add(&b, "; exec ", 7) != 0;
	for (int i = 0; !bad && i < argc; i++)
		bad = sb_word(&b, argv[i]) != 0;
	if (bad) {
		free(b.sb_p);
		return TCLONE_EXIT_FAIL;
	}
	cmd = b.sb_p;
	char *tail[] = { "run-shell", "-t", "@SESSION@", cmd, NULL };
	rc = tmux_exec_status(run, tail);
	free(cmd);
	drain(out, STDOUT_FILENO);
	drain(err, STDERR_FILENO);
	return rc;
}

/* `gensee run shell ID`: a new shell window in the run's session, attached. */
static int
tclone_shell(struct json_object *run)
{
	char *t1[] = { "new-window", "-t", "@SESSION@", NULL };
	char *t2[] = { "attach-session", "-t", "@SESSION@", NULL };

	if (!isatty(STDIN_FILENO)) {
		fprintf(stderr, "gensee run shell: needs a terminal (use gensee run exec)\n");
		return TCLONE_EXIT_FAIL;
	}
	if (tmux_exec(run, t1, 0) != 0)
		return TCLONE_EXIT_FAIL;
	return tmux_exec(run, t2, 1);
}

/*
 * Open `gensee run attach RUN` in a new pane of the caller's own tmux
 * (from $TMUX): to the right of the current pane, or below pane `below`.
 * The pane gets this CLI's runtime dir, so it reaches the same daemons.
 */
static int
host_pane(const char *run, const char *below, char *id, size_t idlen)
{
	char self[PATH_MAX], envv[PATH_MAX + 32];
	ssize_t n;
	int fds[2], st;

	if (run == NULL || getenv("TMUX") == NULL || getenv("TMUX")[0] == '\0') {
		fprintf(stderr, "gensee run: a tmux pane needs this command to run inside tmux\n");
		return TCLONE_EXIT_FAIL;
	}
	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n <= 0) {
		perror("gensee run: /proc/self/exe");
		return TCLONE_EXIT_FAIL;
	}
	self[n] = '\0';
	snprintf(envv, sizeof(envv), "GENSEE_RUNTIME_DIR=%s", client_runtime_dir());
	char *argv[] = { "tmux", "split-window", below ? "-v" : "-h", "-d", "-P", "-F", "#{pane_id}",
		"-e", envv, "-t", (char *)(below ? below : ""), "--", self, "run", "attach",
		(char *)run, NULL };
	if (below == NULL) {
		/* No -t: the current pane. */
		memmove(&argv[9], &argv[11], 6 * sizeof(argv[0]));
	}
	if (pipe2(fds, O_CLOEXEC) != 0)
		return TCLONE_EXIT_FAIL;
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0) {
		dup2(fds[1], STDOUT_FILENO);
		execvp("tmux", argv);
		_exit(127);
	}
	close(fds[1]);
	n = pid > 0 ? read(fds[0], id, idlen - 1) : -1;
	close(fds[0]);
	if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0 ||
	    n <= 0) {
		fprintf(stderr, "gensee run: tmux split-window failed\n");
		return TCLONE_EXIT_FAIL;
	}
	id[n] = '\0';
	id[strcspn(id, "\n")] = '\0';
	return 0;
}

/*
 * The agent profile as `gensee run --sandbox linux` would choose it: the
 * policy's linux.agents.profiles and .custom, --agent, and the state
 * variables of the caller's environment (the agent's, in tcloned, is a
 * fixed one): tcloned checks them again and acts on them.
 */
static struct json_object *
tclone_agent(struct json_object *policy, const char *forced)
{
	static const char *const vars[] = { "CODEX_HOME", "CLAUDE_CONFIG_DIR", "GEMINI_CLI_HOME",
	    "GEMINI_HOME" };
	struct json_object *a = json_object_new_object(), *env = json_object_new_object(), *v;

	v = policy_get_effective(policy, "linux.agents.profiles");
	json_object_object_add(a, "profiles", json_object_new_boolean(v == NULL ||
	    !json_object_is_type(v, json_type_boolean) || json_object_get_boolean(v)));
	json_object_put(v);
	if ((v = policy_get_effective(policy, "linux.agents.custom")) != NULL &&
	    json_object_is_type(v, json_type_array) && json_object_array_length(v) > 0)
		json_object_object_add(a, "custom", v);
	else
		json_object_put(v);
	if (forced != NULL)
		json_object_object_add(a, "name", json_object_new_string(forced));
	for (size_t i = 0; i < nitems(vars); i++) {
		const char *e = getenv(vars[i]);
		if (e != NULL && e[0] == '/')
			json_object_object_add(env, vars[i], json_object_new_string(e));
	}
	json_object_object_add(a, "env", env);
	return a;
}

static int
tclone_start(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "runtime", required_argument, NULL, 'r' },
		{ "observe-only", no_argument, NULL, 'o' },
		{ "podman", no_argument, NULL, 'P' },
		{ "image", required_argument, NULL, 'I' },
		{ "name", required_argument, NULL, 'n' },
		{ "allow-net", required_argument, NULL, 'a' },
		{ "linux-landlock-rw", required_argument, NULL, 'W' },
		{ "linux-fanotify", no_argument, NULL, 'F' },
		{ "agent", required_argument, NULL, 'A' },
		{ "detach", no_argument, NULL, 'd' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct json_object *p = json_object_new_object(), *allow = json_object_new_array(), *av, *res;
	struct json_object *llrw = json_object_new_array();
	int ch, json = 0, detach = 0, fanotify = 0, podman = 0;
	char cwd[PATH_MAX];
	const char *image = NULL, *ppath = getenv("GENSEE_TCLONE_PODMAN"), *forced = NULL;

	optind = 1;
	while ((ch = getopt_long(argc, argv, "+", longopts, NULL)) != -1) {
		switch (ch) {
		case 'r':
			if (strcmp(optarg, "tclone") != 0)
				goto usage;
			break;
		case 'o':
			json_object_object_add(p, "observe_only", json_object_new_boolean(1));
			break;
		case 'P':
			podman = 1;
			break;
		case 'I':
			image = optarg;
			break;
		case 'n':
			json_object_object_add(p, "name", json_object_new_string(optarg));
			break;
		case 'a':
			json_object_array_add(allow, json_object_new_string(optarg));
			break;
		case 'W':
			if (optarg[0] != '/') {
				fprintf(stderr, "gensee run: --linux-landlock-rw: an absolute path\n");
				json_object_put(llrw);
				goto usage;
			}
			json_object_array_add(llrw, json_object_new_string(optarg));
			break;
		case 'A':
			forced = optarg;
			break;
		case 'd':
			detach = 1;
			break;
		case 'F':
			fanotify = 1;
			break;
		case 'j':
			json = 1;
			break;
		case 'h':
			json_object_put(p);
			json_object_put(allow);
			json_object_put(llrw);
			return cli_usage(1, tclone_usage_text);
		default:
			json_object_put(llrw);
			goto usage;
		}
	}
	if (optind >= argc) {
		json_object_put(llrw);
		goto usage;
	}
	if (getcwd(cwd, sizeof(cwd)) == NULL) {
		perror("gensee run: getcwd");
		json_object_put(p);
		json_object_put(allow);
		json_object_put(llrw);
		return TCLONE_EXIT_FAIL;
	}
	/*
	 * Podman only where the user asks for it: --podman, or the seed's
	 * GENSEE_TCLONE_PODMAN (which tcloned accepts only if it names the
	 * binary tcloned itself was configured with).
	 */
	if (ppath != NULL && ppath[0] != '\0')
		podman = 1;
	if (image == NULL && podman && getenv("GENSEE_TCLONE_IMAGE") != NULL &&
	    getenv("GENSEE_TCLONE_IMAGE")[0] != '\0')
		image = getenv("GENSEE_TCLONE_IMAGE");
	if (image != NULL && !podman) {
		fprintf(stderr, "gensee run: --image needs --podman\n");
		json_object_put(llrw);
		goto usage;
	}
	if (podman) {
		json_object_object_add(p, "podman", json_object_new_boolean(1));
		if (ppath != NULL && ppath[0] != '\0')
			json_object_object_add(p, "podman_path", json_object_new_string(ppath));
		if (image != NULL)
			json_object_object_add(p, "image", json_object_new_string(image));
	}
	av = json_object_new_array();
	for (int i = optind; i < argc; i++)
		json_object_array_add(av, json_object_new_string(argv[i]));
	json_object_object_add(p, "workspace", json_object_new_string(cwd));
	json_object_object_add(p, "argv", av);
	if (json_object_array_length(allow) > 0)
		json_object_object_add(p, "allow_net", allow);
	else
		json_object_put(allow);
	if (json_object_array_length(llrw) > 0)
		json_object_object_add(p, "landlock_rw", llrw);
	else
		json_object_put(llrw);
	{
		/*
		 * The file rules of --sandbox linux: the policy's fanotify
		 * section (or --linux-fanotify), built as `gensee run` builds it.
		 * A policy that cannot be read stops the start: fail closed.
		 */
		char *cause = NULL;
		struct json_object *policy = policy_load(&cause), *fan = NULL;
		if (policy != NULL) {
			fan = fanspec_build(policy, fanotify, &cause);
			/* Repository metadata read-only in the run, as under --sandbox linux. */
			struct json_object *pg = policy_get_effective(policy,
			    "linux.mount_view.protect_git");
			json_object_object_add(p, "protect_git", json_object_new_boolean(
			    pg == NULL || !json_object_is_type(pg, json_type_boolean) ||
			    json_object_get_boolean(pg)));
			json_object_put(pg);
			json_object_object_add(p, "agent", tclone_agent(policy, forced));
		}
		json_object_put(policy);
		if (fan == NULL) {
			fprintf(stderr, "gensee run: %s\n", cause != NULL ? cause : "policy");
			free(cause);
			json_object_put(p);
			return TCLONE_EXIT_FAIL;
		}
		if (schema_bool(fan, "enabled", 0))
			json_object_object_add(p, "fanotify", fan);
		else
			json_object_put(fan);
	}
	if (call("tclone.start", p, &res) != 0)
		return TCLONE_EXIT_FAIL;
	fprintf(stderr, "gensee: source %s: operation %s, agent in tmux session %s\n",
	    schema_string(res, "run_id"), schema_string(res, "operation_id"),
	    schema_string(res, "tmux_session"));
	if (!schema_bool(res, "observe_only", 0))
		fprintf(stderr, "gensee: fork from another terminal with: gensee run fork %s\n",
		    schema_string(res, "run_id"));
	{
		struct json_object *un = schema_child(schema_child(schema_child(res, "confinement"),
		    "fanotify"), "unenforced_in_snapshot");
		for (size_t i = 0; un != NULL && json_object_is_type(un, json_type_array) &&
		    i < json_object_array_length(un); i++)
			fprintf(stderr, "gensee run: warning: fanotify rule %s is not enforced on the "
			    "run's snapshot of the workspace (tclone.md)\n",
			    json_object_get_string(json_object_array_get_idx(un, i)));
	}
	if (json)
		cli_print_json(res);
	if (!detach && !json && isatty(STDIN_FILENO) && isatty(STDOUT_FILENO)) {
		char *tail[] = { "attach-session", "-t", "@SESSION@", NULL };
		return tmux_exec(res, tail, 1);
	}
	json_object_put(res);
	return 0;
usage:
	json_object_put(p);
	json_object_put(allow);
	return cli_usage(0, tclone_usage_text);
}

int
cmd_tclone(int argc, char **argv)
{
	return tclone_start(argc, argv);
}

/* Parse `SUB ID [options]`: the id first, then flags (getopt permutes). */
int
cmd_tclone_sub(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "copies", required_argument, NULL, 'c' },
		{ "name", required_argument, NULL, 'n' },
		{ "approach", required_argument, NULL, 'A' },
		{ "attach", required_argument, NULL, 'T' },
		{ "tmux", required_argument, NULL, 'T' },
		{ "into", required_argument, NULL, 'i' },
		{ "git", no_argument, NULL, 'g' },
		{ "filesystem", no_argument, NULL, 'F' },
		{ "paths", no_argument, NULL, 'P' },
		{ "dry-run", no_argument, NULL, 'D' },
		{ "force", no_argument, NULL, 'f' },
		{ "to", required_argument, NULL, 't' },
		{ "all", no_argument, NULL, 'a' },
		{ "merge", no_argument, NULL, 'M' },
		{ "promote", no_argument, NULL, 'R' },
		{ "discard-all", no_argument, NULL, 'X' },
		{ "discard", no_argument, NULL, 'Y' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *sub = argv[0], *scope = NULL, *into = NULL, *to = NULL, *name = NULL;
	const char *action = NULL;
	struct json_object *p = json_object_new_object(), *approaches = json_object_new_array();
	struct json_object *res = NULL;
	int ch, json = 0, all = 0, paths_mode = 0, dry = 0, force = 0, pane = 0;
	int64_t copies = 0;
	char **pos;
	int npos = 0;

	pos = calloc((size_t)argc + 1, sizeof(*pos));
	if (pos == NULL)
		return TCLONE_EXIT_FAIL;
	optind = 1;
	/* "-": positional arguments come back as 1, so --paths P Q and IDs mix with flags. */
	while ((ch = getopt_long(argc, argv, "-", longopts, NULL)) != -1) {
		switch (ch) {
		case 1:
			pos[npos++] = optarg;
			break;
		case 'j':
			json = 1;
			break;
		case 'c':
			if (util_parse_i64(optarg, 1, 8, &copies) != 0) {
				fprintf(stderr, "gensee run fork: --copies: 1..8\n");
				goto usage;
			}
			break;
		case 'n':
			name = optarg;
			break;
		case 'A':
			json_object_array_add(approaches, json_object_new_string(optarg));
			break;
		case 'T':
			if (strcmp(optarg, "tmux:right") != 0 && strcmp(optarg, "right") != 0) {
				fprintf(stderr, "gensee run: --attach tmux:right or --tmux right\n");
				goto usage;
			}
			pane = 1;
			break;
		case 'i':
			into = optarg;
			break;
		case 'g':
		case 'F':
			if (scope != NULL)
				goto usage;
			scope = ch == 'g' ? "git" : "filesystem";
			break;
		case 'P':
			if (scope != NULL)
				goto usage;
			scope = "paths";
			paths_mode = 1;
			break;
		case 'D':
			dry = 1;
			break;
		case 'f':
			force = 1;
			break;
		case 't':
			to = optarg;
			break;
		case 'a':
			all = 1;
			break;
		case 'M':
		case 'R':
		case 'X':
		case 'Y':
			if (action != NULL)
				goto usage;
			action = ch == 'M' ? "merge" : ch == 'R' ? "promote" :
			    ch == 'X' ? "discard_all" : "discard";
			break;
		case 'h':
			json_object_put(p);
			json_object_put(approaches);
			free(pos);
			return cli_usage(1, tclone_usage_text);
		default:
			goto usage;
		}
	}
	/* Everything after -- (send's TEXT) is positional too. */
	for (int i = optind; i < argc; i++)
		pos[npos++] = argv[i];
	pos[npos] = NULL;

	if (strcmp(sub, "list") == 0) {
		if (npos != 0)
			goto usage;
		if (call("tclone.list", p, &res) != 0)
			goto fail_sent;
		free(pos);
		json_object_put(approaches);
		return out_json_or(res, json, human_list);
	}
	if (strcmp(sub, "delete") == 0 && all) {
		if (npos != 0)
			goto usage;
		json_object_object_add(p, "all", json_object_new_boolean(1));
		if (call("tclone.delete", p, &res) != 0)
			goto fail_sent;
		free(pos);
		json_object_put(approaches);
		return out_json_or(res, 1, NULL);
	}
	if (npos < 1)
		goto usage;
	if (bridge_path() != NULL && (strcmp(sub, "shell") == 0 || strcmp(sub, "attach") == 0)) {
		fprintf(stderr, "gensee run %s: host-only (not through an agent's control bridge)\n",
		    sub);
		json_object_put(p);
		json_object_put(approaches);
		free(pos);
		return TCLONE_EXIT_FAIL;
	}
	if (strcmp(sub, "approve") == 0) {
		/*
		 * The user's choice, recorded by the agent's UserPromptSubmit
		 * hook through the bridge; a later merge, switch or discard of
		 * that child through the bridge consumes it.
		 */
		if (npos != 1 || action == NULL || strcmp(action, "discard_all") == 0)
			goto usage;
		if (bridge_path() == NULL) {
			fprintf(stderr, "gensee run approve: only inside a tclone agent (its control "
			    "bridge); at the host, run the command itself\n");
			json_object_put(p);
			json_object_put(approaches);
			free(pos);
			return TCLONE_EXIT_FAIL;
		}
		json_object_object_add(p, "run_id", json_object_new_string(pos[0]));
		json_object_object_add(p, "action", json_object_new_string(action));
		if (call("tclone.approve", p, &res) != 0)
			goto fail_sent;
		free(pos);
		json_object_put(approaches);
		return out_json_or(res, 1, NULL);
	}
	if (strcmp(sub, "exec") == 0 || strcmp(sub, "shell") == 0) {
		if ((strcmp(sub, "exec") == 0) != (npos >= 2))
			goto usage;
		json_object_object_add(p, "run_id", json_object_new_string(pos[0]));
		if (call("tclone.attach", p, &res) != 0)
			goto fail_sent;
		int rc = strcmp(sub, "exec") == 0 ? tclone_exec(res, pos + 1, npos - 1) :
		    tclone_shell(res);
		json_object_put(res);
		free(pos);
		json_object_put(approaches);
		return rc;
	}
	if (strcmp(sub, "send") == 0) {
		if (npos < 2)
			goto usage;
		/* One string of text, then Enter: typed, not a tmux command. */
		size_t len = 0;
		for (int i = 1; i < npos; i++)
			len += strlen(pos[i]) + 1;
		char *text = calloc(len + 1, 1);
		for (int i = 1; text != NULL && i < npos; i++) {
			if (i > 1)
				strcat(text, " ");
			strcat(text, pos[i]);
		}
		json_object_object_add(p, "run_id", json_object_new_string(pos[0]));
		if (text != NULL && bridge_path() != NULL) {
			/* An agent sees no other run's tmux: tcloned types it, to a direct child only. */
			json_object_object_add(p, "text", json_object_new_string(text));
			free(text);
			if (call("tclone.send", p, &res) != 0)
				goto fail_sent;
			json_object_put(res);
			free(pos);
			json_object_put(approaches);
			return 0;
		}
		if (call("tclone.attach", p, &res) != 0) {
			free(text);
			goto fail_sent;
		}
		/* Out of any mode first: text typed in view mode runs key bindings. */
		char *t0[] = { "copy-mode", "-q", "-t", "@SESSION@", NULL };
		char *t1[] = { "send-keys", "-t", "@SESSION@", "-l", "--", text, NULL };
		char *t2[] = { "send-keys", "-t", "@SESSION@", "Enter", NULL };
		int rc = text == NULL ? TCLONE_EXIT_FAIL : tmux_exec(res, t0, 0);
		if (rc == 0)
			rc = tmux_exec(res, t1, 0);
		if (rc == 0)
			rc = tmux_exec(res, t2, 0);
		free(text);
		json_object_put(res);
		free(pos);
		json_object_put(approaches);
		return rc;
	}
	if (npos != 1 && !(strcmp(sub, "merge") == 0 && paths_mode))
		goto usage;
	const char *method = NULL;
	void (*human)(struct json_object *) = NULL;
	if (strcmp(sub, "fork") == 0) {
		method = "tclone.fork";
		json_object_object_add(p, "run_id", json_object_new_string(pos[0]));
		if (copies > 0)
			json_object_object_add(p, "copies", json_object_new_int64(copies));
		if (name != NULL)
			json_object_object_add(p, "name", json_object_new_string(name));
		if (json_object_array_length(approaches) > 0)
			json_object_object_add(p, "approaches", json_object_get(approaches));
		human = human_fork;
	} else if (strcmp(sub, "merge") == 0) {
		method = "tclone.merge";
		if (into == NULL || (paths_mode && npos < 2))
			goto usage;
		json_object_object_add(p, "fork", json_object_new_string(pos[0]));
		json_object_object_add(p, "into", json_object_new_string(into));
		/* The seed's default scope is --git. */
		json_object_object_add(p, "scope", json_object_new_string(scope ? scope : "git"));
		if (paths_mode) {
			struct json_object *pa = json_object_new_array();
			for (int i = 1; i < npos; i++)
				json_object_array_add(pa, json_object_new_string(pos[i]));
			json_object_object_add(p, "paths", pa);
		}
		if (dry)
			json_object_object_add(p, "dry_run", json_object_new_boolean(1));
		if (force)
			json_object_object_add(p, "force", json_object_new_boolean(1));
		human = human_merge;
	} else if (strcmp(sub, "choose") == 0) {
		if (action == NULL)
			goto usage;
		method = "tclone.choose";
		json_object_object_add(p, "run_id", json_object_new_string(pos[0]));
		json_object_object_add(p, "action", json_object_new_string(action));
	} else if (strcmp(sub, "keep") == 0) {
		if (to == NULL)
			goto usage;
		method = "tclone.keep";
		json_object_object_add(p, "run_id", json_object_new_string(pos[0]));
		json_object_object_add(p, "to", json_object_new_string(to));
	} else if (strcmp(sub, "attach") == 0) {
		json_object_object_add(p, "run_id", json_object_new_string(pos[0]));
		if (call("tclone.attach", p, &res) != 0)
			goto fail_sent;
		char *tail[] = { "attach-session", "-t", "@SESSION@", NULL };
		free(pos);
		json_object_put(approaches);
		if (pane) {
			char id[64];
			int rc = host_pane(schema_string(res, "run_id"), NULL, id, sizeof(id));
			json_object_put(res);
			return rc;
		}
		return tmux_exec(res, tail, 1);
	} else {
		static const char *const simple[][2] = {
			{ "diff", "tclone.diff" }, { "summary", "tclone.summary" },
			{ "compare", "tclone.compare" }, { "switch", "tclone.switch" },
			{ "discard", "tclone.discard" }, { "delete", "tclone.delete" },
		};
		for (size_t i = 0; i < nitems(simple); i++)
			if (strcmp(sub, simple[i][0]) == 0)
				method = simple[i][1];
		if (method == NULL)
			goto usage;
		json_object_object_add(p, "run_id", json_object_new_string(pos[0]));
		if (strcmp(sub, "diff") == 0)
			human = human_diff;
	}
	if (call(method, p, &res) != 0)
		goto fail_sent;
	int rc = 0;
	if (strcmp(sub, "merge") == 0 || strcmp(sub, "choose") == 0) {
		struct json_object *m = strcmp(sub, "choose") == 0 ? schema_child(res, "result") : res;
		const char *st = m != NULL ? schema_string(m, "status") : NULL;
		if (st != NULL && strcmp(st, "conflict") == 0)
			rc = TCLONE_EXIT_CONFLICT;
	}
	if (pane && strcmp(sub, "fork") == 0) {
		/* The first fork to the right of this pane, the next ones below it. */
		struct json_object *forks = schema_child(res, "forks");
		char prev[64] = "";
		for (size_t i = 0; forks != NULL && i < json_object_array_length(forks); i++) {
			char id[64];
			if (host_pane(schema_string(json_object_array_get_idx(forks, i), "run_id"),
			    prev[0] ? prev : NULL, id, sizeof(id)) != 0) {
				rc = TCLONE_EXIT_FAIL;
				break;
			}
			util_strlcpy(prev, id, sizeof(prev));
		}
	}
	free(pos);
	json_object_put(approaches);
	out_json_or(res, json, human);
	return rc;
usage:
	json_object_put(p);
	json_object_put(approaches);
	free(pos);
	return cli_usage(0, tclone_usage_text);
fail_sent:
	json_object_put(approaches);
	free(pos);
	return TCLONE_EXIT_FAIL;
}
