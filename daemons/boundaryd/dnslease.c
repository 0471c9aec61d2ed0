/*
 * dnslease.c: DNS answers from the mediator's DNS proxy become leases.
 *
 * Trust model: the mediator resolved the name and parsed the reply, so
 * everything in mediator.dns is a claim from a process that may be
 * compromised. A claim can only narrow what the operation may reach:
 * the operation, its dns section, the client address, the allowed names,
 * the deny list and the restricted ranges all come from boundaryd's own
 * state. What a lying mediator can do is lease, for the ports the policy
 * gives an allowed name, an address that is not restricted and not
 * deny-listed, for at most dns.max_ttl_seconds: the same authority a
 * lying DNS server has. It can never lease for a name outside dns.allow,
 * for another port, or a private, loopback or metadata address.
 *
 * Decisions, in order (docs/network.md "DNS"):
 *   operation_not_running, dns_not_configured, client_address_mismatch,
 *   bad_answer (a malformed name, qname is not names[0]),
 *   name_not_allowed (names[0]), cname_not_allowed (any later name of the
 *   chain: each is checked on its own), qtype_not_supported (only A and
 *   AAAA), bad_answer (an address not of the qtype's family),
 *   restricted_destination (any address: the answer is denied whole, so
 *   a rebinding answer is never half used), deny_list, lease_failed; else
 *   allowed (with leases), or, for an allowed name without addresses,
 *   upstream_rcode (NXDOMAIN, SERVFAIL ...) or no_addresses: allowed, no
 *   lease.
 * The reply comes only after the kernel acknowledged every lease, so the
 * agent's first connect after the answer is already allowed.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <json-c/json.h>

#include "boundaryd.h"
#include "connreq.h"
#include "dnspolicy.h"
#include "ids.h"
#include "log.h"
#include "netpolicy.h"
#include "util.h"

#define DLR_ALLOW "allowed"
#define DLR_UPSTREAM "upstream_rcode"
#define DLR_NO_ADDRESS "no_addresses"
#define DLR_QTYPE "qtype_not_supported"
#define DLR_NOT_RUNNING "operation_not_running"
#define DLR_NO_DNS "dns_not_configured"
#define DLR_CLIENT "client_address_mismatch"
#define DLR_BAD "bad_answer"
#define DLR_NAME "name_not_allowed"
#define DLR_CNAME "cname_not_allowed"
#define DLR_RESTRICTED NPR_RESTRICTED
#define DLR_DENY_LIST NPR_DENY_LIST
#define DLR_LEASE_FAILED "lease_failed"
#define DLR_METHOD "method_not_allowed"

struct dl_state {
	struct operation *op;
	struct dnspolicy pol;
	int have_pol;
	int family;
	uint8_t addrs[DNSMSG_MAX_ADDRS][16];
	size_t naddrs;
	ssize_t entry;		/* the dns.allow entry of names[0] */
	int64_t ttl;
	const char *bad;	/* the name or address a denial names */
	struct json_object *leases;
};

