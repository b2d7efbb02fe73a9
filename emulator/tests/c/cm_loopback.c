/* Two ids of one process connect through the emulated librdmacm, the way rping does it:
 * a listener on 10.100.0.1:7471, a client resolving the address and the route, QPs made
 * by rdma_create_qp, connect/accept with private data, a message each way over the RC
 * connection, then disconnect from both sides and tear-down. Built against Debian's
 * librdmacm headers; prints what it saw; exits non-zero at the first failing call. */
#include "cm_util.h"
#include <poll.h>

int main(void)
{
	struct rdma_event_channel *sch = rdma_create_event_channel();
	struct rdma_event_channel *cch = rdma_create_event_channel();
	if (!sch || !cch) FAIL("rdma_create_event_channel");
	struct rdma_cm_id *listener, *client;
	CHECK(rdma_create_id(sch, &listener, (void *)0x5e, RDMA_PS_TCP));
	CHECK(rdma_create_id(cch, &client, (void *)0xc1, RDMA_PS_TCP));

	struct sockaddr_in here = sin_of("10.100.0.1", 7471);
	CHECK(rdma_bind_addr(listener, (struct sockaddr *)&here));
	printf("listener bound to %s, device %s, port %d\n",
	       addr_str(rdma_get_local_addr(listener)),
	       ibv_get_device_name(listener->verbs->device), listener->port_num);
	CHECK(rdma_listen(listener, 4));

	CHECK(rdma_resolve_addr(client, NULL, (struct sockaddr *)&here, 2000));
	struct pollfd pfd = { .fd = cch->fd, .events = POLLIN };
	printf("client channel readable %d\n", poll(&pfd, 1, 10000));
	rdma_ack_cm_event(expect(cch, RDMA_CM_EVENT_ADDR_RESOLVED, "client"));
	printf("client %s -> %s, same context as the listener %d\n",
	       addr_str(rdma_get_local_addr(client)), addr_str(rdma_get_peer_addr(client)),
	       client->verbs == listener->verbs);
	CHECK(rdma_resolve_route(client, 2000));
	rdma_ack_cm_event(expect(cch, RDMA_CM_EVENT_ROUTE_RESOLVED, "client"));
	struct ibv_sa_path_rec *p = client->route.path_rec;
	printf("paths %d: %s -> %s mtu %d hop_limit %d life %d pkey 0x%x\n",
	       client->route.num_paths, gid_str(&p->sgid), gid_str(&p->dgid), p->mtu,
	       p->hop_limit, p->packet_life_time, ntohs(p->pkey));

	static char cbuf[256], sbuf[256];
	struct ibv_pd *cpd = ibv_alloc_pd(client->verbs);
	if (!cpd) FAIL("ibv_alloc_pd");
	struct ibv_mr *cmr = ibv_reg_mr(cpd, cbuf, sizeof cbuf, IBV_ACCESS_LOCAL_WRITE);
	if (!cmr) FAIL("ibv_reg_mr");
	struct ibv_qp_init_attr qa = {
		.qp_type = IBV_QPT_RC, .sq_sig_all = 1,
		.cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1 },
	};
	CHECK(rdma_create_qp(client, cpd, &qa));
	printf("client qp state %d, cqs made for it %d\n", client->qp->state,
	       client->send_cq != NULL && client->recv_cq != NULL);
	struct ibv_sge csge = { .addr = (uintptr_t)cbuf + 128, .length = 128, .lkey = cmr->lkey };
	struct ibv_recv_wr crwr = { .wr_id = 21, .sg_list = &csge, .num_sge = 1 }, *bad_r;
	CHECK(ibv_post_recv(client->qp, &crwr, &bad_r));

	const char hello[] = "hello from the client";
	struct rdma_conn_param cp = {
		.private_data = hello, .private_data_len = sizeof hello,
		.responder_resources = 1, .initiator_depth = 1, .retry_count = 7, .rnr_retry_count = 7,
	};
	CHECK(rdma_connect(client, &cp));

	struct rdma_cm_event *ev = expect(sch, RDMA_CM_EVENT_CONNECT_REQUEST, "server");
	struct rdma_cm_id *child = ev->id;
	printf("request on the listener %d, context %p, private data %d bytes \"%s\", "
	       "responder_resources %d initiator_depth %d, peer %s\n",
	       ev->listen_id == listener, child->context, ev->param.conn.private_data_len,
	       (const char *)ev->param.conn.private_data, ev->param.conn.responder_resources,
	       ev->param.conn.initiator_depth, addr_str(rdma_get_peer_addr(child)));
	printf("peer port is the client's %d\n", rdma_get_dst_port(child) == rdma_get_src_port(client));
	rdma_ack_cm_event(ev);

	struct ibv_pd *spd = ibv_alloc_pd(child->verbs);
	if (!spd) FAIL("ibv_alloc_pd");
	struct ibv_mr *smr = ibv_reg_mr(spd, sbuf, sizeof sbuf, IBV_ACCESS_LOCAL_WRITE);
	if (!smr) FAIL("ibv_reg_mr");
	struct ibv_qp_init_attr sa = {
		.qp_type = IBV_QPT_RC, .sq_sig_all = 1,
		.cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1 },
	};
	CHECK(rdma_create_qp(child, spd, &sa));
	struct ibv_sge ssge = { .addr = (uintptr_t)sbuf + 128, .length = 128, .lkey = smr->lkey };
	struct ibv_recv_wr srwr = { .wr_id = 11, .sg_list = &ssge, .num_sge = 1 };
	CHECK(ibv_post_recv(child->qp, &srwr, &bad_r));
	const char welcome[] = "welcome";
	struct rdma_conn_param ap = {
		.private_data = welcome, .private_data_len = sizeof welcome,
		.responder_resources = 1, .initiator_depth = 1, .rnr_retry_count = 7,
	};
	CHECK(rdma_accept(child, &ap));

	ev = expect(cch, RDMA_CM_EVENT_ESTABLISHED, "client");
	printf("reply private data %d bytes \"%s\", client qp state %d\n",
	       ev->param.conn.private_data_len, (const char *)ev->param.conn.private_data,
	       client->qp->state);
	rdma_ack_cm_event(ev);
	rdma_ack_cm_event(expect(sch, RDMA_CM_EVENT_ESTABLISHED, "server"));
	printf("server qp state %d\n", child->qp->state);

	struct ibv_wc wc;
	strcpy(cbuf, "ping over rdma_cm");
	struct ibv_sge send_sge = { .addr = (uintptr_t)cbuf, .length = (uint32_t)strlen(cbuf) + 1, .lkey = cmr->lkey };
	struct ibv_send_wr swr = { .wr_id = 22, .sg_list = &send_sge, .num_sge = 1, .opcode = IBV_WR_SEND }, *bad_s;
	CHECK(ibv_post_send(client->qp, &swr, &bad_s));
	if (!one_wc(child->recv_cq, &wc)) FAIL("server receive");
	printf("server wc wr_id %llu %s len %u \"%s\"\n", (unsigned long long)wc.wr_id,
	       ibv_wc_status_str(wc.status), wc.byte_len, sbuf + 128);
	if (!one_wc(client->send_cq, &wc)) FAIL("client send completion");
	printf("client wc wr_id %llu %s\n", (unsigned long long)wc.wr_id, ibv_wc_status_str(wc.status));
	strcpy(sbuf, "pong");
	send_sge = (struct ibv_sge){ .addr = (uintptr_t)sbuf, .length = 5, .lkey = smr->lkey };
	swr.wr_id = 12;
	CHECK(ibv_post_send(child->qp, &swr, &bad_s));
	if (!one_wc(client->recv_cq, &wc)) FAIL("client receive");
	printf("client wc wr_id %llu %s len %u \"%s\"\n", (unsigned long long)wc.wr_id,
	       ibv_wc_status_str(wc.status), wc.byte_len, cbuf + 128);

	CHECK(rdma_disconnect(client));
	rdma_ack_cm_event(expect(sch, RDMA_CM_EVENT_DISCONNECTED, "server"));
	CHECK(rdma_disconnect(child));
	rdma_ack_cm_event(expect(cch, RDMA_CM_EVENT_DISCONNECTED, "client"));
	printf("qp states after disconnect %d %d\n", client->qp->state, child->qp->state);

	rdma_destroy_qp(child);
	rdma_destroy_qp(client);
	CHECK(ibv_dereg_mr(smr));
	CHECK(ibv_dereg_mr(cmr));
	CHECK(ibv_dealloc_pd(spd));
	CHECK(ibv_dealloc_pd(cpd));
	CHECK(rdma_destroy_id(child));
	CHECK(rdma_destroy_id(client));
	CHECK(rdma_destroy_id(listener));
	rdma_destroy_event_channel(cch);
	rdma_destroy_event_channel(sch);
	printf("done\n");
	return 0;
}
