/*
 * mediator.c: boundaryd's side of the HTTP mediator channel (mediator.sock).
 *
 * Trust model: gensee-httpmediatord parses HTTP from untrusted clients and
 * talks to untrusted servers, so it is treated as compromisable. It holds
 * no authority: it asks here for every request, and everything it sends
 * is a claim to check. Only the --mediator-user uid reaches these handlers
 * (SO_PEERCRED at accept, and the method table). The operation, its proxy
 * section, the client address, the grants and the restricted ranges all
 * come from boundaryd's own state, never from the request. A decision can
 * only narrow: any doubt (an unknown operation, an unparsable address, an
 * address outside the grants or inside a restricted range) denies the
 * whole request. Every decision is evidence in http-mediator.jsonl, with
 * the path cut before any query string and no header value at all.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "boundaryd.h"
#include "httphead.h"
#include "httpurl.h"
#include "ids.h"
#include "log.h"
#include "medreq.h"
#include "netpolicy.h"
#include "util.h"

#define MEDIATOR_MAX_ADDRESSES 32

/* Stable decision reasons (docs/protocol.md). */
#define MDR_ALLOW "within_envelope"
#define MDR_NOT_RUNNING "operation_not_running"
#define MDR_NO_PROXY "proxy_not_configured"
#define MDR_CLIENT "client_address_mismatch"
#define MDR_METHOD "method_not_allowed"
#define MDR_SCHEME "scheme_not_supported"
#define MDR_NO_ADDRESS "no_addresses"
#define MDR_RESTRICTED NPR_RESTRICTED
#define MDR_NOT_GRANTED "not_granted"
#define MDR_BAD_URL "bad_url"
#define MDR_URL_MISMATCH "url_mismatch"
#define MDR_REDIRECT_LIMIT "redirect_limit"
#define MDR_PROXY_LOOP "proxy_loop"
/* proxy.max_redirects when the config leaves it out (seed 001) */
#define MEDIATOR_DEFAULT_MAX_REDIRECTS 3

/* Every operation with a proxy section, running now: what the mediator serves. */
void
mediator_config(struct boundaryd *bd, struct op_reply *r)
{
	struct json_object *ops = json_object_new_array();
	struct operation *op;

	TAILQ_FOREACH(op, &bd->bd_ops, op_entry) {
		if (op->op_phase != OP_RUNNING || op->op_net == NULL || op->op_net->no_table_gone ||
		    (op->op_net->no_spec.ns_proxy == NULL && op->op_net->no_spec.ns_dns == NULL))
			continue;
		struct json_object *o = json_object_new_object();
		json_object_object_add(o, "operation_id", json_object_new_string(op->op_id));
		json_object_object_add(o, "proxy", json_object_get(op->op_net->no_spec.ns_proxy));
		json_object_object_add(o, "dns", json_object_get(op->op_net->no_spec.ns_dns));
		const char *cl = op->op_net->no_spec.ns_dns != NULL ?
		    schema_string(op->op_net->no_spec.ns_dns, "connect_listen") : NULL;
		if (cl != NULL) {
			char tok[65];
			struct json_object *c = json_object_new_object();
			netop_connect_token(bd, op->op_id, tok);
			json_object_object_add(c, "listen", json_object_new_string(cl));
			json_object_object_add(c, "token", json_object_new_string(tok));
			json_object_object_add(o, "connect", c);
		}
		json_object_array_add(ops, o);
	}
	r->or_result = json_object_new_object();
	json_object_object_add(r->or_result, "operations", ops);
}

/*
 * A host as the mediator resolved it: a DNS name or an address literal,
 * lower case. Anything that could smuggle a second authority, userinfo or a
 * path (@ / ? # \ whitespace, %) is refused before it reaches evidence.
 */
static int
mediator_valid_host(const char *h)
{
	size_t n = strlen(h);

	if (n == 0 || n > 253)
		return 0;
	for (const char *p = h; *p != '\0'; p++) {
		unsigned char c = (unsigned char)*p;
		if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '-' ||
		    c == ':' || c == '_'))
			return 0;
	}
	return 1;
}

/* The path as evidence: up to the first '?' or '#', so no query value is kept. */
static struct json_object *
mediator_path_json(const char *path)
{
	size_t n = strcspn(path, "?#");
	return json_object_new_string_len(path, (int)n);
}

