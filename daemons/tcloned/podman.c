/*
 * podman.c: the Podman (runc) runtime of gensee-tcloned, where the user
 * asks for it (`gensee run --runtime tclone --podman`).
 *
 * The container is started exactly like our own launcher's agent: a child
 * of tcloned (the "holder") is held on a pipe until boundaryd has made the
 * operation around it (cgroup, nftables policy); only then does it exec
 * `podman run`, from inside the operation's cgroup, with that cgroup as
 * --cgroup-parent. So the podman client, conmon and every process of the
 * container are in the operation's cgroup subtree: boundaryd's `socket
 * cgroupv2` rules and cgroup.kill reach them (threat: a container that
 * escapes the operation's network policy or outlives its end).
 *
 * Threat: tcloned is root and runs podman as root. The podman binary and
 * the storage configuration are tcloned's (its --podman option and its own
 * environment's CONTAINERS_STORAGE_CONF), never the caller's; a caller may
 * only name the binary tcloned was configured with. The image is the
 * caller's choice and runs as the caller's uid with every capability
 * dropped, no_new_privs and a read-only root.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <pwd.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cap-ng.h>
#include <json-c/json.h>

#include "log.h"
#include "proc.h"
#include "proto.h"
#include "safefs.h"
#include "schema.h"
#include "tcloned.h"
#include "util.h"

#define PODMAN_CMD_TIMEOUT_MS 60000
#define PODMAN_START_TIMEOUT_MS 30000
#define PODMAN_OUT_MAX (1024 * 1024)
#define PODMAN_ARGV_MAX (TCLONED_ARGV_MAX + 96)
/* Podman lowers conmon's RLIMIT_NPROC to this when it cannot raise it. */
#define PODMAN_NPROC_CAP 32768

/* An image reference: a name, no option-like start, no spaces or controls. */
int
podman_image_ok(const char *s)
{
	size_t n = s != NULL ? strlen(s) : 0;

	if (n == 0 || n > TCLONED_IMAGE_MAX || s[0] == '-')
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
		    (s[i] >= '0' && s[i] <= '9') || strchr("._-/:@", s[i]) != NULL))
			return 0;
	return 1;
}

/*
 * The configured podman: an absolute, root-owned regular file nobody else
 * may write, below directories only root may write. Threat: root running
 * a binary a user could have replaced.
 */
int
podman_check(struct tcloned *t, char *code, size_t codelen, char **cause)
{
	char buf[PATH_MAX];
	struct stat st;
	const char *runcs[] = { "/usr/sbin/runc", "/usr/bin/runc", "/usr/local/sbin/runc",
	    "/usr/local/bin/runc" };
	int have_runc = 0;

	util_strlcpy(code, TE_PODMAN_UNAVAILABLE, codelen);
	if (t->td_podman[0] != '/' || util_strlcpy(buf, t->td_podman, sizeof(buf)) >= sizeof(buf)) {
		util_cause(cause, "podman %s: not an absolute path", t->td_podman);
		return -1;
	}
	if (stat(buf, &st) != 0) {
		util_cause(cause, "podman %s: %s", buf, strerror(errno));
		return -1;
	}
	if (!S_ISREG(st.st_mode) || st.st_uid != 0 || (st.st_mode & 022) != 0 ||
	    (st.st_mode & 0111) == 0) {
		util_cause(cause, "podman %s: not a root-owned executable only root may write", buf);
		return -1;
	}
	for (char *s = strrchr(buf, '/'); s != NULL; s = strrchr(buf, '/')) {
		*s = '\0';
		if (stat(buf[0] ? buf : "/", &st) != 0 || st.st_uid != 0 ||
		    ((st.st_mode & 022) != 0 && !(st.st_mode & S_ISVTX))) {
			util_cause(cause, "podman %s: directory %s is not root-controlled",
			    t->td_podman, buf[0] ? buf : "/");
			return -1;
		}
		if (buf[0] == '\0')
			break;
	}
	for (size_t i = 0; i < nitems(runcs); i++)
		if (stat(runcs[i], &st) == 0 && S_ISREG(st.st_mode))
			have_runc = 1;
	if (!have_runc) {
		util_cause(cause, "runc is not installed (podman runs are runc only)");
		return -1;
	}
	/* runc sets up the container's network namespace; sandbox_tcloned keeps it for that. */
	if (capng_get_caps_process() != 0 || !capng_have_capability(CAPNG_EFFECTIVE, CAP_NET_ADMIN)) {
		util_cause(cause, "podman runs need CAP_NET_ADMIN, which tcloned was started without "
		    "(its unit's CapabilityBoundingSet), or podman was not usable at its start");
		return -1;
	}
	return 0;
}

