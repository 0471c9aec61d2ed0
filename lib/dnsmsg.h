/*
 * dnsmsg.h: DNS messages (RFC 1035) as the confined DNS proxy sees them.
 *
 * Everything here reads bytes an agent or an upstream server chose, so it
 * is written to refuse, never to repair: a name with a byte two readers
 * could split differently ('.' inside a label, NUL, anything outside
 * letters, digits, '-' and '_'), a compression pointer that does not point
 * strictly backwards, a count the message does not hold, or a record that
 * runs past the end is an error with a stable code. Only the question,
 * CNAME, A and AAAA records are ever read for a decision; the proxy builds
 * its reply itself from what was checked, so nothing unchecked (authority,
 * additional, other types) reaches the client.
 */
#ifndef GENSEE_DNSMSG_H
#define GENSEE_DNSMSG_H

#include <stddef.h>
#include <stdint.h>

struct json_object;

#define DNSMSG_NAME_MAX 253		/* text form, without the final dot */
#define DNSMSG_UDP_MAX 512		/* a reply over this is sent truncated (TC) */
#define DNSMSG_MAX_RR 64		/* answer records read from an upstream reply */
#define DNSMSG_MAX_CHAIN 8		/* qname and at most 7 CNAME targets */
#define DNSMSG_MAX_ADDRS 16
#define DNSMSG_MAX_PORTS 16		/* per dns.allow entry */

#define DNS_TYPE_A 1
#define DNS_TYPE_CNAME 5
#define DNS_TYPE_AAAA 28
#define DNS_CLASS_IN 1

#define DNS_RCODE_NOERROR 0
#define DNS_RCODE_SERVFAIL 2
#define DNS_RCODE_NXDOMAIN 3
#define DNS_RCODE_REFUSED 5

/* Stable error codes. */
#define DNSE_SHORT "truncated_message"
#define DNSE_NOT_QUERY "not_a_query"
#define DNSE_NOT_RESPONSE "not_a_response"
#define DNSE_OPCODE "unsupported_opcode"
#define DNSE_COUNTS "bad_counts"
#define DNSE_NAME "bad_name"
#define DNSE_POINTER "bad_pointer"
#define DNSE_RDATA "bad_rdata"
#define DNSE_TOO_MANY "too_many_records"
#define DNSE_TC "upstream_truncated"
#define DNSE_MISMATCH "question_mismatch"
#define DNSE_CHAIN "cname_chain_too_long"
#define DNSE_CLASS "unsupported_class"

struct dnsmsg_query {
	uint16_t dq_id;
	int dq_rd;			/* recursion desired, echoed */
	char dq_name[DNSMSG_NAME_MAX + 1];	/* lower case, no final dot */
	uint16_t dq_type;
	uint16_t dq_class;
};

struct dnsmsg_rr {
	char dr_name[DNSMSG_NAME_MAX + 1];
	uint16_t dr_type;
	uint32_t dr_ttl;
	uint8_t dr_addr[16];		/* A: 4 bytes, AAAA: 16 */
	char dr_target[DNSMSG_NAME_MAX + 1];	/* CNAME */
};

struct dnsmsg_reply {
	uint16_t da_id;
	int da_rcode;
	char da_qname[DNSMSG_NAME_MAX + 1];
	uint16_t da_qtype;
	size_t da_n;			/* CNAME/A/AAAA records of class IN in the answer */
	struct dnsmsg_rr da_rr[DNSMSG_MAX_RR];
};

/* The answer as the proxy uses it: the name chain and the final addresses. */
struct dnsmsg_chain {
	char dc_names[DNSMSG_MAX_CHAIN][DNSMSG_NAME_MAX + 1];
	size_t dc_nnames;		/* >= 1: dc_names[0] is the query name */
	int dc_family;			/* AF_INET (A) or AF_INET6 (AAAA) */
	uint8_t dc_addrs[DNSMSG_MAX_ADDRS][16];
	size_t dc_naddrs;
	uint32_t dc_ttl;		/* the least TTL of every record used */
};

/* A client's query: exactly one question, no answers; an EDNS OPT is ignored. */
int dnsmsg_parse_query(const uint8_t *p, size_t n, struct dnsmsg_query *q, const char **code);
/* An upstream reply (its question must be checked against the query by the caller). */
int dnsmsg_parse_reply(const uint8_t *p, size_t n, struct dnsmsg_reply *r, const char **code);
/*
 * From qname follow CNAME records name by name (each link's owner is the
 * previous target), then take the qtype records of the last name. Records
 * off the chain are dropped. More than DNSMSG_MAX_ADDRS addresses: refused.
 */
int dnsmsg_chain(const struct dnsmsg_reply *r, const char *qname, uint16_t qtype,
    struct dnsmsg_chain *c, const char **code);
/*
 * A reply to q built from c alone, every record with ttl. Over cap bytes
 * (DNSMSG_UDP_MAX for UDP) only the question is sent, with TC set, so a
 * client retries over TCP. Returns the length, or -1.
 */
int dnsmsg_build_answer(const struct dnsmsg_query *q, const struct dnsmsg_chain *c, uint32_t ttl,
    uint8_t *out, size_t cap);
/* A reply to q with rcode and no records. Returns the length, or -1. */
int dnsmsg_build_error(const struct dnsmsg_query *q, int rcode, uint8_t *out, size_t cap);
/* A query for (id, name, type), recursion desired: what the proxy sends upstream. */
int dnsmsg_build_query(uint16_t id, const char *name, uint16_t type, uint8_t *out, size_t cap);

/*
 * Does name match pattern? Exact (case-insensitive), or "*.suffix": any
 * name of at least one more label ending in ".suffix" (not suffix itself).
 */
int dnsmsg_name_match(const char *pattern, const char *name);
/* A pattern a policy may hold: a lower-case name, or "*." and a name of two labels or more. */
int dnsmsg_valid_pattern(const char *pattern);
/* A lower-case name in the text form this module produces. */
int dnsmsg_valid_name(const char *name);
const char *dnsmsg_type_name(uint16_t type);

#endif