/* What a transactional decision adds (transaction.c). */
struct mediator_txn {
	int mt_mode;		/* the operation has proxy.transaction */
	const char *mt_id;	/* the current transaction, if any */
	uint64_t mt_reservation;
	int64_t mt_limit;
	const char *mt_url_error;
	char mt_token_id[40];	/* a redeemed commit token's id */
};

/*
 * The canonical URL the mediator sends, parsed here again: boundaryd does
 * not trust the mediator's parse. Threat: a compromised mediator sending
 * host "up.test" and a path while it means another URL, or a URL only a
 * lax parser would accept. The URL must be httpurl-canonical (it parses
 * to itself) and agree with scheme, host, port and path exactly; the
 * evidence is built from this parse.
 */
static const char *
mediator_check_url(struct json_object *params, struct httpurl *u)
{
	const char *url = schema_string(params, "url");
	const char *host = schema_string(params, "host");
	const char *path = schema_string(params, "path");
	char hp[HTTPURL_MAX_PATH + HTTPURL_MAX_QUERY + 2];
	size_t hl;

	if (url == NULL || httpurl_parse(url, strlen(url), u) != HTTPURL_OK ||
	    strcmp(u->hu_url, url) != 0)
		return MDR_BAD_URL;
	/* hu_host keeps an IPv6 literal's brackets; the mediator's host does not */
	hl = strlen(u->hu_host);
	if (u->hu_kind == HTTPURL_HOST_IPV6 ?
	    (strlen(host) != hl - 2 || strncmp(host, u->hu_host + 1, hl - 2) != 0) :
	    strcmp(host, u->hu_host) != 0)
		return MDR_URL_MISMATCH;
	snprintf(hp, sizeof(hp), "%s%s%s", u->hu_path, u->hu_has_query ? "?" : "", u->hu_query);
	if (strcmp(schema_string(params, "scheme"), u->hu_scheme) != 0 ||
	    schema_int(params, "port", 0) != u->hu_port || strcmp(path, hp) != 0)
		return MDR_URL_MISMATCH;
	return NULL;
}

/* An address as evidence text. */
static void
mediator_addr_str(const struct httpurl_addr *a, char *out, size_t len)
{
	if (inet_ntop(a->ha_family, a->ha_addr, out, (socklen_t)len) == NULL)
		util_strlcpy(out, "?", len);
}

