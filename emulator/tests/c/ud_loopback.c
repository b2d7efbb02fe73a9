/* A UD QP sends to itself through the emulated NIC, the way a verbs program does it:
 * the static-inline ibv_post_recv/ibv_post_send/ibv_req_notify_cq/ibv_poll_cq (through
 * ctx->ops), a completion channel whose fd is waited on with poll(2), ibv_get_cq_event
 * and ibv_ack_cq_events. Built against Debian's libibverbs headers and link library;
 * run with the emulator first on LD_LIBRARY_PATH. Prints what it saw; exits non-zero
 * at the first failing call, naming it. */
#include "util.h"
#include <poll.h>

int main(void)
{
	static char buf[4096];
	struct base b;
	if (open_base(&b, buf, sizeof buf)) return 1;
	struct ibv_comp_channel *ch = ibv_create_comp_channel(b.ctx);
	if (!ch) FAIL("ibv_create_comp_channel");
	struct ibv_cq *cq = ibv_create_cq(b.ctx, 16, (void *)0x1234, ch, 0);
	if (!cq) FAIL("ibv_create_cq");
	struct ibv_qp *qp = ud_qp(b.pd, cq, NULL);
	if (!qp) FAIL("UD QP");
	printf("qp state %d\n", qp->state);

	struct ibv_ah *ah = self_ah(b.ctx, b.pd);
	if (!ah) FAIL("ibv_create_ah");

	struct ibv_sge rsge = { .addr = (uintptr_t)buf + 1024, .length = 1024, .lkey = b.mr->lkey };
	struct ibv_recv_wr rwr = { .wr_id = 7, .sg_list = &rsge, .num_sge = 1 }, *bad_r;
	if ((errno = ibv_post_recv(qp, &rwr, &bad_r))) FAIL("ibv_post_recv");
	if ((errno = ibv_req_notify_cq(cq, 0))) FAIL("ibv_req_notify_cq");

	strcpy(buf, "hello through the emulated NIC");
	struct ibv_sge ssge = { .addr = (uintptr_t)buf, .length = (uint32_t)strlen(buf) + 1, .lkey = b.mr->lkey };
	struct ibv_send_wr swr = {
		.wr_id = 9, .sg_list = &ssge, .num_sge = 1, .opcode = IBV_WR_SEND_WITH_IMM,
		.send_flags = IBV_SEND_SIGNALED, .imm_data = htobe32(0xabcd0123),
		.wr.ud = { .ah = ah, .remote_qpn = qp->qp_num, .remote_qkey = QKEY },
	}, *bad_s;
	if ((errno = ibv_post_send(qp, &swr, &bad_s))) FAIL("ibv_post_send");

	struct pollfd pfd = { .fd = ch->fd, .events = POLLIN };
	int r = poll(&pfd, 1, 10000);
	if (r != 1) FAIL("poll on the completion channel");
	struct ibv_cq *ev_cq;
	void *ev_ctx;
	if (ibv_get_cq_event(ch, &ev_cq, &ev_ctx)) FAIL("ibv_get_cq_event");
	printf("event on our cq %d, cq_context %p\n", ev_cq == cq, ev_ctx);
	ibv_ack_cq_events(cq, 1);

	struct ibv_wc wc[4];
	int got = 0;
	while (got < 2) {
		int k = ibv_poll_cq(cq, 4 - got, wc + got);
		if (k < 0) FAIL("ibv_poll_cq");
		got += k;
	}
	for (int i = 0; i < got; i++) {
		struct ibv_wc *w = &wc[i];
		printf("wc wr_id %llu status %s opcode %d byte_len %u", (unsigned long long)w->wr_id,
		       ibv_wc_status_str(w->status), w->opcode, w->byte_len);
		if (w->wc_flags & IBV_WC_WITH_IMM)
			printf(" imm 0x%08x src_qp_is_self %d", be32toh(w->imm_data), w->src_qp == qp->qp_num);
		printf("\n");
	}
	printf("payload \"%s\"\n", buf + 1024 + 40);

	/* The reply address, from the receive's completion and its GRH area. */
	struct ibv_wc *rwc = wc[0].opcode & IBV_WC_RECV ? &wc[0] : &wc[1];
	struct ibv_ah_attr reply;
	if (ibv_init_ah_from_wc(b.ctx, 1, rwc, (struct ibv_grh *)(buf + 1024), &reply))
		FAIL("ibv_init_ah_from_wc");
	union ibv_gid own;
	if (ibv_query_gid(b.ctx, 1, 1, &own)) FAIL("ibv_query_gid");
	printf("reply is_global %d dgid_is_own %d sgid_index %d hop_limit %d port %d\n", reply.is_global,
	       !memcmp(&reply.grh.dgid, &own, sizeof own), reply.grh.sgid_index, reply.grh.hop_limit,
	       reply.port_num);
	struct ibv_ah *reply_ah = ibv_create_ah_from_wc(b.pd, rwc, (struct ibv_grh *)(buf + 1024), 1);
	if (!reply_ah || ibv_destroy_ah(reply_ah)) FAIL("ibv_create_ah_from_wc");

	if (ibv_destroy_qp(qp) || ibv_destroy_ah(ah) || ibv_destroy_cq(cq) ||
	    ibv_destroy_comp_channel(ch) || ibv_dereg_mr(b.mr) || ibv_dealloc_pd(b.pd) ||
	    ibv_close_device(b.ctx))
		FAIL("teardown");
	ibv_free_device_list(b.list);
	printf("done\n");
	return 0;
}
