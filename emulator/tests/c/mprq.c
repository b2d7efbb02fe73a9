/* spead2's multi-packet receive queue on the emulated mlx5, written out in C: the
 * striding RQ caps from mlx5dv_query_device, a striding WQ from mlx5dv_create_wq whose
 * ring (mlx5dv_init_obj, MLX5DV_OBJ_RWQ) the program fills with mlx5_mprq_wqe entries
 * and a doorbell record store, an indirection table of it, an RSS RAW_PACKET QP over the
 * table with a flow rule, and an extended CQ whose byte_len is mlx5's packed word.
 * A RAW_PACKET QP on the same device sends the frames (a multicast group loops back).
 * Then a second WQ whose first entry is malformed (a length that is not one WQE's).
 * Prints the caps and each completion; exits non-zero at the first failing call. */
#include "util.h"
#include <arpa/inet.h>
#include <infiniband/mlx5dv.h>
#include <stdatomic.h>

#define LOG_STRIDE 6 /* 64-byte strides */
#define LOG_NUM 9    /* 512 per WQE: 32 KiB */
#define WQE_BYTES (1u << (LOG_STRIDE + LOG_NUM))

struct rule {
	struct ibv_flow_attr attr;
	struct ibv_flow_spec_eth eth;
	struct ibv_flow_spec_ipv4 ipv4;
	struct ibv_flow_spec_tcp_udp udp;
};

static const unsigned char group_mac[6] = { 0x01, 0x00, 0x5e, 0x01, 0x02, 0x03 };

static struct ibv_qp *sender(struct ibv_pd *pd, struct ibv_cq *cq)
{
	struct ibv_qp_init_attr init = {
		.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RAW_PACKET,
		.cap = { .max_send_wr = 64, .max_recv_wr = 1, .max_send_sge = 1, .max_recv_sge = 1 },
	};
	struct ibv_qp *qp = ibv_create_qp(pd, &init);
	if (!qp)
		return NULL;
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1 };
	if ((errno = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PORT)))
		return NULL;
	a.qp_state = IBV_QPS_RTR;
	if ((errno = ibv_modify_qp(qp, &a, IBV_QP_STATE)))
		return NULL;
	a.qp_state = IBV_QPS_RTS;
	if ((errno = ibv_modify_qp(qp, &a, IBV_QP_STATE)))
		return NULL;
	return qp;
}

/* A frame to the group's UDP port `port` with `payload` bytes of `fill`, at `f`. */
static uint32_t frame(unsigned char *f, uint16_t port, uint32_t payload, unsigned char fill)
{
	memcpy(f, group_mac, 6);
	memcpy(f + 6, (unsigned char[]){ 0x02, 0, 10, 100, 0, 1 }, 6);
	f[12] = 0x08; f[13] = 0x00;
	unsigned char *ip = f + 14;
	memset(ip, 0, 20);
	ip[0] = 0x45; ip[8] = 1; ip[9] = 17;
	uint16_t tot = htons(20 + 8 + payload);
	memcpy(ip + 2, &tot, 2);
	uint32_t src = inet_addr("10.100.0.1"), dst = inet_addr("239.1.2.3");
	memcpy(ip + 12, &src, 4);
	memcpy(ip + 16, &dst, 4);
	unsigned char *udp = ip + 20;
	uint16_t sport = htons(7777), dport = htons(port), ulen = htons(8 + payload);
	memcpy(udp, &sport, 2); memcpy(udp + 2, &dport, 2); memcpy(udp + 4, &ulen, 2);
	udp[6] = udp[7] = 0;
	memset(udp + 8, fill, payload);
	return 14 + 20 + 8 + payload;
}

/* A striding RQ on `cq` with its ring, table, RSS QP and a flow rule for `port`. */
struct mprq {
	struct ibv_wq *wq;
	struct mlx5dv_rwq rwq;
	struct ibv_rwq_ind_table *table;
	struct ibv_qp *qp;
	struct ibv_flow *flow;
	uint32_t head;
};

