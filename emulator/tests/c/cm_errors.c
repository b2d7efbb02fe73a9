/* The emulated librdmacm's answers to what goes wrong, as the kernel gives them: binding
 * to addresses this host does not have, a port in use, unreachable and silent
 * destinations, connecting where nobody listens (here, and on another host of the
 * topology), a rejecting listener, calls out of order, a non-blocking channel, options,
 * the device list, rdma_getaddrinfo, moving an id to another channel, and a refused rsocket. Prints each outcome. */
#include "cm_util.h"
#include <fcntl.h>
#include <rdma/rsocket.h>

static const char *err(int r)
{
	static char buf[64];
	if (r == 0)
		return "ok";
	snprintf(buf, sizeof buf, "%s", errno == EADDRNOTAVAIL ? "EADDRNOTAVAIL"
		 : errno == ENODEV ? "ENODEV" : errno == EINVAL ? "EINVAL"
		 : errno == EADDRINUSE ? "EADDRINUSE" : errno == ENETUNREACH ? "ENETUNREACH"
		 : errno == EAGAIN ? "EAGAIN" : errno == ENOSYS ? "ENOSYS"
		 : errno == EOPNOTSUPP ? "EOPNOTSUPP" : strerror(errno));
	return buf;
}

/* A new id of `ps` on `ch` with a resolved route to `ip`:`port`. */
static struct rdma_cm_id *routed(struct rdma_event_channel *ch, const char *ip, int port)
{
	struct rdma_cm_id *id;
	struct sockaddr_in dst = sin_of(ip, port);
	if (rdma_create_id(ch, &id, NULL, RDMA_PS_TCP) ||
	    rdma_resolve_addr(id, NULL, (struct sockaddr *)&dst, 2000))
		exit(1);
	rdma_ack_cm_event(expect(ch, RDMA_CM_EVENT_ADDR_RESOLVED, "client"));
	if (rdma_resolve_route(id, 2000))
		exit(1);
	rdma_ack_cm_event(expect(ch, RDMA_CM_EVENT_ROUTE_RESOLVED, "client"));
	return id;
}

