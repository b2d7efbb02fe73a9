/* UD through the emulated librdmacm in one process: a UDP-port-space listener answers a
 * SIDR request (the client's ESTABLISHED carries the listener's QPN, Q_Key and address
 * vector, and a datagram sent with them arrives), then two ids join a multicast group and
 * one receives what the other sends to the group with the join's address vector. */
#include "cm_util.h"

struct node {
	struct rdma_cm_id *id;
	struct ibv_pd *pd;
	struct ibv_mr *mr;
	char buf[512];
};

/* A UD QP on the id, its memory registered, a receive posted at buf + 256. */
static int setup(struct node *n)
{
	n->pd = ibv_alloc_pd(n->id->verbs);
	if (!n->pd) FAIL("ibv_alloc_pd");
	n->mr = ibv_reg_mr(n->pd, n->buf, sizeof n->buf, IBV_ACCESS_LOCAL_WRITE);
	if (!n->mr) FAIL("ibv_reg_mr");
	struct ibv_qp_init_attr qa = {
		.qp_type = IBV_QPT_UD, .sq_sig_all = 1,
		.cap = { .max_send_wr = 2, .max_recv_wr = 2, .max_send_sge = 1, .max_recv_sge = 1 },
	};
	CHECK(rdma_create_qp(n->id, n->pd, &qa));
	struct ibv_sge sge = { .addr = (uintptr_t)n->buf + 256, .length = 256, .lkey = n->mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = 1, .sg_list = &sge, .num_sge = 1 }, *bad;
	CHECK(ibv_post_recv(n->id->qp, &wr, &bad));
	return 0;
}

/* Sends `text` from `from` to (ah, qpn, qkey); prints what `to` receives (after the GRH). */
static int datagram(struct node *from, struct node *to, struct ibv_ah_attr *ah_attr,
		    uint32_t qpn, uint32_t qkey, const char *text)
{
	struct ibv_ah *ah = ibv_create_ah(from->pd, ah_attr);
	if (!ah) FAIL("ibv_create_ah");
	strcpy(from->buf, text);
	struct ibv_sge sge = { .addr = (uintptr_t)from->buf, .length = (uint32_t)strlen(text) + 1, .lkey = from->mr->lkey };
	struct ibv_send_wr wr = {
		.wr_id = 2, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND,
		.wr.ud = { .ah = ah, .remote_qpn = qpn, .remote_qkey = qkey },
	}, *bad;
	CHECK(ibv_post_send(from->id->qp, &wr, &bad));
	struct ibv_wc wc;
	if (!one_wc(to->id->recv_cq, &wc)) FAIL("receive");
	printf("received %s len %u from qp %s \"%s\"\n", ibv_wc_status_str(wc.status), wc.byte_len,
	       wc.src_qp == from->id->qp->qp_num ? "of the sender" : "unknown", to->buf + 256 + 40);
	if (!one_wc(from->id->send_cq, &wc)) FAIL("send completion");
	CHECK(ibv_destroy_ah(ah));
	return 0;
}

static void teardown(struct node *n)
{
	rdma_destroy_qp(n->id);
	ibv_dereg_mr(n->mr);
	ibv_dealloc_pd(n->pd);
	rdma_destroy_id(n->id);
}

int main(void)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	if (!ch) FAIL("rdma_create_event_channel");
	struct rdma_cm_id *listener;
	CHECK(rdma_create_id(ch, &listener, NULL, RDMA_PS_UDP));
	struct sockaddr_in s = sin_of("10.100.0.1", 7500);
	CHECK(rdma_bind_addr(listener, (struct sockaddr *)&s));
	CHECK(rdma_listen(listener, 1));

	struct node client = {0}, server = {0};
	CHECK(rdma_create_id(ch, &client.id, NULL, RDMA_PS_UDP));
	CHECK(rdma_resolve_addr(client.id, NULL, (struct sockaddr *)&s, 2000));
	rdma_ack_cm_event(expect(ch, RDMA_CM_EVENT_ADDR_RESOLVED, "client"));
	CHECK(rdma_resolve_route(client.id, 2000));
	rdma_ack_cm_event(expect(ch, RDMA_CM_EVENT_ROUTE_RESOLVED, "client"));
	if (setup(&client)) return 1;
	printf("client qp type %d state %d\n", client.id->qp->qp_type, client.id->qp->state);
	struct rdma_conn_param cp = { .private_data = "sidr", .private_data_len = 5 };
	CHECK(rdma_connect(client.id, &cp));
	struct rdma_cm_event *ev = expect(ch, RDMA_CM_EVENT_CONNECT_REQUEST, "server");
	server.id = ev->id;
	printf("request private data %d bytes \"%s\"\n", ev->param.ud.private_data_len,
	       (const char *)ev->param.ud.private_data);
	rdma_ack_cm_event(ev);
	if (setup(&server)) return 1;
	CHECK(rdma_accept(server.id, NULL));
	ev = expect(ch, RDMA_CM_EVENT_ESTABLISHED, "client");
	struct rdma_ud_param ud = ev->param.ud;
	printf("qp_num is the server's %d, qkey 0x%x, dgid %s, sgid_index %d, is_global %d\n",
	       ud.qp_num == server.id->qp->qp_num, ud.qkey, gid_str(&ud.ah_attr.grh.dgid),
	       ud.ah_attr.grh.sgid_index, ud.ah_attr.is_global);
	rdma_ack_cm_event(ev);
	if (datagram(&client, &server, &ud.ah_attr, ud.qp_num, ud.qkey, "over SIDR")) return 1;
	teardown(&server);
	teardown(&client);
	CHECK(rdma_destroy_id(listener));

	/* Two members of a group: a sends to the group, b receives. */
	struct node a = {0}, b = {0};
	struct sockaddr_in group = sin_of("239.1.2.3", 0), src = sin_of("10.100.0.1", 0);
	struct node *members[2] = { &a, &b };
	struct rdma_ud_param join = {0};
	for (int i = 0; i < 2; i++) {
		struct node *m = members[i];
		CHECK(rdma_create_id(ch, &m->id, NULL, RDMA_PS_UDP));
		CHECK(rdma_resolve_addr(m->id, (struct sockaddr *)&src, (struct sockaddr *)&group, 2000));
		rdma_ack_cm_event(expect(ch, RDMA_CM_EVENT_ADDR_RESOLVED, "member"));
		if (setup(m)) return 1;
		CHECK(rdma_join_multicast(m->id, (struct sockaddr *)&group, m));
		ev = expect(ch, RDMA_CM_EVENT_MULTICAST_JOIN, "member");
		printf("join of %s: dgid %s qp_num 0x%x qkey 0x%x hop_limit %d sgid_index %d\n",
		       ev->param.ud.private_data == &a ? "a" : ev->param.ud.private_data == &b ? "b" : "?",
		       gid_str(&ev->param.ud.ah_attr.grh.dgid), ev->param.ud.qp_num, ev->param.ud.qkey,
		       ev->param.ud.ah_attr.grh.hop_limit, ev->param.ud.ah_attr.grh.sgid_index);
		if (i == 0)
			join = ev->param.ud;
		rdma_ack_cm_event(ev);
	}
	if (datagram(&a, &b, &join.ah_attr, join.qp_num, join.qkey, "to the group")) return 1;
	for (int i = 0; i < 2; i++) {
		CHECK(rdma_leave_multicast(members[i]->id, (struct sockaddr *)&group));
		teardown(members[i]);
	}
	rdma_destroy_event_channel(ch);
	printf("done\n");
	return 0;
}
