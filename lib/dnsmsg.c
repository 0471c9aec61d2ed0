/*
 * dnsmsg.c: the DNS message parser and builder of the confined DNS proxy.
 *
 * Threat: the query comes from the agent and the reply from an upstream
 * server the agent may control (its own domain's authoritative server).
 * Both are read with every offset checked against the length before use,
 * compression pointers only strictly backwards and at most 64 of them per
 * name (no loops), names only in an unambiguous text form. No existing
 * Debian library fits better: libevent's evdns hides the CNAME chain and
 * the per-record TTLs, and ldns/c-ares would add a dependency for the 300
 * lines below, which the fuzz target fuzz_dnsmsg covers.
 */
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>

#include "dnsmsg.h"

#define DNS_HDR 12
#define DNS_TYPE_OPT 41

static uint16_t
rd16(const uint8_t *p)
{
	return (uint16_t)((p[0] << 8) | p[1]);
}

static uint32_t
rd32(const uint8_t *p)
{
	return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

static int
dns_label_char(uint8_t c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	    c == '-' || c == '_';
}

/*
 * Read the name at *off into out (lower case, labels joined by '.', no
 * final dot; the root is ""). *off moves past the name as it is in place
 * (a pointer counts 2 bytes). Pointers must point before the label that
 * holds them, which alone rules out loops; the hop bound is a second fence.
 */
static int
dns_read_name(const uint8_t *p, size_t n, size_t *off, char out[DNSMSG_NAME_MAX + 1],
    const char **code)
{
	size_t pos = *off, len = 0, end = 0;
	int jumped = 0, hops = 0;

	for (;;) {
		if (pos >= n) {
			*code = DNSE_SHORT;
			return -1;
		}
		uint8_t l = p[pos];
		if ((l & 0xc0) == 0xc0) {
			if (pos + 1 >= n) {
				*code = DNSE_SHORT;
				return -1;
			}
			size_t to = ((size_t)(l & 0x3f) << 8) | p[pos + 1];
			/* Backwards only, and never into the 12-byte header. */
			if (to >= pos || to < DNS_HDR || ++hops > 64) {
				*code = DNSE_POINTER;
				return -1;
			}
			if (!jumped)
				end = pos + 2;
			jumped = 1;
			pos = to;
			continue;
		}
		if ((l & 0xc0) != 0) {
			*code = DNSE_NAME; /* extended label types (RFC 6891 obsoleted them) */
			return -1;
		}
		if (l == 0) {
			if (!jumped)
				end = pos + 1;
			break;
		}
		if (pos + 1 + l > n) {
			*code = DNSE_SHORT;
			return -1;
		}
		/* len + '.' + l bytes must fit in 253 characters. */
		if (len + (len ? 1 : 0) + l > DNSMSG_NAME_MAX) {
			*code = DNSE_NAME;
			return -1;
		}
		if (len)
			out[len++] = '.';
		for (size_t i = 0; i < l; i++) {
			uint8_t c = p[pos + 1 + i];
			if (!dns_label_char(c)) {
				*code = DNSE_NAME;
				return -1;
			}
			out[len++] = (char)((c >= 'A' && c <= 'Z') ? c + 32 : c);
		}
		pos += 1 + (size_t)l;
	}
	out[len] = '\0';
	*off = end;
	return 0;
}

int
dnsmsg_parse_query(const uint8_t *p, size_t n, struct dnsmsg_query *q, const char **code)
{
	size_t off = DNS_HDR;

	memset(q, 0, sizeof(*q));
	if (n < DNS_HDR) {
		*code = DNSE_SHORT;
		return -1;
	}
	if (p[2] & 0x80) {
		*code = DNSE_NOT_QUERY;
		return -1;
	}
	if (((p[2] >> 3) & 0x0f) != 0) {
		*code = DNSE_OPCODE;
		return -1;
	}
	/* One question, nothing else but at most one additional (EDNS OPT). */
	if (rd16(p + 4) != 1 || rd16(p + 6) != 0 || rd16(p + 8) != 0 || rd16(p + 10) > 1) {
		*code = DNSE_COUNTS;
		return -1;
	}
	q->dq_id = rd16(p);
	q->dq_rd = (p[2] & 0x01) != 0;
	if (dns_read_name(p, n, &off, q->dq_name, code) != 0)
		return -1;
	if (q->dq_name[0] == '\0') {
		*code = DNSE_NAME;
		return -1;
	}
	if (off + 4 > n) {
		*code = DNSE_SHORT;
		return -1;
	}
	q->dq_type = rd16(p + off);
	q->dq_class = rd16(p + off + 2);
	off += 4;
	if (rd16(p + 10) == 1) {
		/* The additional must be an OPT at the root; it is read and dropped. */
		char name[DNSMSG_NAME_MAX + 1];
		if (dns_read_name(p, n, &off, name, code) != 0)
			return -1;
		if (off + 10 > n) {
			*code = DNSE_SHORT;
			return -1;
		}
		if (name[0] != '\0' || rd16(p + off) != DNS_TYPE_OPT) {
			*code = DNSE_COUNTS;
			return -1;
		}
		size_t rdlen = rd16(p + off + 8);
		off += 10;
		if (off + rdlen > n) {
			*code = DNSE_SHORT;
			return -1;
		}
		off += rdlen;
	}
	if (off != n) {
		*code = DNSE_SHORT; /* trailing bytes: a second reader might see more */
		return -1;
	}
	return 0;
}

int
dnsmsg_parse_reply(const uint8_t *p, size_t n, struct dnsmsg_reply *r, const char **code)
{
	size_t off = DNS_HDR;
	unsigned qd, an, ns, ar;

	memset(r, 0, sizeof(*r));
	if (n < DNS_HDR) {
		*code = DNSE_SHORT;
		return -1;
	}
	if (!(p[2] & 0x80)) {
		*code = DNSE_NOT_RESPONSE;
		return -1;
	}
	if (((p[2] >> 3) & 0x0f) != 0) {
		*code = DNSE_OPCODE;
		return -1;
	}
	if (p[2] & 0x02) {
		*code = DNSE_TC;
		return -1;
	}
	qd = rd16(p + 4);
	an = rd16(p + 6);
	ns = rd16(p + 8);
	ar = rd16(p + 10);
	if (qd != 1) {
		*code = DNSE_COUNTS;
		return -1;
	}
	r->da_id = rd16(p);
	r->da_rcode = p[3] & 0x0f;
	if (dns_read_name(p, n, &off, r->da_qname, code) != 0)
		return -1;
	if (off + 4 > n) {
		*code = DNSE_SHORT;
		return -1;
	}
	r->da_qtype = rd16(p + off);
	if (rd16(p + off + 2) != DNS_CLASS_IN) {
		*code = DNSE_CLASS;
		return -1;
	}
	off += 4;
	for (unsigned i = 0; i < an + ns + ar; i++) {
		char name[DNSMSG_NAME_MAX + 1];
		if (dns_read_name(p, n, &off, name, code) != 0)
			return -1;
		if (off + 10 > n) {
			*code = DNSE_SHORT;
			return -1;
		}
		uint16_t type = rd16(p + off), cls = rd16(p + off + 2);
		uint32_t ttl = rd32(p + off + 4);
		size_t rdlen = rd16(p + off + 8), rd = off + 10;
		if (rd + rdlen > n) {
			*code = DNSE_SHORT;
			return -1;
		}
		off = rd + rdlen;
		if (i >= an || cls != DNS_CLASS_IN ||
		    (type != DNS_TYPE_A && type != DNS_TYPE_AAAA && type != DNS_TYPE_CNAME))
			continue;
		if (r->da_n == DNSMSG_MAX_RR) {
			*code = DNSE_TOO_MANY;
			return -1;
		}
		struct dnsmsg_rr *rr = &r->da_rr[r->da_n];
		memset(rr, 0, sizeof(*rr));
		memcpy(rr->dr_name, name, sizeof(name));
		rr->dr_type = type;
		/* RFC 2181 8: a TTL with the top bit set is read as 0. */
		rr->dr_ttl = (ttl & 0x80000000u) ? 0 : ttl;
		if (type == DNS_TYPE_A || type == DNS_TYPE_AAAA) {
			size_t want = type == DNS_TYPE_A ? 4 : 16;
			if (rdlen != want) {
				*code = DNSE_RDATA;
				return -1;
			}
			memcpy(rr->dr_addr, p + rd, want);
		} else {
			size_t t = rd;
			if (dns_read_name(p, rd + rdlen, &t, rr->dr_target, code) != 0)
				return -1;
			if (t != rd + rdlen || rr->dr_target[0] == '\0') {
				*code = DNSE_RDATA;
				return -1;
			}
		}
		r->da_n++;
	}
	(void)ns;
	if (off != n) {
		*code = DNSE_SHORT;
		return -1;
	}
	return 0;
}

int
dnsmsg_chain(const struct dnsmsg_reply *r, const char *qname, uint16_t qtype,
    struct dnsmsg_chain *c, const char **code)
{
	const char *cur = qname;
	uint32_t ttl = UINT32_MAX;

	memset(c, 0, sizeof(*c));
	c->dc_family = qtype == DNS_TYPE_AAAA ? AF_INET6 : AF_INET;
	memcpy(c->dc_names[0], qname, strlen(qname) + 1);
	c->dc_nnames = 1;
	for (;;) {
		const struct dnsmsg_rr *cn = NULL;
		for (size_t i = 0; i < r->da_n; i++)
			if (r->da_rr[i].dr_type == DNS_TYPE_CNAME &&
			    strcmp(r->da_rr[i].dr_name, cur) == 0) {
				if (cn != NULL) {
					*code = DNSE_RDATA; /* two CNAMEs for one name: ambiguous */
					return -1;
				}
				cn = &r->da_rr[i];
			}
		if (cn == NULL)
			break;
		if (c->dc_nnames == DNSMSG_MAX_CHAIN) {
			*code = DNSE_CHAIN;
			return -1;
		}
		for (size_t k = 0; k < c->dc_nnames; k++)
			if (strcmp(c->dc_names[k], cn->dr_target) == 0) {
				*code = DNSE_CHAIN; /* a loop */
				return -1;
			}
		memcpy(c->dc_names[c->dc_nnames], cn->dr_target, sizeof(cn->dr_target));
		cur = c->dc_names[c->dc_nnames++];
		if (cn->dr_ttl < ttl)
			ttl = cn->dr_ttl;
	}
	for (size_t i = 0; i < r->da_n; i++) {
		const struct dnsmsg_rr *rr = &r->da_rr[i];
		if (rr->dr_type != qtype || qtype == DNS_TYPE_CNAME || strcmp(rr->dr_name, cur) != 0)
			continue;
		if (c->dc_naddrs == DNSMSG_MAX_ADDRS) {
			*code = DNSE_TOO_MANY;
			return -1;
		}
		memcpy(c->dc_addrs[c->dc_naddrs++], rr->dr_addr, 16);
		if (rr->dr_ttl < ttl)
			ttl = rr->dr_ttl;
	}
	c->dc_ttl = ttl == UINT32_MAX ? 0 : ttl;
	return 0;
}

/* Write name uncompressed at out+*off; -1 when it does not fit. */
static int
dns_put_name(const char *name, uint8_t *out, size_t cap, size_t *off)
{
	const char *s = name;

	while (*s != '\0') {
		size_t l = strcspn(s, ".");
		if (l == 0 || l > 63 || *off + 1 + l > cap)
			return -1;
		out[(*off)++] = (uint8_t)l;
		memcpy(out + *off, s, l);
		*off += l;
		s += l;
		if (*s == '.')
			s++;
	}
	if (*off + 1 > cap)
		return -1;
	out[(*off)++] = 0;
	return 0;
}

static int
dns_put16(uint8_t *out, size_t cap, size_t *off, uint16_t v)
{
	if (*off + 2 > cap)
		return -1;
	out[(*off)++] = (uint8_t)(v >> 8);
	out[(*off)++] = (uint8_t)v;
	return 0;
}

static int
dns_put32(uint8_t *out, size_t cap, size_t *off, uint32_t v)
{
	if (dns_put16(out, cap, off, (uint16_t)(v >> 16)) != 0)
		return -1;
	return dns_put16(out, cap, off, (uint16_t)v);
}

/* Header and question; counts patched by the caller. */
static int
dns_put_head(const struct dnsmsg_query *q, int rcode, uint8_t *out, size_t cap, size_t *off)
{
	*off = 0;
	if (cap < DNS_HDR)
		return -1;
	memset(out, 0, DNS_HDR);
	out[0] = (uint8_t)(q->dq_id >> 8);
	out[1] = (uint8_t)q->dq_id;
	out[2] = (uint8_t)(0x80 | (q->dq_rd ? 0x01 : 0)); /* QR, RD echoed */
	out[3] = (uint8_t)(0x80 | (rcode & 0x0f));	    /* RA */
	out[5] = 1;
	*off = DNS_HDR;
	if (dns_put_name(q->dq_name, out, cap, off) != 0 || dns_put16(out, cap, off, q->dq_type) != 0 ||
	    dns_put16(out, cap, off, q->dq_class) != 0)
		return -1;
	return 0;
}

int
dnsmsg_build_error(const struct dnsmsg_query *q, int rcode, uint8_t *out, size_t cap)
{
	size_t off;
	if (dns_put_head(q, rcode, out, cap, &off) != 0)
		return -1;
	return (int)off;
}

int
dnsmsg_build_answer(const struct dnsmsg_query *q, const struct dnsmsg_chain *c, uint32_t ttl,
    uint8_t *out, size_t cap)
{
	size_t off, qend;
	unsigned an = 0;

	if (dns_put_head(q, DNS_RCODE_NOERROR, out, cap, &off) != 0)
		return -1;
	qend = off;
	for (size_t i = 0; i + 1 < c->dc_nnames; i++, an++) {
		size_t lenpos;
		if (dns_put_name(c->dc_names[i], out, cap, &off) != 0 ||
		    dns_put16(out, cap, &off, DNS_TYPE_CNAME) != 0 ||
		    dns_put16(out, cap, &off, DNS_CLASS_IN) != 0 || dns_put32(out, cap, &off, ttl) != 0)
			goto truncated;
		lenpos = off;
		if (dns_put16(out, cap, &off, 0) != 0 ||
		    dns_put_name(c->dc_names[i + 1], out, cap, &off) != 0)
			goto truncated;
		out[lenpos] = (uint8_t)((off - lenpos - 2) >> 8);
		out[lenpos + 1] = (uint8_t)(off - lenpos - 2);
	}
	for (size_t i = 0; i < c->dc_naddrs; i++, an++) {
		size_t alen = c->dc_family == AF_INET6 ? 16 : 4;
		if (dns_put_name(c->dc_names[c->dc_nnames - 1], out, cap, &off) != 0 ||
		    dns_put16(out, cap, &off, c->dc_family == AF_INET6 ? DNS_TYPE_AAAA : DNS_TYPE_A) ||
		    dns_put16(out, cap, &off, DNS_CLASS_IN) != 0 || dns_put32(out, cap, &off, ttl) != 0 ||
		    dns_put16(out, cap, &off, (uint16_t)alen) != 0 || off + alen > cap)
			goto truncated;
		memcpy(out + off, c->dc_addrs[i], alen);
		off += alen;
	}
	out[6] = (uint8_t)(an >> 8);
	out[7] = (uint8_t)an;
	return (int)off;
truncated:
	/* The question alone, TC set: the client asks again over TCP. */
	out[2] |= 0x02;
	out[6] = out[7] = 0;
	return (int)qend;
}

int
dnsmsg_build_query(uint16_t id, const char *name, uint16_t type, uint8_t *out, size_t cap)
{
	struct dnsmsg_query q;
	size_t off;

	memset(&q, 0, sizeof(q));
	if (strlen(name) > DNSMSG_NAME_MAX)
		return -1;
	q.dq_id = id;
	q.dq_rd = 1;
	memcpy(q.dq_name, name, strlen(name) + 1);
	q.dq_type = type;
	q.dq_class = DNS_CLASS_IN;
	if (dns_put_head(&q, 0, out, cap, &off) != 0)
		return -1;
	out[2] = 0x01; /* a query: QR clear, RD */
	out[3] = 0;
	return (int)off;
}

int
dnsmsg_valid_name(const char *name)
{
	size_t n = strlen(name), label = 0;

	if (n == 0 || n > DNSMSG_NAME_MAX)
		return 0;
	for (size_t i = 0; i <= n; i++) {
		char c = name[i];
		if (c == '.' || c == '\0') {
			if (label == 0 || label > 63)
				return 0;
			label = 0;
			continue;
		}
		if (!dns_label_char((uint8_t)c) || (c >= 'A' && c <= 'Z'))
			return 0;
		label++;
	}
	return 1;
}

int
dnsmsg_valid_pattern(const char *pattern)
{
	if (strncmp(pattern, "*.", 2) == 0) {
		/* "*.com" would allow a whole top-level domain: two labels at least. */
		return dnsmsg_valid_name(pattern + 2) && strchr(pattern + 2, '.') != NULL;
	}
	return dnsmsg_valid_name(pattern);
}

int
dnsmsg_name_match(const char *pattern, const char *name)
{
	size_t pn, nn;

	if (strncmp(pattern, "*.", 2) != 0)
		return strcmp(pattern, name) == 0;
	pattern += 1; /* ".suffix" */
	pn = strlen(pattern);
	nn = strlen(name);
	/* At least one label before the suffix: "x.pypi.org", never "pypi.org". */
	return nn > pn && strcmp(name + nn - pn, pattern) == 0;
}

const char *
dnsmsg_type_name(uint16_t type)
{
	switch (type) {
	case DNS_TYPE_A:
		return "A";
	case DNS_TYPE_AAAA:
		return "AAAA";
	case DNS_TYPE_CNAME:
		return "CNAME";
	default:
		return "other";
	}
}