static void
mediator_decide(struct boundaryd *bd, struct json_object *params, struct httpurl *u,
    int *url_ok, const char **reason, const char **bad_addr, char *badbuf, size_t badlen,
    char *pinned, size_t pinnedlen, struct operation **opp, struct mediator_txn *mt)
{
	const char *stage = schema_string(params, "stage");
	int resolve = stage != NULL && strcmp(stage, "resolve") == 0;

	const char *id = schema_string(params, "operation_id");
	const char *method = schema_string(params, "method");
	struct json_object *addrs = schema_child(params, "addresses");
	uint16_t port = (uint16_t)schema_int(params, "port", 0);
	struct operation *op = operation_find(bd, id);
	struct json_object *proxy;
	uint8_t ca[16], pa[16];
	int cf, pf;

	*opp = NULL;
	pinned[0] = '\0';
	if (op == NULL || op->op_phase != OP_RUNNING || op->op_net == NULL ||
	    op->op_net->no_table_gone) {
		*reason = MDR_NOT_RUNNING;
		return;
	}
	*opp = op;
	proxy = op->op_net->no_spec.ns_proxy;
	if (proxy == NULL) {
		*reason = MDR_NO_PROXY;
		return;
	}
	/*
	 * With proxy.transaction the mediator is inactive until a transaction
	 * is active (checked last, once everything else allows: the check
	 * takes the transaction's one reservation).
	 */
	mt->mt_mode = schema_child(proxy, "transaction") != NULL;
	/* The client identity is the configured address, exactly (not a claim to trust). */
	if (netpolicy_parse_addr(schema_string(proxy, "client_address"), &cf, ca) != 0 ||
	    netpolicy_parse_addr(schema_string(params, "client_address"), &pf, pa) != 0 ||
	    cf != pf || memcmp(ca, pa, 16) != 0) {
		*reason = MDR_CLIENT;
		return;
	}
	/*
	 * Other methods: the policy's opt-in, an active mediator lease and a
	 * commit token (medtoken.c); the token is redeemed last, below.
	 */
	int effectful = strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0;
	if (effectful) {
		const char *why = medtoken_check(bd, op->op_net, params, 0, mt->mt_token_id,
		    sizeof(mt->mt_token_id));
		if (why != NULL) {
			*reason = why;
			return;
		}
	}
	if (strcmp(schema_string(params, "scheme"), "http") != 0 &&
	    strcmp(schema_string(params, "scheme"), "https") != 0) {
		*reason = MDR_SCHEME;
		return;
	}
	if ((*reason = mediator_check_url(params, u)) != NULL)
		return;
	*url_ok = 1;
	/*
	 * Redirect depth, bounded here as well as in the mediator (proxy.
	 * max_redirects). A compromised mediator can still call a hop 0; that
	 * gains it nothing a client request could not ask for.
	 */
	int64_t hop = schema_int(params, "redirect_hop", 0);
	if (hop < 0 || hop > schema_int(proxy, "max_redirects", MEDIATOR_DEFAULT_MAX_REDIRECTS)) {
		*reason = MDR_REDIRECT_LIMIT;
		return;
	}
	/*
	 * An IP-literal host is judged by what it stands for and every IPv4
	 * address it embeds (mapped, compatible, SIIT, NAT64, 6to4, Teredo):
	 * "http://[64:ff9b::a9fe:a9fe]/" is the metadata service through a
	 * translator, whatever the grants say about the IPv6 address.
	 */
	if (u->hu_naddrs > 0) {
		const char *why = NULL;
		if (httpurl_restricted(u, &op->op_net->no_spec.ns_policy, &why)) {
			/* which one: the first restricted address, for the evidence */
			for (size_t i = 0; i < u->hu_naddrs; i++) {
				uint8_t full[16] = { 0 };
				memcpy(full, u->hu_addrs[i].ha_addr,
				    u->hu_addrs[i].ha_family == AF_INET ? 4 : 16);
				if (netpolicy_restricted(&op->op_net->no_spec.ns_policy,
				    u->hu_addrs[i].ha_family, full, &why)) {
					mediator_addr_str(&u->hu_addrs[i], badbuf, badlen);
					break;
				}
			}
			*reason = MDR_RESTRICTED;
			*bad_addr = badbuf;
			return;
		}
		/*
		 * A literal resolves to itself only: the addresses must be exactly
		 * it (checked once there are addresses: not at the resolve stage).
		 */
		if (!resolve) {
			int lf;
			uint8_t ab[16];
			if (json_object_array_length(addrs) != 1 ||
			    netpolicy_parse_addr(json_object_get_string(
			    json_object_array_get_idx(addrs, 0)), &lf, ab) != 0 || lf != u->hu_addrs[0].ha_family ||
			    memcmp(ab, u->hu_addrs[0].ha_addr, lf == AF_INET ? 4 : 16) != 0) {
				*reason = MDR_URL_MISMATCH;
				return;
			}
		}
	}
	/* Before resolution: only whether the name may be looked up at all. */
	if (resolve) {
		*reason = MDR_ALLOW;
		if (mt->mt_mode) {
			const char *code = txn_authorize(op->op_net, params, &mt->mt_id,
			    &mt->mt_reservation, &mt->mt_limit, &mt->mt_url_error);
			if (code != NULL)
				*reason = code;
		}
		return;
	}
	if (json_object_array_length(addrs) == 0) {
		*reason = MDR_NO_ADDRESS;
		return;
	}
	/*
	 * A DNS answer with any restricted address is denied whole: otherwise
	 * a rebinding answer (public + metadata) would be half allowed and the
	 * mediator could be steered to the other half.
	 */
	for (size_t i = 0; i < json_object_array_length(addrs); i++) {
		const char *a = json_object_get_string(json_object_array_get_idx(addrs, i));
		const char *why = NULL;
		int f;
		uint8_t b[16];
		if (netpolicy_parse_addr(a, &f, b) != 0 ||
		    netpolicy_restricted(&op->op_net->no_spec.ns_policy, f, b, &why)) {
			*reason = MDR_RESTRICTED;
			*bad_addr = a;
			return;
		}
	}
	/*
	 * Threat: the mediator sent to its own listener (the envelope grants
	 * the client that address and port), a request loop that would come
	 * back as a request from the mediator itself. Only the exact listen
	 * address is known here; a wildcard listen cannot be matched.
	 */
	int lf;
	uint8_t la[16] = { 0 };
	uint16_t lport;
	if (netpolicy_parse_listen(schema_string(proxy, "listen"), &lf, la, &lport) == 0 &&
	    lport == port) {
		for (size_t i = 0; i < json_object_array_length(addrs); i++) {
			const char *a = json_object_get_string(json_object_array_get_idx(addrs, i));
			int f;
			uint8_t b[16];
			if (netpolicy_parse_addr(a, &f, b) == 0 && f == lf &&
			    memcmp(b, la, lf == AF_INET ? 4 : 16) == 0) {
				*reason = MDR_PROXY_LOOP;
				*bad_addr = a;
				return;
			}
		}
	}
	/*
	 * Without a transaction the upstream must be inside the envelope. In
	 * transaction mode the root-owned scope is the upstream's authority
	 * (seed 001: the envelope grants the mediated client the mediator
	 * only), so an envelope grant is not needed, and none should exist:
	 * it would let the client reach the upstream directly as well.
	 */
	for (size_t i = 0; !mt->mt_mode && i < json_object_array_length(addrs); i++) {
		const char *a = json_object_get_string(json_object_array_get_idx(addrs, i));
		const char *why = NULL;
		int f;
		uint8_t b[16];
		if (netpolicy_parse_addr(a, &f, b) != 0 ||
		    !netop_tuple_allowed(op->op_net, f, b, IPPROTO_TCP, port, &why)) {
			*reason = MDR_NOT_GRANTED;
			*bad_addr = a;
			return;
		}
	}
	/* One use: redeemed only once everything else allows. */
	if (effectful) {
		const char *why = medtoken_check(bd, op->op_net, params, 1, mt->mt_token_id,
		    sizeof(mt->mt_token_id));
		if (why != NULL) {
			*reason = why;
			return;
		}
	}
	/*
	 * The transaction last: scope, state, TTL and budgets, and the one
	 * reservation, persisted before this reply lets the mediator connect.
	 */
	if (mt->mt_mode) {
		const char *code = txn_authorize(op->op_net, params, &mt->mt_id,
		    &mt->mt_reservation, &mt->mt_limit, &mt->mt_url_error);
		if (code != NULL) {
			*reason = code;
			return;
		}
	}
	/* The mediator connects to this address and no other (pinned). */
	util_strlcpy(pinned, json_object_get_string(json_object_array_get_idx(addrs, 0)),
	    pinnedlen);
	*reason = MDR_ALLOW;
}