int main(void)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	if (!ch) FAIL("rdma_create_event_channel");
	struct rdma_cm_id *a, *b;
	printf("create_id with port space 7: %s\n", err(rdma_create_id(ch, &a, NULL, 7)));
	CHECK(rdma_create_id(ch, &a, NULL, RDMA_PS_TCP));
	CHECK(rdma_create_id(ch, &b, NULL, RDMA_PS_TCP));

	struct sockaddr_in s = sin_of("10.100.0.2", 0);
	printf("bind 10.100.0.2 (host h2's): %s\n", err(rdma_bind_addr(a, (struct sockaddr *)&s)));
	s = sin_of("127.0.0.1", 0);
	printf("bind 127.0.0.1: %s\n", err(rdma_bind_addr(a, (struct sockaddr *)&s)));
	struct sockaddr unix_addr = { .sa_family = AF_UNIX };
	printf("bind AF_UNIX: %s\n", err(rdma_bind_addr(a, &unix_addr)));
	s = sin_of("10.100.0.1", 7000);
	printf("bind 10.100.0.1:7000: %s\n", err(rdma_bind_addr(a, (struct sockaddr *)&s)));
	printf("bind it again: %s\n", err(rdma_bind_addr(a, (struct sockaddr *)&s)));
	printf("another id on 10.100.0.1:7000: %s\n", err(rdma_bind_addr(b, (struct sockaddr *)&s)));
	s = sin_of("0.0.0.0", 7001);
	printf("bind 0.0.0.0:7001: %s, device %d\n", err(rdma_bind_addr(b, (struct sockaddr *)&s)),
	       b->verbs != NULL);
	printf("disconnect an unconnected id: %s\n", err(rdma_disconnect(a)));
	printf("resolve_route before resolve_addr: %s\n", err(rdma_resolve_route(a, 100)));
	CHECK(rdma_destroy_id(a));
	CHECK(rdma_destroy_id(b));

	CHECK(rdma_create_id(ch, &a, NULL, RDMA_PS_TCP));
	s = sin_of("192.168.9.9", 1);
	printf("resolve 192.168.9.9 (no route): %s\n",
	       err(rdma_resolve_addr(a, NULL, (struct sockaddr *)&s, 100)));
	s = sin_of("10.100.0.77", 1);
	printf("resolve 10.100.0.77 (nobody answers): %s\n",
	       err(rdma_resolve_addr(a, NULL, (struct sockaddr *)&s, 100)));
	rdma_ack_cm_event(expect(ch, RDMA_CM_EVENT_ADDR_ERROR, "client"));
	CHECK(rdma_destroy_id(a));

	/* Nobody listens on port 7999 of this host, nor anywhere on host h2. */
	a = routed(ch, "10.100.0.1", 7999);
	struct ibv_qp_init_attr qa = {
		.qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 1, .max_recv_wr = 1, .max_send_sge = 1, .max_recv_sge = 1 },
	};
	CHECK(rdma_create_qp(a, NULL, &qa));
	CHECK(rdma_connect(a, NULL));
	rdma_ack_cm_event(expect(ch, RDMA_CM_EVENT_REJECTED, "client"));
	printf("qp state after the reject %d\n", a->qp->state);
	rdma_destroy_qp(a);
	CHECK(rdma_destroy_id(a));
	a = routed(ch, "10.100.0.2", 7471);
	struct rdma_conn_param cp = { .qp_num = 77, .responder_resources = 1, .initiator_depth = 1 };
	CHECK(rdma_connect(a, &cp));
	rdma_ack_cm_event(expect(ch, RDMA_CM_EVENT_REJECTED, "client"));
	CHECK(rdma_destroy_id(a));

	/* A listener that rejects. */
	struct rdma_event_channel *sch = rdma_create_event_channel();
	struct rdma_cm_id *l;
	CHECK(rdma_create_id(sch, &l, NULL, RDMA_PS_TCP));
	s = sin_of("0.0.0.0", 7002);
	CHECK(rdma_bind_addr(l, (struct sockaddr *)&s));
	CHECK(rdma_listen(l, 0));
	a = routed(ch, "10.100.0.1", 7002);
	printf("connect without a QP or parameters: %s\n", err(rdma_connect(a, NULL)));
	CHECK(rdma_connect(a, &cp));
	struct rdma_cm_event *ev = expect(sch, RDMA_CM_EVENT_CONNECT_REQUEST, "server");
	struct rdma_cm_id *child = ev->id;
	printf("request's qp_num %u\n", ev->param.conn.qp_num);
	rdma_ack_cm_event(ev);
	printf("accept without a QP or parameters: %s\n", err(rdma_accept(child, NULL)));
	CHECK(rdma_reject(child, "no", 3));
	ev = expect(ch, RDMA_CM_EVENT_REJECTED, "client");
	printf("reject private data %d bytes \"%s\"\n", ev->param.conn.private_data_len,
	       (const char *)ev->param.conn.private_data);
	rdma_ack_cm_event(ev);
	printf("reject it again: %s\n", err(rdma_reject(child, NULL, 0)));
	CHECK(rdma_destroy_id(child));
	CHECK(rdma_destroy_id(a));
	CHECK(rdma_destroy_id(l));
	rdma_destroy_event_channel(sch);

	int fl = fcntl(ch->fd, F_GETFL);
	CHECK(fcntl(ch->fd, F_SETFL, fl | O_NONBLOCK) < 0);
	printf("get_cm_event on an empty non-blocking channel: %s\n", err(rdma_get_cm_event(ch, &ev)));

	CHECK(rdma_create_id(ch, &a, NULL, RDMA_PS_TCP));
	uint8_t tos = 32;
	printf("set TOS: %s\n", err(rdma_set_option(a, RDMA_OPTION_ID, RDMA_OPTION_ID_TOS, &tos, 1)));
	printf("set TOS with 4 bytes: %s\n",
	       err(rdma_set_option(a, RDMA_OPTION_ID, RDMA_OPTION_ID_TOS, &tos, 4)));
	printf("set option 99: %s\n", err(rdma_set_option(a, RDMA_OPTION_ID, 99, &tos, 1)));
	s = sin_of("239.1.1.1", 0);
	printf("leave a group never joined: %s\n", err(rdma_leave_multicast(a, (struct sockaddr *)&s)));
	CHECK(rdma_destroy_id(a));
	printf("event 99 is %s\n", rdma_event_str(99));

	int n;
	struct ibv_context **devs = rdma_get_devices(&n);
	if (!devs) FAIL("rdma_get_devices");
	printf("devices %d: %s, list ends %d\n", n, ibv_get_device_name(devs[0]->device), devs[1] == NULL);
	rdma_free_devices(devs);

	struct rdma_addrinfo hints = { .ai_flags = RAI_PASSIVE, .ai_port_space = RDMA_PS_TCP }, *res;
	CHECK(rdma_getaddrinfo("10.100.0.1", "7471", &hints, &res));
	printf("getaddrinfo: flags %d family %d qp_type %d ps 0x%x src %s dst_len %u\n",
	       res->ai_flags, res->ai_family, res->ai_qp_type, res->ai_port_space,
	       addr_str(res->ai_src_addr), res->ai_dst_len);
	rdma_freeaddrinfo(res);
	CHECK(rdma_getaddrinfo("10.100.0.2", "18515", NULL, &res));
	printf("getaddrinfo: flags %d qp_type %d ps 0x%x dst %s\n", res->ai_flags, res->ai_qp_type,
	       res->ai_port_space, addr_str(res->ai_dst_addr));
	rdma_freeaddrinfo(res);

	/* An id moves to another channel with the event it has queued. */
	struct rdma_event_channel *ch2 = rdma_create_event_channel();
	if (!ch2) FAIL("rdma_create_event_channel");
	CHECK(rdma_create_id(ch, &a, NULL, RDMA_PS_TCP));
	s = sin_of("10.100.0.3", 1);
	CHECK(rdma_resolve_addr(a, NULL, (struct sockaddr *)&s, 100));
	CHECK(rdma_migrate_id(a, ch2));
	printf("old channel after the move: %s\n", err(rdma_get_cm_event(ch, &ev)));
	rdma_ack_cm_event(expect(ch2, RDMA_CM_EVENT_ADDR_RESOLVED, "moved"));
	printf("moved id's channel is the new one %d\n", a->channel == ch2);
	CHECK(rdma_destroy_id(a));
	rdma_destroy_event_channel(ch2);

	printf("rsocket: %s\n", rsocket(AF_INET, SOCK_STREAM, 0) < 0 ? err(-1) : "made");
	rdma_destroy_event_channel(ch);
	printf("done\n");
	return 0;
}
