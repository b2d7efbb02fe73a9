/* An extended QP: ibv_create_qp_ex with send ops, then one ibv_wr_start ..
 * ibv_wr_complete session building a SEND_WITH_IMM from an SGE and a SEND of inline
 * data, both UD to itself. A QP from ibv_create_qp has no ibv_qp_ex; a setter with no
 * request makes the session fail with EINVAL. */
#include "util.h"

int main(void)
{
	static char buf[8192];
	struct base b;
	if (open_base(&b, buf, sizeof buf)) return 1;
	struct ibv_cq *cq = ibv_create_cq(b.ctx, 16, NULL, NULL, 0);
	struct ibv_qp *plain = cq ? ud_qp(b.pd, cq, NULL) : NULL;
	if (!plain) FAIL("setup");
	printf("plain QP has a qp_ex: %d\n", ibv_qp_to_qp_ex(plain) != NULL);

	struct ibv_qp_init_attr_ex ia = {
		.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_UD,
		.cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1,
			 .max_inline_data = 64 },
		.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
		.pd = b.pd,
		.send_ops_flags = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM,
	};
	struct ibv_qp *qp = ud_rts(ibv_create_qp_ex(b.ctx, &ia));
	if (!qp) FAIL("ibv_create_qp_ex");
	struct ibv_qp_ex *qpx = ibv_qp_to_qp_ex(qp);
	struct ibv_ah *ah = self_ah(b.ctx, b.pd);
	if (!qpx || !ah) FAIL("ibv_qp_to_qp_ex");

	for (int i = 0; i < 2; i++) {
		struct ibv_sge r = { .addr = (uintptr_t)buf + 4096 + 1024 * i, .length = 1024, .lkey = b.mr->lkey };
		struct ibv_recv_wr rwr = { .wr_id = 100 + i, .sg_list = &r, .num_sge = 1 }, *bad;
		if ((errno = ibv_post_recv(qp, &rwr, &bad))) FAIL("ibv_post_recv");
	}
	strcpy(buf, "from an sge");
	ibv_wr_start(qpx);
	qpx->wr_id = 1;
	qpx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_send_imm(qpx, htobe32(0x77));
	ibv_wr_set_ud_addr(qpx, ah, qp->qp_num, QKEY);
	ibv_wr_set_sge(qpx, b.mr->lkey, (uintptr_t)buf, 12);
	qpx->wr_id = 2;
	ibv_wr_send(qpx);
	ibv_wr_set_ud_addr(qpx, ah, qp->qp_num, QKEY);
	char note[] = "inline data";
	ibv_wr_set_inline_data(qpx, note, sizeof note);
	strcpy(note, "overwritten"); /* inline data is copied when set */
	printf("wr_complete: %s\n", strerror(ibv_wr_complete(qpx)));

	struct ibv_wc wc[4];
	int got = 0;
	while (got < 4) {
		int n = ibv_poll_cq(cq, 4 - got, wc + got);
		if (n < 0) FAIL("ibv_poll_cq");
		got += n;
	}
	for (int i = 0; i < 4; i++) {
		printf("wr_id %llu %s opcode %d byte_len %u", (unsigned long long)wc[i].wr_id,
		       ibv_wc_status_str(wc[i].status), wc[i].opcode, wc[i].byte_len);
		if (wc[i].wc_flags & IBV_WC_WITH_IMM)
			printf(" imm 0x%x", be32toh(wc[i].imm_data));
		printf("\n");
	}
	printf("payloads \"%s\" \"%s\"\n", buf + 4096 + 40, buf + 5120 + 40);

	ibv_wr_start(qpx);
	ibv_wr_set_sge(qpx, b.mr->lkey, (uintptr_t)buf, 4);
	printf("setter without a request: %s\n", strerror(ibv_wr_complete(qpx)));

	if (ibv_destroy_qp(qp) || ibv_destroy_qp(plain) || ibv_destroy_ah(ah) || ibv_destroy_cq(cq) ||
	    ibv_dereg_mr(b.mr) || ibv_dealloc_pd(b.pd) || ibv_close_device(b.ctx))
		FAIL("teardown");
	ibv_free_device_list(b.list);
	printf("done\n");
	return 0;
}