void
mediator_authorize(struct boundaryd *bd, const struct peer *p, struct json_object *params,
    struct op_reply *r)
{
	const char *id = schema_string(params, "operation_id");
	const char *reason = NULL, *bad = NULL;
	struct operation *op = NULL;
	char pinned[64], badbuf[64], did[ID_MAX_LEN], red[1024];
	struct httpurl *u;
	int url_ok = 0;
	struct mediator_txn mt;
	const char *stage = schema_string(params, "stage");

	(void)p;
	if (!ids_valid_operation(id)) {
		reply_error(r, PE_INVALID_PARAMS, "operation_id: malformed id");
		return;
	}
	if (!mediator_valid_host(schema_string(params, "host"))) {
		reply_error(r, PE_INVALID_PARAMS, "host: not a lower-case name or address");
		return;
	}
	if (schema_string(params, "path")[0] != '/') {
		reply_error(r, PE_INVALID_PARAMS, "path: must start with /");
		return;
	}
	if (stage != NULL && strcmp(stage, "resolve") != 0 && strcmp(stage, "connect") != 0) {
		reply_error(r, PE_INVALID_PARAMS, "stage: resolve or connect");
		return;
	}
	/* about 17 KiB: not on the stack of the event loop */
	if ((u = calloc(1, sizeof(*u))) == NULL) {
		reply_error(r, PE_INTERNAL, "out of memory");
		return;
	}
	memset(&mt, 0, sizeof(mt));
	mediator_decide(bd, params, u, &url_ok, &reason, &bad, badbuf, sizeof(badbuf), pinned,
	    sizeof(pinned), &op, &mt);
	int allow = strcmp(reason, MDR_ALLOW) == 0;
	/*
	 * A credential for the connect (never for the resolve stage): only
	 * under an active mediator lease and an exact configured URL prefix.
	 * The value goes to the mediator in this reply and nowhere else.
	 */
	const char *cred_handle = NULL, *cred_header = NULL;
	char cred_value[4096];
	cred_value[0] = '\0';
	if (allow && pinned[0] != '\0') {
		const char *why = medlease_credential(op->op_net, params, &cred_handle,
		    &cred_header, cred_value, sizeof(cred_value));
		if (why != NULL) {
			reason = why;
			allow = 0;
			/* a transaction's reservation was taken: it is not used */
			if (mt.mt_reservation != 0)
				txn_release_unused(op->op_net, mt.mt_reservation);
			mt.mt_reservation = 0;
		}
	}
	ids_new("med_", did, sizeof(did));