static int mprq_open(struct mprq *m, struct ibv_context *ctx, struct ibv_pd *pd,
		     struct ibv_cq_ex *cq, uint16_t port)
{
	struct ibv_wq_init_attr wa = {
		.wq_type = IBV_WQT_RQ, .max_wr = 2, .max_sge = 1, .pd = pd,
		.cq = ibv_cq_ex_to_cq(cq),
	};
	struct mlx5dv_wq_init_attr dv = {
		.comp_mask = MLX5DV_WQ_INIT_ATTR_MASK_STRIDING_RQ,
		.striding_rq_attrs = { .single_stride_log_num_of_bytes = LOG_STRIDE,
				       .single_wqe_log_num_of_strides = LOG_NUM },
	};
	if (!(m->wq = mlx5dv_create_wq(ctx, &wa, &dv))) FAIL("mlx5dv_create_wq");
	struct mlx5dv_obj obj = { .rwq = { .in = m->wq, .out = &m->rwq } };
	if ((errno = mlx5dv_init_obj(&obj, MLX5DV_OBJ_RWQ))) FAIL("mlx5dv_init_obj");
	struct ibv_rwq_ind_table_init_attr ta = { .log_ind_tbl_size = 0, .ind_tbl = &m->wq };
	if (!(m->table = ibv_create_rwq_ind_table(ctx, &ta))) FAIL("ibv_create_rwq_ind_table");
	uint8_t key[40] = { 0 };
	struct ibv_qp_init_attr_ex qa = {
		.qp_type = IBV_QPT_RAW_PACKET,
		.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_IND_TABLE | IBV_QP_INIT_ATTR_RX_HASH,
		.pd = pd, .rwq_ind_tbl = m->table,
		.rx_hash_conf = { .rx_hash_function = IBV_RX_HASH_FUNC_TOEPLITZ,
				  .rx_hash_key_len = sizeof key, .rx_hash_key = key },
	};
	if (!(m->qp = ibv_create_qp_ex(ctx, &qa))) FAIL("ibv_create_qp_ex (RSS)");
	struct rule r = {
		.attr = { .type = IBV_FLOW_ATTR_NORMAL, .size = sizeof r, .num_of_specs = 3, .port = 1 },
		.eth = { .type = IBV_FLOW_SPEC_ETH, .size = sizeof r.eth },
		.ipv4 = { .type = IBV_FLOW_SPEC_IPV4, .size = sizeof r.ipv4 },
		.udp = { .type = IBV_FLOW_SPEC_UDP, .size = sizeof r.udp },
	};
	memcpy(r.eth.val.dst_mac, group_mac, 6);
	memset(r.eth.mask.dst_mac, 0xff, 6);
	r.ipv4.val.dst_ip = inet_addr("239.1.2.3");
	r.ipv4.mask.dst_ip = 0xffffffff;
	r.udp.val.dst_port = htons(port);
	r.udp.mask.dst_port = 0xffff;
	if (!(m->flow = ibv_create_flow(m->qp, &r.attr))) FAIL("ibv_create_flow");
	struct ibv_wq_attr mod = { .attr_mask = IBV_WQ_ATTR_STATE, .wq_state = IBV_WQS_RDY };
	if ((errno = ibv_modify_wq(m->wq, &mod))) FAIL("ibv_modify_wq");
	m->head = 0;
	return 0;
}

/* Posts one WQE as spead2 does: entry head & (wqe_cnt - 1), then the doorbell record
 * with release ordering. */
static void post(struct mprq *m, uint64_t addr, uint32_t len, uint32_t lkey)
{
	struct mlx5_mprq_wqe *wqe = (struct mlx5_mprq_wqe *)m->rwq.buf + (m->head & (m->rwq.wqe_cnt - 1));
	memset(&wqe->nseg, 0, sizeof wqe->nseg);
	wqe->dseg.byte_count = htobe32(len);
	wqe->dseg.lkey = htobe32(lkey);
	wqe->dseg.addr = htobe64(addr);
	m->head++;
	atomic_store_explicit((_Atomic uint32_t *)m->rwq.dbrec, htobe32(m->head & 0xffff),
			      memory_order_release);
}

static int mprq_close(struct mprq *m)
{
	return ibv_destroy_flow(m->flow) || ibv_destroy_qp(m->qp) ||
	       ibv_destroy_rwq_ind_table(m->table) || ibv_destroy_wq(m->wq);
}

/* Takes `n` completions of `cq`, one poll session each, and prints each with its packed
 * byte count decoded as spead2 decodes it. */
static int take(struct ibv_cq_ex *cq, int n)
{
	struct ibv_poll_cq_attr pa = { 0 };
	for (int i = 0; i < n; i++) {
		int ret;
		while ((ret = ibv_start_poll(cq, &pa)) == ENOENT)
			;
		if (ret) { errno = ret; FAIL("ibv_start_poll"); }
		uint32_t w = ibv_wc_read_byte_len(cq);
		printf("%s bytes %u strides %u filler %u\n",
		       ibv_wc_status_str(cq->status), w & 0xffff, (w >> 16) & 0x7fff, w >> 31);
		ibv_end_poll(cq);
	}
	return 0;
}

