/* Memory windows through the C ABI: a type 2 window bound with ibv_wr_bind_mw on an
 * extended RC QP, written through by the peer with ibv_post_send, invalidated by the
 * peer's ibv_wr_send_inv, bound again and invalidated with ibv_wr_local_inv; the peer's
 * write under the invalidated rkey then fails. Two RC QPs on one device, each with its
 * own CQ. */
#include "util.h"

static int connect(struct ibv_qp *qp, uint32_t dest, union ibv_gid *gid)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1,
				 .qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ };
	if ((errno = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
						   IBV_QP_ACCESS_FLAGS)))
		return -1;
	struct ibv_qp_attr r = {
		.qp_state = IBV_QPS_RTR, .path_mtu = IBV_MTU_1024, .dest_qp_num = dest,
		.max_dest_rd_atomic = 1, .min_rnr_timer = 1,
		.ah_attr = { .is_global = 1, .port_num = 1,
			     .grh = { .dgid = *gid, .sgid_index = 1, .hop_limit = 64 } },
	};
	if ((errno = ibv_modify_qp(qp, &r, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
						   IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
						   IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER)))
		return -1;
	struct ibv_qp_attr s = { .qp_state = IBV_QPS_RTS, .timeout = 14, .retry_cnt = 1,
				 .rnr_retry = 1, .max_rd_atomic = 1 };
	if ((errno = ibv_modify_qp(qp, &s, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
						   IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
						   IBV_QP_MAX_QP_RD_ATOMIC)))
		return -1;
	return 0;
}

static void poll_one(struct ibv_cq *cq, const char *who)
{
	struct ibv_wc wc;
	int n;
	while ((n = ibv_poll_cq(cq, 1, &wc)) == 0)
		;
	if (n < 0) {
		printf("%s: poll failed\n", who);
		return;
	}
	printf("%s: wr_id %llu %s opcode %d byte_len %u\n", who, (unsigned long long)wc.wr_id,
	       ibv_wc_status_str(wc.status), wc.status ? 0 : wc.opcode, wc.byte_len);
}

static int write_through(struct ibv_qp *qp, struct ibv_mr *local, char *src, uint64_t wr_id,
			 uint64_t addr, uint32_t rkey)
{
	struct ibv_sge sge = { .addr = (uintptr_t)src, .length = 8, .lkey = local->lkey };
	struct ibv_send_wr wr = { .wr_id = wr_id, .sg_list = &sge, .num_sge = 1,
				  .opcode = IBV_WR_RDMA_WRITE, .send_flags = IBV_SEND_SIGNALED,
				  .wr.rdma = { .remote_addr = addr, .rkey = rkey } }, *bad;
	return ibv_post_send(qp, &wr, &bad);
}