/* The global options every podman call gets: runc, cgroupfs, no event log. */
static size_t
podman_globals(struct tcloned *t, const char **av)
{
	size_t k = 0;

	av[k++] = t->td_podman;
	av[k++] = "--runtime";
	av[k++] = "runc";
	av[k++] = "--cgroup-manager";
	av[k++] = "cgroupfs";
	av[k++] = "--events-backend";
	av[k++] = "none";
	return k;
}

/*
 * Run podman as root (tcloned's environment: CONTAINERS_STORAGE_CONF is
 * the operator's), stdout captured, stderr captured, bounded in time.
 * Returns its exit status, or -1.
 */
static int
podman_run_cmd(struct tcloned *t, const char *const *args, char **out, char **err, char **cause)
{
	const char *av[32];
	size_t k = podman_globals(t, av);
	int po[2], pe[2];

	for (size_t i = 0; args[i] != NULL && k < nitems(av) - 1; i++)
		av[k++] = args[i];
	av[k] = NULL;
	if (out != NULL)
		*out = NULL;
	if (err != NULL)
		*err = NULL;
	if (pipe2(po, O_CLOEXEC) != 0) {
		util_cause(cause, "pipe: %s", strerror(errno));
		return -1;
	}
	if (pipe2(pe, O_CLOEXEC) != 0) {
		close(po[0]);
		close(po[1]);
		util_cause(cause, "pipe: %s", strerror(errno));
		return -1;
	}
	pid_t pid = fork();
	if (pid < 0) {
		util_cause(cause, "fork: %s", strerror(errno));
		close(po[0]);
		close(po[1]);
		close(pe[0]);
		close(pe[1]);
		return -1;
	}
	if (pid == 0) {
		sigset_t none;
		int nul = open("/dev/null", O_RDONLY);
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		if (nul < 0 || dup2(nul, 0) < 0 || dup2(po[1], 1) < 0 || dup2(pe[1], 2) < 0)
			_exit(126);
		execv(t->td_podman, (char *const *)av);
		_exit(127);
	}
	close(po[1]);
	close(pe[1]);
	/* Both pipes read to the end; bounded by size and by the deadline below. */
	char *bufs[2] = { NULL, NULL };
	size_t lens[2] = { 0, 0 };
	int fds[2] = { po[0], pe[0] }, open_n = 2;
	int64_t deadline = util_monotonic_ms() + PODMAN_CMD_TIMEOUT_MS;
	int rc = -1, timed_out = 0;
	while (open_n > 0) {
		struct pollfd pf[2];
		int n = 0, idx[2];
		for (int i = 0; i < 2; i++)
			if (fds[i] >= 0) {
				pf[n].fd = fds[i];
				pf[n].events = POLLIN;
				idx[n++] = i;
			}
		int64_t left = deadline - util_monotonic_ms();
		if (left <= 0) {
			timed_out = 1;
			break;
		}
		if (poll(pf, (nfds_t)n, (int)left) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		for (int j = 0; j < n; j++) {
			if (pf[j].revents == 0)
				continue;
			int i = idx[j];
			char tmp[4096];
			ssize_t r = read(fds[i], tmp, sizeof(tmp));
			if (r < 0 && errno == EINTR)
				continue;
			if (r <= 0 || lens[i] + (size_t)r > PODMAN_OUT_MAX) {
				close(fds[i]);
				fds[i] = -1;
				open_n--;
				continue;
			}
			char *nb = realloc(bufs[i], lens[i] + (size_t)r + 1);
			if (nb == NULL) {
				close(fds[i]);
				fds[i] = -1;
				open_n--;
				continue;
			}
			bufs[i] = nb;
			memcpy(bufs[i] + lens[i], tmp, (size_t)r);
			lens[i] += (size_t)r;
			bufs[i][lens[i]] = '\0';
		}
	}
	for (int i = 0; i < 2; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	if (timed_out)
		kill(pid, SIGKILL);
	int st;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	if (timed_out)
		util_cause(cause, "podman %s: no answer in %d s", args[0], PODMAN_CMD_TIMEOUT_MS / 1000);
	else
		rc = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
	for (int i = 0; i < 2; i++) {
		char **dst = i ? err : out;
		if (bufs[i] == NULL)
			bufs[i] = strdup("");
		if (dst != NULL)
			*dst = bufs[i];
		else
			free(bufs[i]);
	}
	return rc;
}

/* The first line of podman's stderr, for a cause. */
static const char *
first_line(char *s)
{
	if (s == NULL)
		return "";
	s[strcspn(s, "\n")] = '\0';
	return s;
}

/*
 * Whether the image exists in the store and has /usr/bin/tmux, seen in
 * the image's own tree (podman image mount), never through its links.
 */
int
podman_image_probe(struct tcloned *t, const char *image, int *has_tmux, char *code,
    size_t codelen, char **cause)
{
	char *out = NULL, *err = NULL;
	const char *mnt[] = { "image", "mount", image, NULL };
	const char *umnt[] = { "image", "unmount", image, NULL };
	int rc;

	*has_tmux = 0;
	if (!podman_image_ok(image)) {
		util_strlcpy(code, PE_INVALID_PARAMS, codelen);
		util_cause(cause, "image: a name of [A-Za-z0-9._/:@-], not starting with -");
		return -1;
	}
	rc = podman_run_cmd(t, mnt, &out, &err, cause);
	if (rc != 0) {
		util_strlcpy(code, TE_PODMAN_IMAGE, codelen);
		if (rc > 0)
			util_cause(cause, "image %s is not in podman's store: %s", image, first_line(err));
		free(out);
		free(err);
		return -1;
	}
	out[strcspn(out, "\n")] = '\0';
	if (out[0] == '/') {
		int dfd = open(out, O_PATH | O_DIRECTORY | O_CLOEXEC);
		if (dfd >= 0) {
			/* No link followed: an image's link to a host path answers "no". */
			int fd = safefs_openat(dfd, "usr/bin/tmux", O_PATH | O_CLOEXEC, 0);
			struct stat st;
			if (fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && (st.st_mode & 0111))
				*has_tmux = 1;
			if (fd >= 0)
				close(fd);
			close(dfd);
		}
	}
	free(out);
	free(err);
	out = err = NULL;
	if (podman_run_cmd(t, umnt, NULL, NULL, cause) != 0)
		log_info("podman image unmount %s failed", image);
	return 0;
}

void
podman_name(const struct trun *r, char *out, size_t len)
{
	snprintf(out, len, "gensee-tclone-%s", r->tr_id);
}

/* rmdir path and the empty cgroups below it, deepest first (bounded). */
static void
rmdir_empty(const char *path, int depth, int *budget)
{
	DIR *d;
	struct dirent *de;

	if (depth > 8 || (d = opendir(path)) == NULL)
		return;
	while ((de = readdir(d)) != NULL && --(*budget) > 0) {
		char sub[PATH_MAX];
		if (de->d_type != DT_DIR || de->d_name[0] == '.' ||
		    (size_t)snprintf(sub, sizeof(sub), "%s/%s", path, de->d_name) >= sizeof(sub))
			continue;
		rmdir_empty(sub, depth + 1, budget);
	}
	closedir(d);
	rmdir(path);
}

/* Remove the run's container (ended or not) and what runc left in v1 hierarchies. */
void
podman_remove(struct tcloned *t, struct trun *r)
{
	char name[TCLONED_ID_MAX + 32], *cause = NULL;
	const char *cg = schema_string(r->tr_rec, "cgroup");

	if (strcmp(r->tr_runtime, "podman") != 0)
		return;
	podman_name(r, name, sizeof(name));
	const char *rm[] = { "rm", "--force", "--time", "0", "--ignore", name, NULL };
	/*
	 * A container whose processes the operation's end already killed can
	 * fail once ("not running") while podman notices; a second try removes it.
	 */
	for (int i = 0; i < 2; i++) {
		char *err = NULL;
		int rc = podman_run_cmd(t, rm, NULL, &err, &cause);
		if (rc == 0) {
			free(err);
			break;
		}
		if (i == 1)
			log_warnx("podman rm %s: %s", name, cause ? cause : first_line(err));
		free(cause);
		cause = NULL;
		free(err);
	}
	/*
	 * On a hybrid cgroup host runc also makes the operation's path in
	 * every v1 hierarchy; empty ones are removed (rmdir never removes a
	 * cgroup that has members or children).
	 */
	if (cg != NULL && cg[0] == '/' && strstr(cg, "..") == NULL) {
		const char *v1[] = { "blkio", "cpu", "cpuacct", "cpuset", "devices", "freezer",
		    "memory", "pids", "systemd", "net_cls", "net_prio", "perf_event", "hugetlb",
		    "rdma", "misc" };
		for (size_t i = 0; i < nitems(v1); i++) {
			char p[PATH_MAX];
			int budget = 256;
			if ((size_t)snprintf(p, sizeof(p), "/sys/fs/cgroup/%s%s", v1[i], cg) >= sizeof(p))
				continue;
			rmdir_empty(p, 0, &budget);
		}
	}
}

/*
 * delete --all: containers named gensee-tclone-* in this store that no
 * run tcloned knows of (a crash between start and record, say) and that
 * carry the caller's uid label (root: every one) are removed.
 */
int
podman_reap_orphans(struct tcloned *t, uid_t uid, struct json_object *gone)
{
	char *out = NULL, *err = NULL, *cause = NULL, label[64];
	const char *ps[] = { "ps", "--all", "--filter", "name=^gensee-tclone-", "--filter", label,
	    "--format", "{{.Names}}", NULL };
	int n = 0;

	if (podman_check(t, label, sizeof(label), &cause) != 0) {
		free(cause);
		return 0;	/* no podman here: nothing of it to reap */
	}
	if (uid == 0)
		snprintf(label, sizeof(label), "label=gensee.tclone=1");
	else
		snprintf(label, sizeof(label), "label=gensee.tclone.uid=%u", (unsigned)uid);
	if (podman_run_cmd(t, ps, &out, &err, &cause) != 0) {
		log_warnx("podman ps: %s", cause ? cause : first_line(err));
		free(cause);
		free(out);
		free(err);
		return -1;
	}
	for (char *save = NULL, *l = strtok_r(out, "\n", &save); l != NULL;
	    l = strtok_r(NULL, "\n", &save)) {
		const char *id = l + strlen("gensee-tclone-");
		if (strncmp(l, "gensee-tclone-", 14) != 0 || tcloned_find(t, id) != NULL)
			continue;
		const char *rm[] = { "rm", "--force", "--time", "0", "--ignore", l, NULL };
		if (podman_run_cmd(t, rm, NULL, NULL, &cause) == 0) {
			json_object_array_add(gone, json_object_new_string(l));
			n++;
		} else {
			free(cause);
			cause = NULL;
		}
	}
	free(out);
	free(err);
	return n;
}

static int
argv_add(const char **av, size_t *k, const char *s)
{
	if (*k + 1 >= PODMAN_ARGV_MAX || s == NULL)
		return -1;
	av[(*k)++] = s;
	av[*k] = NULL;
	return 0;
}

/*
 * tmux -S sock ARGS... as the run's user (never as root: the server is
 * the agent's, inside the container). Returns tmux's exit status or -1.
 */
static int
user_tmux(const struct trun *r, const char *sock, const char *const *args)
{
	const char *argv[TCLONED_ARGV_MAX + 16];
	size_t k = 0;
	pid_t pid;
	int st;

	argv[k++] = "tmux";
	argv[k++] = "-S";
	argv[k++] = sock;
	for (size_t i = 0; args[i] != NULL && k < nitems(argv) - 1; i++)
		argv[k++] = args[i];
	argv[k] = NULL;
	if ((pid = fork()) < 0)
		return -1;
	if (pid == 0) {
		char *envp[] = { "PATH=/usr/bin:/bin", "LANG=C.UTF-8", NULL };
		int nul = open("/dev/null", O_RDWR);
		if (nul < 0 || dup2(nul, 0) < 0 || dup2(nul, 1) < 0 || dup2(nul, 2) < 0 ||
		    setgroups(0, NULL) != 0 || setresgid(r->tr_gid, r->tr_gid, r->tr_gid) != 0 ||
		    setresuid(r->tr_uid, r->tr_uid, r->tr_uid) != 0)
			_exit(126);
		execve("/usr/bin/tmux", (char *const *)argv, envp);
		_exit(127);
	}
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/*
 * The agent's session in the container's tmux server (started with -D,
 * no configuration): made by a client as the user, the argv passed as
 * words (no shell, no quoting); then exit-empty, so the container ends
 * when the session does.
 */
static int
start_session(const struct trun *r, const char *sock)
{
	const char *args[TCLONED_ARGV_MAX + 12];
	const char *ee[] = { "set-option", "-s", "exit-empty", "on", NULL };
	size_t k = 0;

	args[k++] = "new-session";
	args[k++] = "-d";
	args[k++] = "-s";
	args[k++] = TCLONED_SESSION;
	args[k++] = "-x";
	args[k++] = "200";
	args[k++] = "-y";
	args[k++] = "50";
	args[k++] = "-c";		/* the workspace, not the client's (host) cwd */
	args[k++] = r->tr_workspace;
	args[k++] = "--";
	for (size_t i = 0; i < json_object_array_length(r->tr_argv) && k < nitems(args) - 1; i++)
		args[k++] = json_object_get_string(json_object_array_get_idx(r->tr_argv, i));
	args[k] = NULL;
	if (user_tmux(r, sock, args) != 0)
		return -1;
	return user_tmux(r, sock, ee) == 0 ? 0 : -1;
}

/*
 * Start the run's agent as a podman container. Same contract as
 * launch_agent: on success r is running with r->tr_op and r->tr_pid
 * (the podman client, in the operation's cgroup).
 */
int
podman_launch(struct tcloned *t, struct trun *r, char **cause)
{
	char ws[PATH_MAX], rundir[PATH_MAX], sock[PATH_MAX], ctx[PATH_MAX];
	char name[TCLONED_ID_MAX + 32], vws[2 * PATH_MAX + 8], vrd[2 * PATH_MAX + 8];
	char user[64], nofile[64], nproc[64], luid[64], code[64];
	char envs[16][PATH_MAX + 64];
	const char *av[PODMAN_ARGV_MAX];
	size_t k, ne = 0;
	int go[2], has_tmux = 0;
	struct rlimit rl;
	pid_t pid;

	if (podman_check(t, code, sizeof(code), cause) != 0 ||
	    podman_image_probe(t, r->tr_image, &has_tmux, code, sizeof(code), cause) != 0) {
		if (strcmp(code, TE_PODMAN_IMAGE) == 0)
			r->tr_errcode = TE_PODMAN_IMAGE;
		else if (strcmp(code, PE_INVALID_PARAMS) == 0)
			r->tr_errcode = PE_INVALID_PARAMS;
		else
			r->tr_errcode = TE_PODMAN_UNAVAILABLE;
		return -1;
	}
	r->tr_tmux = has_tmux;
	if ((size_t)snprintf(ws, sizeof(ws), "%s/tclone/runs/%s/ws", t->td_root, r->tr_id) >=
	    sizeof(ws) ||
	    (size_t)snprintf(rundir, sizeof(rundir), "%s/tclone/%s", t->td_runtime, r->tr_id) >=
	    sizeof(rundir) ||
	    (size_t)snprintf(sock, sizeof(sock), "%s/tmux.sock", rundir) >= sizeof(sock) ||
	    (size_t)snprintf(ctx, sizeof(ctx), "%s/context.json", rundir) >= sizeof(ctx)) {
		util_cause(cause, "paths too long");
		return -1;
	}
	/* -v takes SRC:DST[:OPTS]: a ':' or ',' in a path would be read as options. */
	if (strpbrk(r->tr_workspace, ":,") != NULL || strpbrk(rundir, ":,") != NULL) {
		r->tr_errcode = TE_WORKSPACE;
		util_cause(cause, "a podman run's workspace path may not hold ':' or ','");
		return -1;
	}
	snprintf(vws, sizeof(vws), "%s:%s:rw", ws, r->tr_workspace);
	snprintf(vrd, sizeof(vrd), "%s:%s:rw", rundir, rundir);
	podman_name(r, name, sizeof(name));
	snprintf(user, sizeof(user), "%u:%u", (unsigned)r->tr_uid, (unsigned)r->tr_gid);
	snprintf(luid, sizeof(luid), "gensee.tclone.uid=%u", (unsigned)r->tr_uid);
	/* The agent's limits are tcloned's own, never more (nproc capped as podman caps conmon's). */
	if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
		rl.rlim_cur = rl.rlim_max = 1024;
	snprintf(nofile, sizeof(nofile), "nofile=%llu:%llu", (unsigned long long)rl.rlim_cur,
	    (unsigned long long)rl.rlim_max);
	if (getrlimit(RLIMIT_NPROC, &rl) != 0)
		rl.rlim_cur = rl.rlim_max = 1024;
	if (rl.rlim_max > PODMAN_NPROC_CAP)
		rl.rlim_max = PODMAN_NPROC_CAP;
	if (rl.rlim_cur > rl.rlim_max)
		rl.rlim_cur = rl.rlim_max;
	snprintf(nproc, sizeof(nproc), "nproc=%llu:%llu", (unsigned long long)rl.rlim_cur,
	    (unsigned long long)rl.rlim_max);
	k = podman_globals(t, av);
	av[k] = NULL;
	const char *fixed[] = { "run", "--rm", "--name", name, "--label", "gensee.tclone=1",
	    "--label", luid, "--pids-limit", "-1", "--ulimit", nofile, "--ulimit", nproc,
	    "--cap-drop", "all", "--security-opt", "no-new-privileges", "--read-only",
	    "--user", user, "--hostname", "gensee-tclone", "--workdir", r->tr_workspace,
	    "-v", vws, "-v", vrd, "--network",
	    (r->tr_observe_only || (r->tr_network != NULL &&
	    json_object_array_length(schema_child(r->tr_network, "allow")) > 0)) ? "host" : "none",
	    "--cgroup-parent", "@CGROUP@", NULL };
	for (size_t i = 0; fixed[i] != NULL; i++)
		argv_add(av, &k, fixed[i]);
	/* The agent's environment: as our own launcher gives it. */
	{
		struct passwd *pw = getpwuid(r->tr_uid);
		const char *kv[][2] = {
			{ "PATH", "/usr/local/bin:/usr/bin:/bin" },
			{ "HOME", "/tmp" },
			{ "USER", pw != NULL ? pw->pw_name : "agent" },
			{ "TERM", "xterm-256color" },
			{ "LANG", "C.UTF-8" },
			{ "GENSEE_OPERATION_ID", "@OP@" },
			{ "GENSEE_RUN_ID", r->tr_id },
			{ "GENSEE_WORKSPACE", r->tr_workspace },
			{ "GENSEE_TCLONE_ROLE", r->tr_role },
			{ "GENSEE_TCLONE_CONTEXT", ctx },
			{ "GENSEE_TCLONE_SOURCE", r->tr_source[0] ? r->tr_source : NULL },
			{ "GENSEE_TCLONE_APPROACH", r->tr_approach[0] ? r->tr_approach : NULL },
			{ "GENSEE_TCLONE_OBSERVE_ONLY", r->tr_observe_only ? "1" : NULL },
		};
		for (size_t i = 0; i < nitems(kv) && ne < nitems(envs); i++) {
			if (kv[i][1] == NULL)
				continue;
			/* An approach is a label: refused with controls at fork time already. */
			snprintf(envs[ne], sizeof(envs[ne]), "%s=%s", kv[i][0], kv[i][1]);
			argv_add(av, &k, "--env");
			argv_add(av, &k, envs[ne++]);
		}
	}
	if (has_tmux) {
		argv_add(av, &k, "--entrypoint");
		argv_add(av, &k, "/usr/bin/tmux");
		argv_add(av, &k, r->tr_image);
		argv_add(av, &k, "-D");
		argv_add(av, &k, "-S");
		argv_add(av, &k, sock);
		argv_add(av, &k, "-f");
		argv_add(av, &k, "/dev/null");
	} else {
		/* No tmux in the image: the agent itself is the container's main process. */
		argv_add(av, &k, "--entrypoint");
		argv_add(av, &k, json_object_get_string(json_object_array_get_idx(r->tr_argv, 0)));
		argv_add(av, &k, r->tr_image);
		for (size_t i = 1; i < json_object_array_length(r->tr_argv); i++)
			if (argv_add(av, &k, json_object_get_string(json_object_array_get_idx(r->tr_argv,
			    i))) != 0)
				break;
	}
	if (k + 1 >= PODMAN_ARGV_MAX) {
		r->tr_errcode = PE_INVALID_PARAMS;
		util_cause(cause, "too many arguments");
		return -1;
	}
	char rel_err[160];
	snprintf(rel_err, sizeof(rel_err), "tclone/%s/podman.err", r->tr_id);
	unlinkat(t->td_runtime_fd, rel_err, 0);
	int errfd = safefs_openat(t->td_runtime_fd, rel_err, O_WRONLY | O_CREAT | O_EXCL |
	    O_CLOEXEC, 0600);
	if (errfd < 0 || pipe2(go, O_CLOEXEC) != 0) {
		util_cause(cause, "podman.err: %s", strerror(errno));
		if (errfd >= 0)
			close(errfd);
		return -1;
	}
	pid = fork();
	if (pid < 0) {
		util_cause(cause, "fork: %s", strerror(errno));
		close(go[0]);
		close(go[1]);
		close(errfd);
		return -1;
	}
	if (pid == 0) {
		/* The holder: nothing runs until boundaryd has put this process in the operation. */
		char buf[160], cg[PATH_MAX], *line = NULL;
		size_t cap = 0;
		sigset_t none;
		FILE *f;
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		close(go[1]);
		if (util_read_line(go[0], buf, sizeof(buf)) != 0)
			_exit(125);	/* no operation: never run unsupervised */
		/* The cgroup boundaryd put us in (v2): the container's parent cgroup. */
		cg[0] = '\0';
		if ((f = fopen("/proc/self/cgroup", "re")) != NULL) {
			while (getline(&line, &cap, f) > 0)
				if (strncmp(line, "0::", 3) == 0) {
					line[strcspn(line, "\n")] = '\0';
					util_strlcpy(cg, line + 3, sizeof(cg));
				}
			fclose(f);
		}
		char want[128];
		snprintf(want, sizeof(want), "/%s/", t->td_cgroup_base);
		/* Fail closed: only ever below boundaryd's base, never the root or ours. */
		if (strncmp(cg, want, strlen(want)) != 0 || strstr(cg, "..") != NULL)
			_exit(125);
		for (size_t i = 0; av[i] != NULL; i++) {
			if (strcmp(av[i], "@CGROUP@") == 0)
				av[i] = cg;
			else if (strcmp(av[i], "GENSEE_OPERATION_ID=@OP@") == 0) {
				static char openv[200];
				snprintf(openv, sizeof(openv), "GENSEE_OPERATION_ID=%s", buf);
				av[i] = openv;
			}
		}
		int nul = open("/dev/null", O_RDWR);
		if (nul < 0 || dup2(nul, 0) < 0 || dup2(nul, 1) < 0 || dup2(errfd, 2) < 0)
			_exit(125);
		execv(t->td_podman, (char *const *)av);
		_exit(127);
	}
	close(go[0]);
	close(errfd);
	{
		struct json_object *c = json_object_new_object(), *ns = json_object_new_array();
		const char *names[] = { "mnt", "pid", "uts", "ipc", "net" };
		for (size_t i = 0; i < nitems(names); i++)
			json_object_array_add(ns, json_object_new_string(names[i]));
		json_object_object_add(c, "runtime", json_object_new_string("podman"));
		json_object_object_add(c, "oci_runtime", json_object_new_string("runc"));
		json_object_object_add(c, "image", json_object_new_string(r->tr_image));
		json_object_object_add(c, "container", json_object_new_string(name));
		json_object_object_add(c, "namespaces", ns);
		json_object_object_add(c, "capabilities", json_object_new_string("all dropped"));
		json_object_object_add(c, "seccomp", json_object_new_string("podman default profile"));
		json_object_object_add(c, "landlock", json_object_new_string("not applied (podman)"));
		json_object_object_add(c, "read_only_root", json_object_new_boolean(1));
		json_object_object_add(c, "no_new_privs", json_object_new_boolean(1));
		json_object_object_add(c, "private_tmp", json_object_new_boolean(1));
		json_object_object_add(c, "tmux", json_object_new_boolean(has_tmux));
		if (!has_tmux)
			json_object_object_add(c, "tmux_reason", json_object_new_string(
			    "the image has no /usr/bin/tmux: the agent is the container's main process; "
			    "attach, send, exec and git merges need tmux"));
		json_object_object_add(c, "uid", json_object_new_int64(r->tr_uid));
		json_object_object_add(r->tr_rec, "confinement", c);
	}
	if (launch_create_operation(t, r, pid, " (podman)", cause) != 0)
		goto fail;
	/* The cgroup the container goes in, recorded (and for the v1 cleanup). */
	{
		char path[64], *buf = NULL;
		size_t len;
		snprintf(path, sizeof(path), "/proc/%d/cgroup", (int)pid);
		if (util_read_path(path, 65536, &buf, &len) == 0) {
			char *l = strstr(buf, "0::");
			if (l != NULL && (l == buf || l[-1] == '\n')) {
				l[strcspn(l, "\n")] = '\0';
				json_object_object_add(r->tr_rec, "cgroup", json_object_new_string(l + 3));
			}
			free(buf);
		}
	}
	if (launch_release(go[1], r, "the holder", cause) != 0)
		goto fail_op;
	close(go[1]);
	go[1] = -1;
	/*
	 * Running means the session is there: wait (bounded) for the tmux
	 * socket, or, with no tmux, for the container to be up a moment.
	 */
	{
		int64_t deadline = util_monotonic_ms() + PODMAN_START_TIMEOUT_MS;
		int64_t t0 = util_monotonic_ms();
		char rel[160];
		snprintf(rel, sizeof(rel), "tclone/%s/tmux.sock", r->tr_id);
		for (;;) {
			int st;
			pid_t w = waitpid(pid, &st, WNOHANG);
			if (w == pid) {
				char *eb = NULL;
				size_t el = 0;
				int efd = safefs_openat(t->td_runtime_fd, rel_err, O_RDONLY | O_NOFOLLOW |
				    O_NONBLOCK | O_CLOEXEC, 0);
				if (efd >= 0) {
					util_read_fd(efd, 4096, &eb, &el);
					close(efd);
				}
				if (eb != NULL && strstr(eb, "image not known") != NULL)
					r->tr_errcode = TE_PODMAN_IMAGE;
				util_cause(cause, "podman run ended at once (%s %d): %s",
				    WIFEXITED(st) ? "exit" : "signal",
				    WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st),
				    eb != NULL ? first_line(eb) : "");
				free(eb);
				r->tr_pid = 0;
				launch_end(t, r, 1);
				podman_remove(t, r);
				return -1;
			}
			struct stat sst;
			if (has_tmux && fstatat(t->td_runtime_fd, rel, &sst, AT_SYMLINK_NOFOLLOW) == 0 &&
			    S_ISSOCK(sst.st_mode) && start_session(r, sock) == 0)
				break;
			if (!has_tmux && util_monotonic_ms() - t0 > 1000)
				break;
			if (util_monotonic_ms() > deadline) {
				util_cause(cause, "the container's tmux session did not start in %d s",
				    PODMAN_START_TIMEOUT_MS / 1000);
				goto fail_op;
			}
			usleep(10000);
		}
	}
	util_strlcpy(r->tr_state, "running", sizeof(r->tr_state));
	return 0;
fail_op:
	launch_end(t, r, 1);
fail:
	if (go[1] >= 0)
		close(go[1]);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	r->tr_pid = 0;
	podman_remove(t, r);
	return -1;
}
