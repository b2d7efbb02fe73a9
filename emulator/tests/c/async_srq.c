/* A context's async events through its async_fd: a UD QP on a shared receive queue
 * whose limit is armed; a message to itself takes a receive below the limit, and
 * IBV_EVENT_SRQ_LIMIT_REACHED arrives on ctx->async_fd (waited on with poll(2)).
 * Prints what it saw; exits non-zero at the first failing call. */
#include "util.h"
#include <poll.h>

int main(void)
{
	static char buf[8192];
	struct base b;
	if (open_base(&b, buf, sizeof buf)) return 1;
	struct ibv_cq *cq = ibv_create_cq(b.ctx, 16, NULL, NULL, 0);
	if (!cq) FAIL("ibv_create_cq");
	struct ibv_srq_init_attr si = { .srq_context = (void *)0x5151, .attr = { .max_wr = 8, .max_sge = 1 } };
	struct ibv_srq *srq = ibv_create_srq(b.pd, &si);
	if (!srq) FAIL("ibv_create_srq");
	printf("srq max_wr >= 8: %d\n", si.attr.max_wr >= 8);
	struct ibv_qp *qp = ud_qp(b.pd, cq, srq);
	if (!qp) FAIL("UD QP on the SRQ");
	struct ibv_ah *ah = self_ah(b.ctx, b.pd);
	if (!ah) FAIL("ibv_create_ah");

	for (int i = 0; i < 2; i++) {
		struct ibv_sge sge = { .addr = (uintptr_t)buf + 4096 + 1024 * i, .length = 1024, .lkey = b.mr->lkey };
		struct ibv_recv_wr wr = { .wr_id = 100 + i, .sg_list = &sge, .num_sge = 1 }, *bad;
		if ((errno = ibv_post_srq_recv(srq, &wr, &bad))) FAIL("ibv_post_srq_recv");
	}
	struct ibv_srq_attr sa = { .srq_limit = 2 };
	if ((errno = ibv_modify_srq(srq, &sa, IBV_SRQ_LIMIT))) FAIL("ibv_modify_srq");

	strcpy(buf, "below the limit");
	struct ibv_sge sge = { .addr = (uintptr_t)buf, .length = 16, .lkey = b.mr->lkey };
	struct ibv_send_wr wr = {
		.wr_id = 1, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND,
		.send_flags = IBV_SEND_SIGNALED,
		.wr.ud = { .ah = ah, .remote_qpn = qp->qp_num, .remote_qkey = QKEY },
	}, *bad;
	if ((errno = ibv_post_send(qp, &wr, &bad))) FAIL("ibv_post_send");

	struct pollfd pfd = { .fd = b.ctx->async_fd, .events = POLLIN };
	if (poll(&pfd, 1, 10000) != 1) FAIL("poll on async_fd");
	struct ibv_async_event ev;
	if (ibv_get_async_event(b.ctx, &ev)) FAIL("ibv_get_async_event");
	printf("async event \"%s\" on our srq %d\n", ibv_event_type_str(ev.event_type), ev.element.srq == srq);
	ibv_ack_async_event(&ev);
	if (ibv_query_srq(srq, &sa)) FAIL("ibv_query_srq");
	printf("limit after the event %u\n", sa.srq_limit);

	struct ibv_wc wc[2];
	int got = 0;
	while (got < 2) {
		int k = ibv_poll_cq(cq, 2 - got, wc + got);
		if (k < 0) FAIL("ibv_poll_cq");
		got += k;
	}
	for (int i = 0; i < 2; i++)
		printf("wc wr_id %llu %s\n", (unsigned long long)wc[i].wr_id, ibv_wc_status_str(wc[i].status));
	printf("payload \"%s\"\n", buf + 4096 + 40);

	if (ibv_destroy_qp(qp) || ibv_destroy_srq(srq) || ibv_destroy_ah(ah) || ibv_destroy_cq(cq) ||
	    ibv_dereg_mr(b.mr) || ibv_dealloc_pd(b.pd) || ibv_close_device(b.ctx))
		FAIL("teardown");
	ibv_free_device_list(b.list);
	printf("done\n");
	return 0;
}