int main(void)
{
	struct ibv_device **list;
	struct ibv_context *ctx = open_first_device(&list);
	if (!ctx) return 1;
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	static char win[4096], mine[4096];
	struct ibv_mr *mr = pd ? ibv_reg_mr(pd, win, sizeof win,
					    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND) : NULL;
	struct ibv_mr *local = mr ? ibv_reg_mr(pd, mine, sizeof mine, IBV_ACCESS_LOCAL_WRITE) : NULL;
	struct ibv_cq *cq_a = local ? ibv_create_cq(ctx, 16, NULL, NULL, 0) : NULL;
	struct ibv_cq *cq_b = cq_a ? ibv_create_cq(ctx, 16, NULL, NULL, 0) : NULL;
	union ibv_gid gid;
	if (!cq_b || ibv_query_gid(ctx, 1, 1, &gid)) FAIL("setup");

	struct ibv_qp *qp[2];
	struct ibv_cq *cqs[2] = { cq_a, cq_b };
	for (int i = 0; i < 2; i++) {
		struct ibv_qp_init_attr_ex ia = {
			.send_cq = cqs[i], .recv_cq = cqs[i], .qp_type = IBV_QPT_RC,
			.cap = { .max_send_wr = 8, .max_recv_wr = 8, .max_send_sge = 1,
				 .max_recv_sge = 1 },
			.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
			.pd = pd,
			.send_ops_flags = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_RDMA_WRITE |
					  IBV_QP_EX_WITH_BIND_MW | IBV_QP_EX_WITH_LOCAL_INV |
					  IBV_QP_EX_WITH_SEND_WITH_INV,
		};
		qp[i] = ibv_create_qp_ex(ctx, &ia);
		if (!qp[i]) FAIL("ibv_create_qp_ex");
	}
	if (connect(qp[0], qp[1]->qp_num, &gid) || connect(qp[1], qp[0]->qp_num, &gid))
		FAIL("connect");
	struct ibv_qp_ex *ax = ibv_qp_to_qp_ex(qp[0]), *bx = ibv_qp_to_qp_ex(qp[1]);

	struct ibv_mw *mw = ibv_alloc_mw(pd, IBV_MW_TYPE_2);
	if (!mw) FAIL("ibv_alloc_mw");
	printf("type %d\n", mw->type);
	struct ibv_mw_bind_info info = { .mr = mr, .addr = (uintptr_t)win + 1024, .length = 256,
					 .mw_access_flags = IBV_ACCESS_REMOTE_WRITE };

	uint32_t rkey = ibv_inc_rkey(mw->rkey);
	ibv_wr_start(bx);
	bx->wr_id = 1;
	bx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_bind_mw(bx, mw, rkey, &info);
	printf("bind: %s\n", strerror(ibv_wr_complete(bx)));
	poll_one(cq_b, "b");
	mw->rkey = rkey; /* the bind completed: the window has its new rkey */

	strcpy(mine, "windowed");
	printf("write: %s\n", strerror(write_through(qp[0], local, mine, 2,
						    (uintptr_t)win + 1024, mw->rkey)));
	poll_one(cq_a, "a");
	printf("landed \"%s\"\n", win + 1024);

	struct ibv_sge rsge = { .addr = (uintptr_t)mine + 2048, .length = 64, .lkey = local->lkey };
	struct ibv_recv_wr rwr = { .wr_id = 10, .sg_list = &rsge, .num_sge = 1 }, *rbad;
	if ((errno = ibv_post_recv(qp[1], &rwr, &rbad))) FAIL("ibv_post_recv");
	ibv_wr_start(ax);
	ax->wr_id = 3;
	ax->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_send_inv(ax, mw->rkey);
	ibv_wr_set_sge(ax, local->lkey, (uintptr_t)mine, 4);
	printf("send_inv: %s\n", strerror(ibv_wr_complete(ax)));
	poll_one(cq_a, "a");
	struct ibv_wc wc;
	while (ibv_poll_cq(cq_b, 1, &wc) == 0)
		;
	/* The default host is an mlx5: IBV_WC_WITH_INV (0x8) and no GRH flag on RC; an rxe
	 * flags it 0x5, IB_WC_WITH_INVALIDATE read as IP_CSUM_OK (docs/divergences.md,
	 * row 52). */
	printf("b: wr_id %llu %s opcode %d flags 0x%x invalidated the window's rkey %d\n",
	       (unsigned long long)wc.wr_id, ibv_wc_status_str(wc.status), wc.opcode, wc.wc_flags,
	       wc.invalidated_rkey == mw->rkey);

	rkey = ibv_inc_rkey(mw->rkey);
	ibv_wr_start(bx);
	bx->wr_id = 4;
	bx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_bind_mw(bx, mw, rkey, &info);
	bx->wr_id = 5;
	ibv_wr_local_inv(bx, rkey);
	printf("bind and local_inv: %s\n", strerror(ibv_wr_complete(bx)));
	poll_one(cq_b, "b");
	poll_one(cq_b, "b");
	mw->rkey = rkey;

	printf("write: %s\n", strerror(write_through(qp[0], local, mine, 6,
						    (uintptr_t)win + 1024, mw->rkey)));
	poll_one(cq_a, "a");

	printf("dealloc_mw: %d\n", ibv_dealloc_mw(mw));
	if (ibv_destroy_qp(qp[0]) || ibv_destroy_qp(qp[1]) || ibv_destroy_cq(cq_a) ||
	    ibv_destroy_cq(cq_b) || ibv_dereg_mr(local) || ibv_dereg_mr(mr) ||
	    ibv_dealloc_pd(pd) || ibv_close_device(ctx))
		FAIL("teardown");
	ibv_free_device_list(list);
	printf("done\n");
	return 0;
}
