/* Arbitrary verbs call sequences: `chaos SEED STEPS` makes STEPS calls drawn from SEED
 * (xorshift) on the host's device: allocating and freeing PDs, MRs (any access flags, some
 * the library must refuse), CQs, QPs of every type, AHs to the fabric's hosts; moving QPs
 * to any state with any attribute mask; posting sends of every opcode (local ranges at and
 * past a region's end, any rkey, any remote QPN) and receives; polling; attaching to
 * multicast groups; freeing things still in use. Every call gets valid pointers (the
 * program tracks what it made), so whatever the values, the library must answer with an
 * errno or a completion, never crash, and the fabric must go on serving. At the end it
 * frees what is left, in order, and prints its counts on one line.
 */
#include <inttypes.h>
#include <stdlib.h>
#include "util.h"

#define MAX 12

static uint64_t state;
static uint64_t rnd(void)
{
	state ^= state << 13;
	state ^= state >> 7;
	state ^= state << 17;
	return state;
}
static unsigned pick(unsigned n) { return (unsigned)(rnd() % n); }

struct mr { struct ibv_mr *mr; unsigned char *buf; size_t len; };

static struct ibv_pd *pd[MAX];
static struct mr mr[MAX];
static struct ibv_cq *cq[MAX];
static struct ibv_qp *qp[MAX];
static struct ibv_ah *ah[MAX];
static unsigned long calls, refused, completions, completion_errors;

/* A free slot of an array of `n` pointers, or -1. */
static int free_slot(void **a, int n)
{
	for (int i = 0; i < n; i++)
		if (!a[i])
			return i;
	return -1;
}

/* A used slot chosen at random, or -1. */
static int used_slot(void **a, int n)
{
	int start = (int)pick((unsigned)n);
	for (int k = 0; k < n; k++) {
		int i = (start + k) % n;
		if (a[i])
			return i;
	}
	return -1;
}

static int used_mr(void)
{
	int start = (int)pick(MAX);
	for (int k = 0; k < MAX; k++) {
		int i = (start + k) % MAX;
		if (mr[i].mr)
			return i;
	}
	return -1;
}

static void note(int failed)
{
	calls++;
	if (failed)
		refused++;
}

static union ibv_gid host_gid(void)
{
	union ibv_gid g;
	memset(&g, 0, sizeof g);
	g.raw[10] = g.raw[11] = 0xff;
	g.raw[12] = 10;
	g.raw[13] = 100;
	g.raw[14] = 0;
	g.raw[15] = (uint8_t)(1 + pick(5)); /* h1..h4, and one that is nobody */
	return g;
}

static const enum ibv_qp_type qp_types[] = { IBV_QPT_RC, IBV_QPT_UC, IBV_QPT_UD, IBV_QPT_RAW_PACKET };
static const enum ibv_wr_opcode opcodes[] = {
	IBV_WR_SEND, IBV_WR_SEND_WITH_IMM, IBV_WR_RDMA_WRITE, IBV_WR_RDMA_WRITE_WITH_IMM,
	IBV_WR_RDMA_READ, IBV_WR_ATOMIC_CMP_AND_SWP, IBV_WR_ATOMIC_FETCH_AND_ADD,
};

/* A scatter/gather entry in a random region: inside it, at its end, or past it. */
static void sge_of(struct ibv_sge *sge)
{
	int m = used_mr();
	if (m < 0) {
		sge->addr = 0;
		sge->length = 0;
		sge->lkey = (uint32_t)rnd();
		return;
	}
	size_t off = pick((unsigned)mr[m].len);
	uint32_t len = (uint32_t)(pick(4) == 0 ? 8 : pick((unsigned)(mr[m].len - off) + 1));
	if (pick(8) == 0)
		len += 64; /* past the region's end (still inside the buffer's slack) */
	sge->addr = (uintptr_t)mr[m].buf + off;
	sge->length = len;
	sge->lkey = pick(16) ? mr[m].mr->lkey : (uint32_t)rnd();
}

