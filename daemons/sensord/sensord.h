/*
 * sensord.h: gensee-sensord's state, shared by sensord.c and fan.c.
 */
#ifndef GENSEE_SENSORD_H
#define GENSEE_SENSORD_H

#include <stdint.h>
#include <sys/types.h>

#include "ids.h"
#include "nftrace.h"

struct event_base;
struct bufferevent;
struct json_object;
struct proccn;
struct nftrace;
struct fanpolicy;

#define SENSORD_NAME "gensee-sensord"
#define SENSORD_MAX_OPS 256
#define SENSORD_PID_SLOTS 8192
#define SENSORD_FLUSH_MS 50
/* Reconnecting to boundaryd: from the first delay, doubled up to the last. */
#define SENSORD_RECONNECT_MIN_MS 100
#define SENSORD_RECONNECT_MAX_MS 5000
/* Until boundaryd names its interval; a channel silent for MISSES intervals is dead. */
#define SENSORD_HEARTBEAT_MS 10000
#define SENSORD_HEARTBEAT_MISSES 3
/* Lineage entries or decisions held per operation while boundaryd is away. */
#define SENSORD_BACKLOG_MAX 4096
/* Decisions per file.decision frame: 64 of the largest fit well under FRAME_MAX_DEFAULT. */
#define SENSORD_DECISIONS_PER_FRAME 64

/* One supervised operation, as boundaryd described it. */
struct sop {
	char so_id[OP_ID_MAX];
	char so_cgroup[256];		/* below the v2 root: gensee/op_... */
	char so_table[64];		/* its nftables table, "" without one */
	struct fanpolicy *so_fan;	/* its sensitive-path rules, or NULL */
	struct json_object *so_fan_json; /* the config they came from (to re-plan marks) */
	int so_posture;			/* enum fan_posture */
	int so_fan_broken;		/* rules could not be parsed: deny what is marked */
	struct json_object *so_lineage;	/* lineage events not yet reported */
	struct json_object *so_files;	/* file decisions not yet reported */
	int64_t so_files_dropped;	/* ... answered but not kept, not yet reported */
};

/* pid -> operation, for exit events of processes that are gone already. */
struct spid {
	pid_t sp_pid;
	uint64_t sp_start;
	char sp_op[OP_ID_MAX];
};

struct srecent {
	int64_t sr_ms;
	char sr_op[OP_ID_MAX];
	char sr_dst[48];
	uint8_t sr_proto;
	uint16_t sr_port;
};

struct stuple {
	uint32_t st_id;
	struct nftrace_event st_ev;
};

struct spending {
	struct nftrace_event sn_ev;
	int64_t sn_ms;
};

struct sensord {
	struct event_base *sd_base;
	struct bufferevent *sd_bev;
	int64_t sd_next_id;
	int64_t sd_register_id;
	int sd_registered;
	const char *sd_names[4];	/* the sensors that opened, for sensor.register */
	size_t sd_nnames;
	const char *sd_runtime_dir;
	int sd_reconnect_ms;		/* the next reconnect delay */
	struct event *sd_reconnect_ev;
	struct event *sd_heartbeat_ev;
	int sd_heartbeat_ms;
	int64_t sd_seen_ms;		/* monotonic: boundaryd's last frame */
	struct proccn *sd_proccn;
	struct nftrace *sd_nftrace;
	struct sop sd_ops[SENSORD_MAX_OPS];
	size_t sd_nops;
	struct spid sd_pids[SENSORD_PID_SLOTS];
	struct srecent sd_recent[64];
	size_t sd_recent_next;
	struct stuple sd_tuples[128];
	size_t sd_tuples_next;
	struct spending sd_pending[64];
	size_t sd_npending;
};

/* sensord.c */
struct event_base *sensord_base(void);
size_t sensord_nops(void);
struct sop *sensord_op_at(size_t i);
void sensord_loss(const char *sensor, int64_t count, const char *why);
void sensord_fan_loss(const char *why);
struct sop *sensord_op_find(const char *id);
struct sop *sensord_op_of_pid(pid_t pid);
struct sop *sensord_op_of_recent_pid(pid_t pid);
int sensord_pid_in_gensee(pid_t pid);
void sensord_flush_op(struct sop *o);
void sensord_nft_replay(void);
void sensord_nft_expire(void);

/* fan.c: the fanotify sensor */
int sensord_fan_init(char **cause);
int sensord_fan_available(void);
void sensord_fan_shutdown(void);
int sensord_fan_policy(struct json_object *fan, struct fanpolicy *out, int *posture,
    char **cause);
int sensord_fan_reconfigure(char **cause);
int sensord_fan_exchange(int dirfd, char **cause);
void sensord_fan_registered(void);

/* audit.c: the Landlock sensor */
int sensord_audit_init(int enable, char **cause);
int sensord_audit_open(void);
int sensord_audit_watch(char **cause);
void sensord_audit_drain(void);
void sensord_audit_expire(int all);
void sensord_audit_check(void);
void sensord_audit_shutdown(void);

#endif