static const char *
dl_decide(struct boundaryd *bd, struct json_object *params, struct dl_state *st)
{
	const char *id = schema_string(params, "operation_id");
	const char *qtype = schema_string(params, "qtype");
	struct json_object *names = schema_child(params, "names");
	struct json_object *addrs = schema_child(params, "addresses");
	struct operation *op = operation_find(bd, id);
	char *cause = NULL;
	uint8_t ca[16];
	int cf;

	if (op == NULL || op->op_phase != OP_RUNNING || op->op_net == NULL ||
	    op->op_net->no_table_gone)
		return DLR_NOT_RUNNING;
	st->op = op;
	if (op->op_net->no_spec.ns_dns == NULL)
		return DLR_NO_DNS;
	if (dnspolicy_parse(op->op_net->no_spec.ns_dns, &st->pol, &cause) != 0) {
		log_warnx("%s: dns section: %s", id, cause);
		free(cause);
		return DLR_NO_DNS;
	}
	st->have_pol = 1;
	/* The client identity is the configured address, exactly. */
	if (st->pol.dp_client_family != 0 &&
	    (netpolicy_parse_addr(schema_string(params, "client_address"), &cf, ca) != 0 ||
	    cf != st->pol.dp_client_family || memcmp(ca, st->pol.dp_client_addr, 16) != 0))
		return DLR_CLIENT;
	for (size_t i = 0; i < json_object_array_length(names); i++) {
		const char *n = json_object_get_string(json_object_array_get_idx(names, i));
		if (!dnsmsg_valid_name(n)) {
			st->bad = n;
			return DLR_BAD;
		}
	}
	if (strcmp(json_object_get_string(json_object_array_get_idx(names, 0)),
	    schema_string(params, "qname")) != 0)
		return DLR_BAD;
	/* The name asked for decides the ports; every later name must be allowed too. */
	st->entry = dnspolicy_match(&st->pol, schema_string(params, "qname"), 0);
	if (st->entry < 0) {
		st->bad = schema_string(params, "qname");
		return DLR_NAME;
	}
	for (size_t i = 1; i < json_object_array_length(names); i++) {
		const char *n = json_object_get_string(json_object_array_get_idx(names, i));
		if (dnspolicy_match(&st->pol, n, 0) < 0) {
			st->bad = n;
			return DLR_CNAME;
		}
	}
	if (strcmp(qtype, "A") == 0)
		st->family = AF_INET;
	else if (strcmp(qtype, "AAAA") == 0)
		st->family = AF_INET6;
	else
		return DLR_QTYPE;
	for (size_t i = 0; i < json_object_array_length(addrs); i++) {
		const char *a = json_object_get_string(json_object_array_get_idx(addrs, i));
		int f;
		if (netpolicy_parse_addr(a, &f, st->addrs[i]) != 0 || f != st->family) {
			st->bad = a;
			return DLR_BAD;
		}
		st->naddrs++;
	}
	/*
	 * Rebinding: an allowed name answered with a private, loopback or
	 * metadata address (or alongside a public one) is denied whole, so
	 * the agent is never handed the restricted half.
	 */
	for (size_t i = 0; i < st->naddrs; i++) {
		const char *why = NULL;
		if (netpolicy_restricted(&op->op_net->no_spec.ns_policy, st->family, st->addrs[i],
		    &why)) {
			st->bad = json_object_get_string(json_object_array_get_idx(addrs, i));
			return DLR_RESTRICTED;
		}
	}
	if (schema_int(params, "rcode", 0) != 0)
		return DLR_UPSTREAM;
	if (st->naddrs == 0)
		return DLR_NO_ADDRESS;
	const struct dnspolicy_entry *de = &st->pol.dp_v[st->entry];
	for (size_t i = 0; i < st->naddrs; i++)
		for (size_t k = 0; k < de->de_nports; k++)
			if (np_grants_find(&op->op_net->no_spec.ns_deny, st->family, st->addrs[i],
			    de->de_proto, de->de_ports[k]) >= 0) {
				st->bad = json_object_get_string(json_object_array_get_idx(addrs, i));
				return DLR_DENY_LIST;
			}
	st->ttl = dnspolicy_ttl(&st->pol, schema_int(params, "ttl", 0));
	st->leases = json_object_new_array();
	for (size_t i = 0; i < st->naddrs; i++) {
		for (size_t k = 0; k < de->de_nports; k++) {
			struct np_event ev = { .ne_family = st->family, .ne_proto = de->de_proto,
				.ne_port = de->de_ports[k] };
			char lid[ID_MAX_LEN];
			int extended = 0;
			memcpy(ev.ne_addr, st->addrs[i], 16);
			/*
			 * A failure leaves the leases already granted for this
			 * answer to their TTL (they are recorded below); the
			 * client gets SERVFAIL and no address.
			 */
			if (netop_lease_tuple(op->op_net, &ev, st->ttl, lid, sizeof(lid), &extended,
			    &cause) != 0) {
				log_warnx("%s: dns lease: %s", id, cause ? cause : "failed");
				free(cause);
				cause = NULL;
				st->bad = json_object_get_string(json_object_array_get_idx(addrs, i));
				return DLR_LEASE_FAILED;
			}
			struct json_object *l = json_object_new_object();
			json_object_object_add(l, "lease_id", json_object_new_string(lid));
			json_object_object_add(l, "destination", json_object_get(
			    json_object_array_get_idx(addrs, i)));
			json_object_object_add(l, "protocol",
			    json_object_new_string(netpolicy_proto_name(de->de_proto)));
			json_object_object_add(l, "port", json_object_new_int(de->de_ports[k]));
			json_object_object_add(l, "ttl_seconds", json_object_new_int64(st->ttl));
			json_object_object_add(l, "extended", json_object_new_boolean(extended));
			json_object_array_add(st->leases, l);
		}
	}
	return DLR_ALLOW;
}