int main(void)
{
	static unsigned char rxbuf[3 * WQE_BYTES] __attribute__((aligned(4096)));
	static unsigned char txbuf[64 * 2048];
	struct ibv_device **list;
	struct ibv_context *ctx = open_first_device(&list);
	if (!ctx) return 1;
	printf("mlx5dv_is_supported %d\n", mlx5dv_is_supported(list[0]));
	struct mlx5dv_context dvc = { .comp_mask = MLX5DV_CONTEXT_MASK_STRIDING_RQ };
	if ((errno = mlx5dv_query_device(ctx, &dvc))) FAIL("mlx5dv_query_device");
	struct mlx5dv_striding_rq_caps *c = &dvc.striding_rq_caps;
	printf("striding rq %d mpw %d: stride log bytes %u..%u, log strides %u..%u, raw packet %d\n",
	       !!(dvc.comp_mask & MLX5DV_CONTEXT_MASK_STRIDING_RQ),
	       !!(dvc.flags & MLX5DV_CONTEXT_FLAGS_MPW_ALLOWED),
	       c->min_single_stride_log_num_of_bytes, c->max_single_stride_log_num_of_bytes,
	       c->min_single_wqe_log_num_of_strides, c->max_single_wqe_log_num_of_strides,
	       !!(c->supported_qpts & (1 << IBV_QPT_RAW_PACKET)));
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	if (!pd) FAIL("ibv_alloc_pd");
	struct ibv_mr *rmr = ibv_reg_mr(pd, rxbuf, sizeof rxbuf, IBV_ACCESS_LOCAL_WRITE);
	struct ibv_mr *smr = ibv_reg_mr(pd, txbuf, sizeof txbuf, IBV_ACCESS_LOCAL_WRITE);
	if (!rmr || !smr) FAIL("ibv_reg_mr");
	struct ibv_cq_init_attr_ex ca = { .cqe = 1024, .wc_flags = IBV_WC_EX_WITH_BYTE_LEN };
	struct ibv_cq_ex *rcq = ibv_create_cq_ex(ctx, &ca);
	struct ibv_cq *scq = ibv_create_cq(ctx, 64, NULL, NULL, 0);
	if (!rcq || !scq) FAIL("create CQs");
	struct ibv_qp *tx = sender(pd, scq);
	if (!tx) FAIL("sender QP");

	struct mprq m;
	if (mprq_open(&m, ctx, pd, rcq, 8888)) return 1;
	printf("rwq wqe_cnt %u stride %u (sizeof mlx5_mprq_wqe %zu)\n", m.rwq.wqe_cnt,
	       m.rwq.stride, sizeof(struct mlx5_mprq_wqe));
	post(&m, (uintptr_t)rxbuf, WQE_BYTES, rmr->lkey);
	post(&m, (uintptr_t)rxbuf + WQE_BYTES, WQE_BYTES, rmr->lkey);

	/* 21 frames of 1514 bytes take 504 of WQE 0's 512 strides; the 22nd does not fit
	 * the 8 left: a filler, then it lands at the start of WQE 1. */
	for (int i = 0; i < 22; i++) {
		uint32_t len = frame(txbuf + i * 2048, 8888, 1472, 'a' + i);
		struct ibv_sge s = { .addr = (uintptr_t)txbuf + i * 2048, .length = len, .lkey = smr->lkey };
		struct ibv_send_wr w = { .wr_id = i, .sg_list = &s, .num_sge = 1, .opcode = IBV_WR_SEND }, *bad;
		if ((errno = ibv_post_send(tx, &w, &bad))) FAIL("ibv_post_send");
	}
	if (take(rcq, 23)) return 1;
	printf("frame 20 at stride 480 intact %d, frame 21 at WQE 1 intact %d\n",
	       memcmp(rxbuf + 480 * 64, txbuf + 20 * 2048, 1514) == 0,
	       memcmp(rxbuf + WQE_BYTES, txbuf + 21 * 2048, 1514) == 0);

	/* A WQ whose first entry is one stride short of a WQE: the device fails it. */
	struct mprq bad;
	if (mprq_open(&bad, ctx, pd, rcq, 8889)) return 1;
	post(&bad, (uintptr_t)rxbuf + 2 * WQE_BYTES, WQE_BYTES - 64, rmr->lkey);
	uint32_t len = frame(txbuf, 8889, 18, 'z');
	struct ibv_sge s = { .addr = (uintptr_t)txbuf, .length = len, .lkey = smr->lkey };
	struct ibv_send_wr w = { .wr_id = 99, .sg_list = &s, .num_sge = 1, .opcode = IBV_WR_SEND }, *badw;
	if ((errno = ibv_post_send(tx, &w, &badw))) FAIL("ibv_post_send");
	if (take(rcq, 1)) return 1;

	if (mprq_close(&bad) || mprq_close(&m) || ibv_destroy_qp(tx) ||
	    ibv_destroy_cq(ibv_cq_ex_to_cq(rcq)) || ibv_destroy_cq(scq) || ibv_dereg_mr(rmr) ||
	    ibv_dereg_mr(smr) || ibv_dealloc_pd(pd) || ibv_close_device(ctx))
		FAIL("teardown");
	ibv_free_device_list(list);
	printf("done\n");
	return 0;
}
