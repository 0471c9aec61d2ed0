/*
 * redirect.c: the mediator follows GET and HEAD redirects itself.
 *
 * Threat: a granted upstream answering "302 Location:
 * http://169.254.169.254/..." (or loopback, or a name that resolves
 * there) to steer the mediator into the host's inside. A redirect is
 * therefore never a shortcut: the Location is parsed by the same strict
 * parser as a client's target (lib/medreq.c, lib/httpurl.c), becomes the
 * request's new target, and goes through the whole path again: resolve,
 * every address to boundaryd (which re-parses the URL, checks IP-literal
 * hosts and everything they embed, the restricted ranges and the grants,
 * and bounds the hop number itself), pin, connect. No socket to the next
 * hop opens before boundaryd's allow. The depth is proxy.max_redirects;
 * one more redirect is refused (502 too_many_redirects), as is a
 * Location that is missing or not one unambiguous URL (502 bad_redirect).
 * The 3xx response itself (its headers and body) never reaches the
 * client. Only GET and HEAD are followed; a redirect answering any other
 * method is returned as it is (only allowlisted headers, so Location),
 * and the client's next request is authorized like any other.
 */
#include <stdlib.h>
#include <string.h>

#include "httpmediatord.h"
#include "log.h"
#include "medreq.h"

int
redirect_wanted(const struct mreq *mr)
{
	return strcmp(mr->mr_method, "GET") == 0 || strcmp(mr->mr_method, "HEAD") == 0;
}

void
redirect_follow(struct mreq *mr, const char *location)
{
	struct medreq_target *next;
	const char *detail = NULL;
	char from[512], to[512];

	if (mr->mr_client == NULL) {
		/* The client is gone (deadline): no further hop for nobody. */
		proxy_mreq_free(mr);
		return;
	}
	if (mr->mr_hop >= mr->mr_max_redirects) {
		proxy_fail(mr, 502, "Bad Gateway", "too_many_redirects");
		return;
	}
	if ((next = malloc(sizeof(*next))) == NULL) {
		proxy_fail(mr, 503, "Service Unavailable", "out_of_memory");
		return;
	}
	if (medreq_redirect_target(&mr->mr_t, location, next, &detail) != 0) {
		free(next);
		/* The Location may carry a query value: only the code is logged. */
		log_info("%s: redirect refused: %s", mr->mr_op, detail ? detail : "not absolute");
		proxy_fail(mr, 502, "Bad Gateway", MEDREQ_E_BAD_REDIRECT);
		return;
	}
	medreq_redacted_url(mr->mr_t.mt_url, from, sizeof(from));
	medreq_redacted_url(next->mt_url, to, sizeof(to));
	log_info("%s: %s redirect %d: %s -> %s", mr->mr_op, mr->mr_method, mr->mr_hop + 1, from,
	    to);
	memcpy(&mr->mr_t, next, sizeof(mr->mr_t));
	free(next);
	mr->mr_hop++;
	proxy_resolve(mr);
}