void
dnslease_answer(struct boundaryd *bd, struct json_object *params, struct op_reply *r)
{
	const char *id = schema_string(params, "operation_id");
	struct dl_state st;
	char did[ID_MAX_LEN];
	const char *reason;
	int allow;

	memset(&st, 0, sizeof(st));
	if (!ids_valid_operation(id)) {
		reply_error(r, PE_INVALID_PARAMS, "operation_id: malformed id");
		return;
	}
	reason = dl_decide(bd, params, &st);
	allow = strcmp(reason, DLR_ALLOW) == 0 || strcmp(reason, DLR_UPSTREAM) == 0 ||
	    strcmp(reason, DLR_NO_ADDRESS) == 0;
	ids_new("dns_", did, sizeof(did));

	r->or_result = json_object_new_object();
	json_object_object_add(r->or_result, "decision_id", json_object_new_string(did));
	json_object_object_add(r->or_result, "decision",
	    json_object_new_string(allow ? "allow" : "deny"));
	json_object_object_add(r->or_result, "reason", json_object_new_string(reason));
	json_object_object_add(r->or_result, "ttl", json_object_new_int64(st.ttl));
	json_object_object_add(r->or_result, "leases", json_object_get(st.leases));

	if (st.op == NULL || st.op->op_net == NULL) {
		log_info("dns: %s refused for %s", reason, id);
	} else {
		/* Evidence: the query, the answer as claimed, the leases or the denial. */
		struct json_object *o = json_object_new_object();
		json_object_object_add(o, "type", json_object_new_string("dns_decision"));
		json_object_object_add(o, "kind", json_object_new_string("dns"));
		json_object_object_add(o, "decision_id", json_object_new_string(did));
		json_object_object_add(o, "decision", json_object_new_string(allow ? "allow" : "deny"));
		json_object_object_add(o, "reason", json_object_new_string(reason));
		json_object_object_add(o, "client_address",
		    json_object_new_string(schema_string(params, "client_address")));
		json_object_object_add(o, "qname", json_object_new_string(schema_string(params, "qname")));
		json_object_object_add(o, "qtype", json_object_new_string(schema_string(params, "qtype")));
		json_object_object_add(o, "rcode", json_object_new_int((int)schema_int(params, "rcode", 0)));
		json_object_object_add(o, "names", json_object_get(schema_child(params, "names")));
		json_object_object_add(o, "addresses",
		    json_object_get(schema_child(params, "addresses")));
		json_object_object_add(o, "answer_ttl",
		    json_object_new_int64(schema_int(params, "ttl", 0)));
		json_object_object_add(o, "ttl", json_object_new_int64(st.ttl));
		json_object_object_add(o, "leases", json_object_get(st.leases));
		json_object_object_add(o, "denied", st.bad ? json_object_new_string(st.bad) : NULL);
		json_object_object_add(o, "generation",
		    json_object_new_int64((int64_t)st.op->op_net->no_generation));
		netop_append(st.op->op_net, "effects.jsonl", o);
		operation_count_effect(st.op);
	}
	json_object_put(st.leases);
	if (st.have_pol)
		dnspolicy_free(&st.pol);
}

