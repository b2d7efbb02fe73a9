/* ibv_resize_cq on the emulated NIC: a CQ grows and shrinks to the rounded size, keeps
 * the completions it holds, and refuses to shrink below them (EINVAL, as rxe). Prints
 * what it saw; exits non-zero at the first failing call, naming it. */
#include "util.h"

int main(void)
{
	static char buf[4096];
	struct base b;
	if (open_base(&b, buf, sizeof buf)) return 1;
	struct ibv_comp_channel *ch = ibv_create_comp_channel(b.ctx);
	if (!ch) FAIL("ibv_create_comp_channel");
	struct ibv_cq *cq = ibv_create_cq(b.ctx, 4, NULL, ch, 0);
	if (!cq) FAIL("ibv_create_cq");
	printf("created: cqe %d\n", cq->cqe);
	int r = ibv_resize_cq(cq, 20);
	printf("resize to 20: %d, cqe %d\n", r, cq->cqe);
	struct ibv_qp *qp = ud_qp(b.pd, cq, NULL);
	struct ibv_ah *ah = self_ah(b.ctx, b.pd);
	if (!qp || !ah) FAIL("UD QP and AH");

	/* Three signaled sends to a QP number nobody has: three send completions. */
	struct ibv_sge sge = { .addr = (uintptr_t)buf, .length = 8, .lkey = b.mr->lkey };
	struct ibv_send_wr wr[3], *bad;
	for (int i = 0; i < 3; i++)
		wr[i] = (struct ibv_send_wr){
			.wr_id = 10 + i, .next = i < 2 ? &wr[i + 1] : NULL, .sg_list = &sge,
			.num_sge = 1, .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED,
			.wr.ud = { .ah = ah, .remote_qpn = 0xfffff0, .remote_qkey = QKEY },
		};
	if ((errno = ibv_req_notify_cq(cq, 0))) FAIL("ibv_req_notify_cq");
	if ((errno = ibv_post_send(qp, wr, &bad))) FAIL("ibv_post_send");
	struct ibv_cq *ev_cq;
	void *ev_ctx;
	if (ibv_get_cq_event(ch, &ev_cq, &ev_ctx)) FAIL("ibv_get_cq_event");
	ibv_ack_cq_events(cq, 1);

	r = ibv_resize_cq(cq, 2);
	printf("resize to 2 with 3 waiting: %s, cqe %d\n", strerror(r), cq->cqe);
	r = ibv_resize_cq(cq, 3);
	printf("resize to 3: %d, cqe %d\n", r, cq->cqe);
	printf("resize to 0: %s\n", strerror(ibv_resize_cq(cq, 0)));
	struct ibv_wc wc[4];
	int k = ibv_poll_cq(cq, 4, wc);
	printf("polled %d:", k);
	for (int i = 0; i < k; i++)
		printf(" %llu/%d", (unsigned long long)wc[i].wr_id, wc[i].status);
	printf("\n");
	if (ibv_destroy_qp(qp) || ibv_destroy_ah(ah) || ibv_destroy_cq(cq) ||
	    ibv_destroy_comp_channel(ch) || ibv_dereg_mr(b.mr) || ibv_dealloc_pd(b.pd) ||
	    ibv_close_device(b.ctx))
		FAIL("teardown");
	ibv_free_device_list(b.list);
	return 0;
}