	r->or_result = json_object_new_object();
	json_object_object_add(r->or_result, "decision_id", json_object_new_string(did));
	json_object_object_add(r->or_result, "decision",
	    json_object_new_string(allow ? "allow" : "deny"));
	json_object_object_add(r->or_result, "reason", json_object_new_string(reason));
	json_object_object_add(r->or_result, "address",
	    allow ? json_object_new_string(pinned) : NULL);
	json_object_object_add(r->or_result, "denied_address", bad ? json_object_new_string(bad) :
	    NULL);
	if (allow && cred_header != NULL) {
		json_object_object_add(r->or_result, "credential_handle_id",
		    json_object_new_string(cred_handle));
		json_object_object_add(r->or_result, "inject_header",
		    json_object_new_string(cred_header));
		json_object_object_add(r->or_result, "inject_value",
		    json_object_new_string(cred_value));
	}
	explicit_bzero(cred_value, sizeof(cred_value));
	if (mt.mt_mode) {
		/* The mediator reports the response of a reservation with mediator.complete. */
		json_object_object_add(r->or_result, "transaction_id", mt.mt_id ?
		    json_object_new_string(mt.mt_id) : NULL);
		json_object_object_add(r->or_result, "reservation", allow && mt.mt_reservation ?
		    json_object_new_int64((int64_t)mt.mt_reservation) : NULL);
		json_object_object_add(r->or_result, "response_limit", allow && mt.mt_reservation ?
		    json_object_new_int64(mt.mt_limit) : NULL);
	}

	if (op == NULL || op->op_net == NULL) {
		/* No operation directory to write to: the log keeps the refusal. */
		log_info("mediator: %s refused for %s", reason, id);
		free(u);
		return;
	}
	struct json_object *o = json_object_new_object();
	json_object_object_add(o, "type", json_object_new_string("http_mediator_decision"));
	json_object_object_add(o, "decision_id", json_object_new_string(did));
	json_object_object_add(o, "decision", json_object_new_string(allow ? "allow" : "deny"));
	json_object_object_add(o, "reason", json_object_new_string(reason));
	json_object_object_add(o, "client_address",
	    json_object_new_string(schema_string(params, "client_address")));
	json_object_object_add(o, "method", json_object_new_string(schema_string(params, "method")));
	json_object_object_add(o, "scheme", json_object_new_string(schema_string(params, "scheme")));
	json_object_object_add(o, "host", json_object_new_string(schema_string(params, "host")));
	json_object_object_add(o, "port", json_object_new_int((int)schema_int(params, "port", 0)));
	/* From boundaryd's own parse when it held; the query value never (redacted). */
	if (url_ok) {
		json_object_object_add(o, "path", json_object_new_string(u->hu_path));
		medreq_redacted_url(u->hu_url, red, sizeof(red));
		json_object_object_add(o, "url", json_object_new_string(red));
	} else {
		json_object_object_add(o, "path", mediator_path_json(schema_string(params, "path")));
		json_object_object_add(o, "url", NULL);
	}
	json_object_object_add(o, "redirect_hop",
	    json_object_new_int64(schema_int(params, "redirect_hop", 0)));
	json_object_object_add(o, "addresses",
	    json_object_get(schema_child(params, "addresses")));
	json_object_object_add(o, "pinned_address", allow ? json_object_new_string(pinned) : NULL);
	json_object_object_add(o, "denied_address", bad ? json_object_new_string(bad) : NULL);
	json_object_object_add(o, "generation",
	    json_object_new_int64((int64_t)op->op_net->no_generation));
	json_object_object_add(o, "commit_token_id", mt.mt_token_id[0] ?
	    json_object_new_string(mt.mt_token_id) : NULL);
	/* The handle id, never the value. */
	json_object_object_add(o, "credential_handle_id", allow && cred_header ?
	    json_object_new_string(cred_handle) : NULL);
	if (mt.mt_mode) {
		json_object_object_add(o, "transaction_id", mt.mt_id ?
		    json_object_new_string(mt.mt_id) : NULL);
		json_object_object_add(o, "stage", json_object_new_string(stage ? stage : "connect"));
		txn_decision_evidence(op->op_net, params, did, mt.mt_id, allow ? NULL : reason,
		    mt.mt_reservation, mt.mt_url_error);
	}
	netop_append(op->op_net, "http-mediator.jsonl", o);
	/* A mediated request is an effect (seed 000): a transaction's too, counted here once. */
	operation_count_effect(op);
	free(u);
}

