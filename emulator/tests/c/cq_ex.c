/* An extended CQ: ibv_create_cq_ex with the standard wc_flags, a UD message with
 * immediate data to itself, and the poll session (ibv_start_poll, ibv_next_poll,
 * ibv_wc_read_*, ibv_end_poll) through the ibv_cq_ex function pointers. Asking for
 * completion timestamps is refused with EOPNOTSUPP. */
#include "util.h"

int main(void)
{
	static char buf[4096];
	struct base b;
	if (open_base(&b, buf, sizeof buf)) return 1;

	struct ibv_cq_init_attr_ex ts = { .cqe = 4, .wc_flags = IBV_WC_EX_WITH_COMPLETION_TIMESTAMP };
	errno = 0;
	printf("timestamps: %s\n", ibv_create_cq_ex(b.ctx, &ts) ? "ok" : strerror(errno));

	struct ibv_cq_init_attr_ex a = {
		.cqe = 8,
		.wc_flags = IBV_WC_EX_WITH_BYTE_LEN | IBV_WC_EX_WITH_IMM | IBV_WC_EX_WITH_QP_NUM |
			    IBV_WC_EX_WITH_SRC_QP,
	};
	struct ibv_cq_ex *cq = ibv_create_cq_ex(b.ctx, &a);
	if (!cq) FAIL("ibv_create_cq_ex");
	struct ibv_qp *qp = ud_qp(b.pd, ibv_cq_ex_to_cq(cq), NULL);
	struct ibv_ah *ah = qp ? self_ah(b.ctx, b.pd) : NULL;
	if (!ah) FAIL("UD QP");

	struct ibv_sge rsge = { .addr = (uintptr_t)buf + 2048, .length = 2048, .lkey = b.mr->lkey };
	struct ibv_recv_wr rwr = { .wr_id = 7, .sg_list = &rsge, .num_sge = 1 }, *bad_r;
	if ((errno = ibv_post_recv(qp, &rwr, &bad_r))) FAIL("ibv_post_recv");
	strcpy(buf, "extended");
	struct ibv_sge ssge = { .addr = (uintptr_t)buf, .length = 9, .lkey = b.mr->lkey };
	struct ibv_send_wr swr = {
		.wr_id = 9, .sg_list = &ssge, .num_sge = 1, .opcode = IBV_WR_SEND_WITH_IMM,
		.send_flags = IBV_SEND_SIGNALED, .imm_data = htobe32(0x600d),
		.wr.ud = { .ah = ah, .remote_qpn = qp->qp_num, .remote_qkey = QKEY },
	}, *bad_s;
	if ((errno = ibv_post_send(qp, &swr, &bad_s))) FAIL("ibv_post_send");

	struct ibv_poll_cq_attr pa = {};
	int seen = 0, rc;
	while ((rc = ibv_start_poll(cq, &pa)) == ENOENT)
		;
	if (rc) { errno = rc; FAIL("ibv_start_poll"); }
	for (;;) {
		printf("wr_id %llu status %s opcode %d byte_len %u qp_is_self %d",
		       (unsigned long long)cq->wr_id, ibv_wc_status_str(cq->status), ibv_wc_read_opcode(cq),
		       ibv_wc_read_byte_len(cq), ibv_wc_read_qp_num(cq) == qp->qp_num);
		if (ibv_wc_read_wc_flags(cq) & IBV_WC_WITH_IMM)
			printf(" imm 0x%x src_qp_is_self %d", be32toh(ibv_wc_read_imm_data(cq)),
			       ibv_wc_read_src_qp(cq) == qp->qp_num);
		printf("\n");
		if (++seen == 2)
			break;
		while ((rc = ibv_next_poll(cq)) == ENOENT)
			;
		if (rc) { errno = rc; FAIL("ibv_next_poll"); }
	}
	ibv_end_poll(cq);

	if (ibv_destroy_qp(qp) || ibv_destroy_ah(ah) || ibv_destroy_cq(ibv_cq_ex_to_cq(cq)) ||
	    ibv_dereg_mr(b.mr) || ibv_dealloc_pd(b.pd) || ibv_close_device(b.ctx))
		FAIL("teardown");
	ibv_free_device_list(b.list);
	printf("done\n");
	return 0;
}
