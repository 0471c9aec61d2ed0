/*
 * gitmerge.h: `merge --git` without running anything a run controls.
 */
#ifndef GENSEE_TCLONED_GITMERGE_H
#define GENSEE_TCLONED_GITMERGE_H

#include <stddef.h>
#include <stdint.h>

#include "snapshot.h"

struct json_object;

struct gitmerge {
	char gm_name[64];		/* gitwork/NAME beneath the tclone dir */
	int gm_work;			/* that directory */
	int gm_s0;			/* the source's changed files before the patch */
	int gm_s;			/* and after it */
	char **gm_paths;		/* the files the patch changes, sorted */
	size_t gm_npaths;
	size_t gm_patch_bytes;
	struct json_object *gm_left_out;	/* [{path, change, reason}], at most GITMERGE_LEFT_OUT_MAX */
	int64_t gm_left_out_total;
	struct json_object *gm_conflicts;	/* [{path, reason, hunks}]; NULL: the patch applies */
};

#define GITMERGE_LEFT_OUT_MAX 1000

/*
 * Prepare merging the fork's tracked changes (base -> fork) into the
 * source: the patch is made and applied (checked only, for dry) to copies
 * of the source's files in gm_s, as user, by git that sees no run's
 * repository. tcfd is ROOT/tclone, name a fresh work directory name.
 * Returns 0 (gm_conflicts set if the patch does not apply), or -1 with
 * *code (a stable error code) and *cause.
 */
int gitmerge_prepare(int tcfd, const char *name, int basefd, int forkfd, int srcfd,
    const struct snapshot_creds *user, int dry, struct gitmerge *gm, const char **code,
    char **cause);
/* Close, free, and remove the work directory. */
void gitmerge_free(int tcfd, struct gitmerge *gm);
/* Remove every work directory left by a crash (at start). */
void gitmerge_gc(int tcfd);

#endif
