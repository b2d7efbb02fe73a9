/* What the connection-manager test programs share: waiting for one event of a kind or
 * one completion, and IPv4 socket addresses. */
#ifndef EMU_TEST_CM_UTIL_H
#define EMU_TEST_CM_UTIL_H
#include "util.h"
#include <arpa/inet.h>
#include <rdma/rdma_cma.h>
#include <stdlib.h>

/* The next event of `ch`, printed as "WHO: EVENT status N"; exits unless it is `want`. */
static inline struct rdma_cm_event *expect(struct rdma_event_channel *ch,
					   enum rdma_cm_event_type want, const char *who)
{
	struct rdma_cm_event *ev;
	if (rdma_get_cm_event(ch, &ev)) {
		fprintf(stderr, "rdma_get_cm_event failed: %s\n", strerror(errno));
		exit(1);
	}
	printf("%s: %s status %d\n", who, rdma_event_str(ev->event), ev->status);
	if (ev->event != want) {
		fprintf(stderr, "%s: wanted %s\n", who, rdma_event_str(want));
		exit(1);
	}
	return ev;
}

/* `ip`:`port` as a struct sockaddr_in. */
static inline struct sockaddr_in sin_of(const char *ip, int port)
{
	struct sockaddr_in s = { .sin_family = AF_INET, .sin_port = htons(port) };
	inet_pton(AF_INET, ip, &s.sin_addr);
	return s;
}

/* The text of a socket address's IPv4 address and port, "a.b.c.d:p". */
static inline const char *addr_str(struct sockaddr *sa)
{
	static char buf[2][64];
	static int k;
	char *b = buf[k++ % 2];
	struct sockaddr_in *s = (struct sockaddr_in *)sa;
	char ip[INET_ADDRSTRLEN];
	inet_ntop(AF_INET, &s->sin_addr, ip, sizeof ip);
	snprintf(b, 64, "%s:%d", ip, ntohs(s->sin_port));
	return b;
}

/* A GID as IPv6 text. */
static inline const char *gid_str(const union ibv_gid *g)
{
	static char buf[2][INET6_ADDRSTRLEN];
	static int k;
	char *b = buf[k++ % 2];
	inet_ntop(AF_INET6, g->raw, b, INET6_ADDRSTRLEN);
	return b;
}

#define CHECK(call) do { if (call) FAIL(#call); } while (0)

/* Polls `cq` until one completion arrives (or a few hundred million empty polls);
 * returns how many came (1 or 0), the completion in `wc`. */
static inline int one_wc(struct ibv_cq *cq, struct ibv_wc *wc)
{
	for (long spins = 0; spins < 200000000; spins++) {
		int n = ibv_poll_cq(cq, 1, wc);
		if (n)
			return n;
	}
	return 0;
}
#endif