/*
 * The codes of mediator.refused: the strict framing refusals of
 * lib/httphead.c, a head that took too long, a body over the limit. A
 * reason outside this list is not written (the mediator is not trusted to
 * name what evidence says).
 */
static const char *const mediator_refusal_codes[] = {
	HTTPHEAD_E_BARE_LF, HTTPHEAD_E_BARE_CR, HTTPHEAD_E_OBS_FOLD, HTTPHEAD_E_REQUEST_LINE,
	HTTPHEAD_E_HEADER, HTTPHEAD_E_DUP_CL, HTTPHEAD_E_BAD_CL, HTTPHEAD_E_CL_TE,
	HTTPHEAD_E_TE_NO_BODY, HTTPHEAD_E_BAD_TE, HTTPHEAD_E_TOO_LARGE, HTTPHEAD_E_BAD_CHUNK,
	"http_head_timeout", "request_too_large",
};

/*
 * mediator.refused: the mediator refused a request itself, before any
 * decision was asked for and before anything went upstream (a smuggling
 * form, a head too large or too slow). Recorded as a deny, so evidence
 * never shows such a request as allowed or not at all. Only narrows: it
 * grants nothing, and the line is built from checked fields.
 */
void
mediator_refused(struct boundaryd *bd, struct json_object *params, struct op_reply *r)
{
	const char *id = schema_string(params, "operation_id");
	const char *reason = schema_string(params, "reason");
	const char *client = schema_string(params, "client_address");
	const char *method = schema_string(params, "method");
	struct operation *op;
	struct json_object *o;
	char did[ID_MAX_LEN];
	uint8_t a[16];
	size_t i;
	int fam;

	if (!ids_valid_operation(id)) {
		reply_error(r, PE_INVALID_PARAMS, "operation_id: malformed id");
		return;
	}
	for (i = 0; i < nitems(mediator_refusal_codes); i++)
		if (strcmp(reason, mediator_refusal_codes[i]) == 0)
			break;
	if (i == nitems(mediator_refusal_codes)) {
		reply_error(r, PE_INVALID_PARAMS, "reason: not a mediator refusal code");
		return;
	}
	if (netpolicy_parse_addr(client, &fam, a) != 0) {
		reply_error(r, PE_INVALID_PARAMS, "client_address: not an address");
		return;
	}
	if (method != NULL) {
		for (const char *c = method; *c != '\0'; c++)
			if (*c < 'A' || *c > 'Z') {
				method = NULL;	/* not a method worth recording */
				break;
			}
	}
	if ((op = operation_find(bd, id)) == NULL || op->op_net == NULL) {
		reply_error(r, PE_NOT_FOUND, "no such network operation");
		return;
	}
	ids_new("med_", did, sizeof(did));
	o = json_object_new_object();
	json_object_object_add(o, "type", json_object_new_string("http_mediator_decision"));
	json_object_object_add(o, "decision_id", json_object_new_string(did));
	json_object_object_add(o, "decision", json_object_new_string("deny"));
	json_object_object_add(o, "reason", json_object_new_string(reason));
	json_object_object_add(o, "stage", json_object_new_string("request_head"));
	json_object_object_add(o, "status",
	    json_object_new_int((int)schema_int(params, "status", 400)));
	json_object_object_add(o, "client_address", json_object_new_string(client));
	json_object_object_add(o, "method", method ? json_object_new_string(method) : NULL);
	json_object_object_add(o, "url", NULL);
	json_object_object_add(o, "generation",
	    json_object_new_int64((int64_t)op->op_net->no_generation));
	netop_append(op->op_net, "http-mediator.jsonl", o);
	r->or_result = json_object_new_object();
	json_object_object_add(r->or_result, "decision_id", json_object_new_string(did));
}

/*
 * An operation the mediator serves (a proxy or a DNS section) was made:
 * say so on its channels, so that it asks for the config now instead of at
 * its next refresh (up to 500 ms, which a launcher waiting for the DNS
 * proxy would wait). The event carries nothing: the mediator still gets
 * the config only from mediator.config.
 */
void
mediator_config_changed(struct boundaryd *bd, const struct netop *no)
{
	if (no == NULL || (no->no_spec.ns_dns == NULL && no->no_spec.ns_proxy == NULL))
		return;
	control_mediator_notify(bd, "config.changed", json_object_new_object());
}