static void step(struct ibv_context *ctx)
{
	int i, j;
	switch (pick(22)) {
	case 20:
	case 21:
		/* A QP brought up properly: UD to RTS, RC/UC connected to a random QP of a
		 * random host, so that sends and receives really run. */
		if ((i = used_slot((void **)qp, MAX)) >= 0) {
			if (qp[i]->qp_type == IBV_QPT_UD) {
				struct ibv_qp_attr r = { .qp_state = IBV_QPS_RESET };
				note(ibv_modify_qp(qp[i], &r, IBV_QP_STATE));
				note(!ud_rts(qp[i]));
				break;
			}
			struct ibv_qp_attr a;
			memset(&a, 0, sizeof a);
			a.qp_state = IBV_QPS_RESET;
			note(ibv_modify_qp(qp[i], &a, IBV_QP_STATE));
			a.qp_state = IBV_QPS_INIT;
			a.port_num = 1;
			a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
			note(ibv_modify_qp(qp[i], &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
					   IBV_QP_ACCESS_FLAGS));
			memset(&a, 0, sizeof a);
			a.qp_state = IBV_QPS_RTR;
			a.path_mtu = IBV_MTU_1024;
			a.dest_qp_num = (uint32_t)pick(64);
			a.max_dest_rd_atomic = 1;
			a.min_rnr_timer = 1;
			a.ah_attr.is_global = 1;
			a.ah_attr.port_num = 1;
			a.ah_attr.grh.dgid = host_gid();
			a.ah_attr.grh.sgid_index = 1;
			a.ah_attr.grh.hop_limit = 64;
			int rtr = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
			if (qp[i]->qp_type == IBV_QPT_RC)
				rtr |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
			note(ibv_modify_qp(qp[i], &a, rtr));
			memset(&a, 0, sizeof a);
			a.qp_state = IBV_QPS_RTS;
			a.timeout = 1;
			a.retry_cnt = 1;
			a.rnr_retry = 1;
			a.max_rd_atomic = 1;
			int rts = IBV_QP_STATE | IBV_QP_SQ_PSN;
			if (qp[i]->qp_type == IBV_QPT_RC)
				rts |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
			note(ibv_modify_qp(qp[i], &a, rts));
		}
		break;
	case 0:
		if ((i = free_slot((void **)pd, MAX)) >= 0) {
			pd[i] = ibv_alloc_pd(ctx);
			note(!pd[i]);
		}
		break;
	case 1:
		if ((i = used_slot((void **)pd, MAX)) >= 0) {
			int e = ibv_dealloc_pd(pd[i]);
			note(e);
			if (!e)
				pd[i] = NULL;
		}
		break;
	case 2:
	case 3: {
		int p = used_slot((void **)pd, MAX);
		for (i = 0; i < MAX && mr[i].mr; i++)
			;
		if (p < 0 || i == MAX)
			break;
		size_t len = 1 + pick(16384);
		mr[i].buf = calloc(1, len + 128);
		mr[i].len = len;
		int access = (int)(rnd() & (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
					   IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC));
		mr[i].mr = ibv_reg_mr(pd[p], mr[i].buf, len, access);
		note(!mr[i].mr);
		if (!mr[i].mr)
			free(mr[i].buf);
		break;
	}
	case 4:
		if ((i = used_mr()) >= 0) {
			int e = ibv_dereg_mr(mr[i].mr);
			note(e);
			if (!e) {
				free(mr[i].buf);
				mr[i].mr = NULL;
			}
		}
		break;
	case 5:
		if ((i = free_slot((void **)cq, MAX)) >= 0) {
			cq[i] = ibv_create_cq(ctx, (int)pick(300), NULL, NULL, 0);
			note(!cq[i]);
		}
		break;
	case 6:
		if ((i = used_slot((void **)cq, MAX)) >= 0) {
			int e = ibv_destroy_cq(cq[i]);
			note(e);
			if (!e)
				cq[i] = NULL;
		}
		break;
	case 7: {
		int p = used_slot((void **)pd, MAX), c = used_slot((void **)cq, MAX);
		if (p < 0 || c < 0 || (i = free_slot((void **)qp, MAX)) < 0)
			break;
		struct ibv_qp_init_attr init = {
			.send_cq = cq[c], .recv_cq = cq[pick(2) ? c : (unsigned)c], .qp_type = qp_types[pick(4)],
			.cap = { .max_send_wr = pick(64), .max_recv_wr = pick(64),
				 .max_send_sge = pick(4), .max_recv_sge = pick(4), .max_inline_data = pick(512) },
			.sq_sig_all = (int)pick(2),
		};
		qp[i] = ibv_create_qp(pd[p], &init);
		note(!qp[i]);
		break;
	}
	case 8:
		if ((i = used_slot((void **)qp, MAX)) >= 0) {
			int e = ibv_destroy_qp(qp[i]);
			note(e);
			if (!e)
				qp[i] = NULL;
		}
		break;
	case 9:
	case 10: {
		if ((i = used_slot((void **)qp, MAX)) < 0)
			break;
		struct ibv_qp_attr a;
		memset(&a, 0, sizeof a);
		a.qp_state = (enum ibv_qp_state)pick(7);
		a.pkey_index = (uint16_t)pick(2);
		a.port_num = (uint8_t)pick(3);
		a.qkey = (uint32_t)rnd();
		a.qp_access_flags = (unsigned)(rnd() & 0xf);
		a.path_mtu = (enum ibv_mtu)pick(7);
		a.dest_qp_num = (uint32_t)(pick(4) ? pick(64) : rnd() & 0xffffff);
		a.rq_psn = (uint32_t)rnd() & 0xffffff;
		a.sq_psn = (uint32_t)rnd() & 0xffffff;
		a.max_dest_rd_atomic = (uint8_t)pick(20);
		a.max_rd_atomic = (uint8_t)pick(20);
		a.min_rnr_timer = (uint8_t)pick(32);
		a.timeout = (uint8_t)pick(32);
		a.retry_cnt = (uint8_t)pick(9);
		a.rnr_retry = (uint8_t)pick(9);
		a.ah_attr.is_global = (uint8_t)pick(2);
		a.ah_attr.port_num = (uint8_t)pick(3);
		a.ah_attr.grh.dgid = host_gid();
		a.ah_attr.grh.sgid_index = (uint8_t)pick(3);
		a.ah_attr.grh.hop_limit = (uint8_t)pick(256);
		int mask = (int)(rnd() & 0x1fffff) | IBV_QP_STATE;
		note(ibv_modify_qp(qp[i], &a, mask));
		break;
	}
	case 11:
	case 12:
	case 13: {
		if ((i = used_slot((void **)qp, MAX)) < 0)
			break;
		struct ibv_sge sge[2];
		sge_of(&sge[0]);
		sge_of(&sge[1]);
		struct ibv_send_wr wr = {
			.wr_id = rnd(), .sg_list = sge, .num_sge = (int)pick(3),
			.opcode = opcodes[pick(7)], .send_flags = (unsigned)(rnd() & 0xf),
			.imm_data = (uint32_t)rnd(),
		};
		if (wr.opcode == IBV_WR_ATOMIC_CMP_AND_SWP || wr.opcode == IBV_WR_ATOMIC_FETCH_AND_ADD) {
			wr.wr.atomic.remote_addr = rnd() & ~7ull;
			wr.wr.atomic.rkey = (uint32_t)rnd();
			wr.wr.atomic.compare_add = rnd();
		} else if (qp[i]->qp_type == IBV_QPT_UD) {
			j = used_slot((void **)ah, MAX);
			if (j < 0)
				break;
			wr.wr.ud.ah = ah[j];
			wr.wr.ud.remote_qpn = (uint32_t)pick(64);
			wr.wr.ud.remote_qkey = (uint32_t)rnd();
		} else {
			wr.wr.rdma.remote_addr = rnd();
			wr.wr.rdma.rkey = (uint32_t)rnd();
		}
		struct ibv_send_wr *bad;
		note(ibv_post_send(qp[i], &wr, &bad));
		break;
	}
	case 14: {
		if ((i = used_slot((void **)qp, MAX)) < 0)
			break;
		struct ibv_sge sge;
		sge_of(&sge);
		struct ibv_recv_wr wr = { .wr_id = rnd(), .sg_list = &sge, .num_sge = (int)pick(2) };
		struct ibv_recv_wr *bad;
		note(ibv_post_recv(qp[i], &wr, &bad));
		break;
	}
	case 15:
	case 16:
		if ((i = used_slot((void **)cq, MAX)) >= 0) {
			struct ibv_wc wc[16];
			int n = ibv_poll_cq(cq[i], 1 + (int)pick(16), wc);
			note(n < 0);
			for (int k = 0; k < n; k++) {
				completions++;
				completion_errors += wc[k].status != IBV_WC_SUCCESS;
			}
		}
		break;
	case 17: {
		int p = used_slot((void **)pd, MAX);
		if (p < 0 || (i = free_slot((void **)ah, MAX)) < 0)
			break;
		struct ibv_ah_attr attr = {
			.is_global = 1, .port_num = (uint8_t)pick(3),
			.grh = { .dgid = host_gid(), .sgid_index = (uint8_t)pick(3), .hop_limit = 64 },
		};
		ah[i] = ibv_create_ah(pd[p], &attr);
		note(!ah[i]);
		break;
	}
	case 18:
		if ((i = used_slot((void **)ah, MAX)) >= 0) {
			int e = ibv_destroy_ah(ah[i]);
			note(e);
			if (!e)
				ah[i] = NULL;
		}
		break;
	default:
		if ((i = used_slot((void **)qp, MAX)) >= 0) {
			union ibv_gid g;
			memset(&g, 0, sizeof g);
			g.raw[10] = g.raw[11] = 0xff;
			g.raw[12] = 239;
			g.raw[15] = (uint8_t)pick(4);
			if (pick(2))
				note(ibv_attach_mcast(qp[i], &g, 0));
			else
				note(ibv_detach_mcast(qp[i], &g, 0));
		}
		break;
	}
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: chaos SEED STEPS\n");
		return 2;
	}
	state = strtoull(argv[1], NULL, 0) * 0x9e3779b97f4a7c15ull | 1;
	long steps = strtol(argv[2], NULL, 0);
	struct ibv_device **devs;
	struct ibv_context *ctx = open_first_device(&devs);
	if (!ctx) return 1;
	for (long s = 0; s < steps; s++)
		step(ctx);
	/* Free what is left, users first. */
	for (int i = 0; i < MAX; i++)
		if (qp[i] && ibv_destroy_qp(qp[i]))
			FAIL("ibv_destroy_qp at the end");
	for (int i = 0; i < MAX; i++)
		if (ah[i] && ibv_destroy_ah(ah[i]))
			FAIL("ibv_destroy_ah at the end");
	for (int i = 0; i < MAX; i++)
		if (mr[i].mr) {
			if (ibv_dereg_mr(mr[i].mr))
				FAIL("ibv_dereg_mr at the end");
			free(mr[i].buf);
		}
	for (int i = 0; i < MAX; i++)
		if (cq[i] && ibv_destroy_cq(cq[i]))
			FAIL("ibv_destroy_cq at the end");
	for (int i = 0; i < MAX; i++)
		if (pd[i] && ibv_dealloc_pd(pd[i]))
			FAIL("ibv_dealloc_pd at the end");
	if (ibv_close_device(ctx))
		FAIL("ibv_close_device");
	ibv_free_device_list(devs);
	printf("%lu calls, %lu refused, %lu completions (%lu with an error status)\n", calls, refused,
	       completions, completion_errors);
	return 0;
}