/*
 * mediator.connect: may the mediator open a CONNECT tunnel for the
 * operation to host:port, at one of addresses (its own resolution)? The
 * same rules as a DNS answer, from boundaryd's state: host must match a
 * dns.allow entry for tcp and that port (the name alone decides: a tunnel
 * to an address literal is refused), no address restricted (the whole
 * answer is refused), none deny-listed. The first address is pinned: the
 * mediator connects to it and no other. No lease: the tunnel leaves from
 * the mediator's socket, not the operation's cgroup.
 *
 * With method (and url, for the evidence) it is an absolute-form request
 * the egress would forward: the same checks, and the method must be GET,
 * HEAD or one of the operation's http_methods. A method limit adds little
 * while a tunnel to the same name and port carries any bytes, but it is
 * the policy's to narrow, and the evidence names every request.
 */
void
dnslease_connect(struct boundaryd *bd, struct json_object *params, struct op_reply *r)
{
	const char *id = schema_string(params, "operation_id");
	const char *host = schema_string(params, "host");
	struct json_object *addrs = schema_child(params, "addresses");
	uint16_t port = (uint16_t)schema_int(params, "port", 0);
	const char *method = schema_string(params, "method"), *url = schema_string(params, "url");
	const char *stage = schema_string(params, "stage");
	const char *reason = DLR_ALLOW, *bad = NULL;
	int name_stage = stage != NULL && strcmp(stage, "name") == 0;
	struct operation *op;
	struct dnspolicy pol;
	int have_pol = 0;
	char did[ID_MAX_LEN], *cause = NULL;

	if (!ids_valid_operation(id)) {
		reply_error(r, PE_INVALID_PARAMS, "operation_id: malformed id");
		return;
	}
	op = operation_find(bd, id);
	if (op == NULL || op->op_phase != OP_RUNNING || op->op_net == NULL ||
	    op->op_net->no_table_gone) {
		reason = DLR_NOT_RUNNING;
		op = NULL;
	} else if (op->op_net->no_spec.ns_dns == NULL ||
	    schema_string(op->op_net->no_spec.ns_dns, "connect_listen") == NULL ||
	    dnspolicy_parse(op->op_net->no_spec.ns_dns, &pol, &cause) != 0) {
		free(cause);
		reason = "connect_not_configured";
	} else {
		have_pol = 1;
		reason = NULL;
	}
	if (reason == NULL && !dnsmsg_valid_name(host)) {
		reason = DLR_BAD;
		bad = host;
	}
	if (reason == NULL) {
		ssize_t i = -1;
		reason = DLR_NAME;
		bad = host;
		while ((i = dnspolicy_match(&pol, host, (size_t)(i + 1))) >= 0) {
			const struct dnspolicy_entry *de = &pol.dp_v[i];
			for (size_t k = 0; k < de->de_nports; k++)
				if (de->de_proto == IPPROTO_TCP && de->de_ports[k] == port)
					reason = NULL;
			if (reason == NULL)
				break;
		}
		if (reason == NULL)
			bad = NULL;
	}
	if (reason == NULL && method != NULL && (!connreq_valid_method(method) ||
	    strcmp(method, "CONNECT") == 0 || url == NULL)) {
		reason = DLR_BAD;
		bad = method;
	} else if (reason == NULL && method != NULL && !dnspolicy_method_allowed(&pol, method)) {
		reason = DLR_METHOD;
		bad = method;
	}
	if (reason == NULL && stage != NULL && !name_stage) {
		reason = DLR_BAD;
		bad = stage;
	}
	/*
	 * The answer's chain, as for the DNS proxy: an allowed name aliased to
	 * one that is not allowed is refused, or the tunnel would reach the
	 * other name's addresses under the allowed one's grant.
	 */
	struct json_object *names = schema_child(params, "names");
	if (reason == NULL && names != NULL && (name_stage || strcmp(json_object_get_string(
	    json_object_array_get_idx(names, 0)), host) != 0)) {
		reason = DLR_BAD;
		bad = json_object_get_string(json_object_array_get_idx(names, 0));
	}
	for (size_t i = 1; reason == NULL && names != NULL && i < json_object_array_length(names);
	    i++) {
		const char *n = json_object_get_string(json_object_array_get_idx(names, i));
		if (!dnsmsg_valid_name(n)) {
			reason = DLR_BAD;
			bad = n;
		} else if (dnspolicy_match(&pol, n, 0) < 0) {
			reason = DLR_CNAME;
			bad = n;
		}
	}
	/*
	 * Asked before resolving: the name alone decides now, so a refused
	 * name never reaches the mediator's resolver. Its allow is not the
	 * decision (that comes with the addresses) and is not evidence.
	 */
	if (reason == NULL && name_stage) {
		ids_new("con_", did, sizeof(did));
		r->or_result = json_object_new_object();
		json_object_object_add(r->or_result, "decision_id", json_object_new_string(did));
		json_object_object_add(r->or_result, "decision", json_object_new_string("allow"));
		json_object_object_add(r->or_result, "reason", json_object_new_string("name_allowed"));
		json_object_object_add(r->or_result, "address", NULL);
		dnspolicy_free(&pol);
		return;
	}
	if (reason == NULL && json_object_array_length(addrs) == 0)
		reason = DLR_NO_ADDRESS;
	for (size_t i = 0; reason == NULL && i < json_object_array_length(addrs); i++) {
		const char *a = json_object_get_string(json_object_array_get_idx(addrs, i));
		const char *why = NULL;
		uint8_t b[16];
		int f;
		if (netpolicy_parse_addr(a, &f, b) != 0) {
			reason = DLR_BAD;
			bad = a;
		} else if (netpolicy_restricted(&op->op_net->no_spec.ns_policy, f, b, &why)) {
			reason = DLR_RESTRICTED;
			bad = a;
		} else if (np_grants_find(&op->op_net->no_spec.ns_deny, f, b, IPPROTO_TCP, port) >= 0) {
			reason = DLR_DENY_LIST;
			bad = a;
		}
	}
	if (reason == NULL)
		reason = DLR_ALLOW;
	int allow = strcmp(reason, DLR_ALLOW) == 0;
	ids_new("con_", did, sizeof(did));
	r->or_result = json_object_new_object();
	json_object_object_add(r->or_result, "decision_id", json_object_new_string(did));
	json_object_object_add(r->or_result, "decision",
	    json_object_new_string(allow ? "allow" : "deny"));
	json_object_object_add(r->or_result, "reason", json_object_new_string(reason));
	json_object_object_add(r->or_result, "address", allow ? json_object_get(
	    json_object_array_get_idx(addrs, 0)) : NULL);
	if (op != NULL) {
		struct json_object *o = json_object_new_object();
		json_object_object_add(o, "type", json_object_new_string("connect_decision"));
		json_object_object_add(o, "kind", json_object_new_string(method ? "http" :
		    "connect"));
		if (method != NULL) {
			json_object_object_add(o, "method", json_object_new_string(method));
			json_object_object_add(o, "url", url ? json_object_new_string(url) : NULL);
		}
		json_object_object_add(o, "decision_id", json_object_new_string(did));
		json_object_object_add(o, "decision", json_object_new_string(allow ? "allow" : "deny"));
		json_object_object_add(o, "reason", json_object_new_string(reason));
		json_object_object_add(o, "host", json_object_new_string(host));
		json_object_object_add(o, "port", json_object_new_int(port));
		json_object_object_add(o, "addresses", json_object_get(addrs));
		if (names != NULL)
			json_object_object_add(o, "names", json_object_get(names));
		if (name_stage)
			json_object_object_add(o, "stage", json_object_new_string("name"));
		json_object_object_add(o, "pinned_address", allow ? json_object_get(
		    json_object_array_get_idx(addrs, 0)) : NULL);
		json_object_object_add(o, "denied", bad ? json_object_new_string(bad) : NULL);
		json_object_object_add(o, "generation",
		    json_object_new_int64((int64_t)op->op_net->no_generation));
		netop_append(op->op_net, "effects.jsonl", o);
		operation_count_effect(op);
	} else {
		log_info("connect: %s refused for %s", reason, id);
	}
	if (have_pol)
		dnspolicy_free(&pol);
}
