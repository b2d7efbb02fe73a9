/* What the C test programs share: failing loudly, opening the device, and a UD QP
 * brought up to RTS. */
#ifndef EMU_TEST_UTIL_H
#define EMU_TEST_UTIL_H
#include <infiniband/verbs.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#define FAIL(what) do { fprintf(stderr, "%s failed: %s\n", what, strerror(errno)); return 1; } while (0)

#define QKEY 0x11111111

/* Opens the first device; `*list` is the device list, for the program to free. NULL when
 * there is no device or it does not open, with the failing call named on stderr. */
static inline struct ibv_context *open_first_device(struct ibv_device ***list)
{
	*list = ibv_get_device_list(NULL);
	if (!*list || !(*list)[0]) {
		fprintf(stderr, "ibv_get_device_list failed: %s\n", strerror(errno));
		return NULL;
	}
	struct ibv_context *ctx = ibv_open_device((*list)[0]);
	if (!ctx)
		fprintf(stderr, "ibv_open_device failed: %s\n", strerror(errno));
	return ctx;
}

/* What most programs start from: the first device (its list kept for the program to
 * free), a PD on it, and a buffer registered on the PD for local writes. */
struct base {
	struct ibv_device **list;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_mr *mr;
};

/* Fills `b`, registering the `len` bytes at `buf`; 0, or -1 with the failing call named
 * on stderr. */
static inline int open_base(struct base *b, void *buf, size_t len)
{
	b->ctx = open_first_device(&b->list);
	if (!b->ctx)
		return -1;
	const char *failed = NULL;
	b->pd = ibv_alloc_pd(b->ctx);
	if (!b->pd)
		failed = "ibv_alloc_pd";
	else if (!(b->mr = ibv_reg_mr(b->pd, buf, len, IBV_ACCESS_LOCAL_WRITE)))
		failed = "ibv_reg_mr";
	if (failed)
		fprintf(stderr, "%s failed: %s\n", failed, strerror(errno));
	return failed ? -1 : 0;
}

/* Brings a UD QP to RTS with qkey QKEY; returns it, or NULL with errno set. */
static inline struct ibv_qp *ud_rts(struct ibv_qp *qp)
{
	if (!qp)
		return NULL;
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .pkey_index = 0, .port_num = 1, .qkey = QKEY };
	if ((errno = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY)))
		return NULL;
	a.qp_state = IBV_QPS_RTR;
	if ((errno = ibv_modify_qp(qp, &a, IBV_QP_STATE)))
		return NULL;
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = 0;
	if ((errno = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN)))
		return NULL;
	return qp;
}

/* A UD QP on `cq` (and `srq`, if not NULL), in RTS with qkey QKEY; NULL with errno set. */
static inline struct ibv_qp *ud_qp(struct ibv_pd *pd, struct ibv_cq *cq, struct ibv_srq *srq)
{
	struct ibv_qp_init_attr init = {
		.send_cq = cq, .recv_cq = cq, .srq = srq, .qp_type = IBV_QPT_UD,
		.cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1 },
	};
	return ud_rts(ibv_create_qp(pd, &init));
}

/* An address handle for the port's own RoCE v2 GID (index 1); NULL with errno set. */
static inline struct ibv_ah *self_ah(struct ibv_context *ctx, struct ibv_pd *pd)
{
	union ibv_gid gid;
	if (ibv_query_gid(ctx, 1, 1, &gid))
		return NULL;
	struct ibv_ah_attr ah_attr = {
		.is_global = 1, .port_num = 1,
		.grh = { .dgid = gid, .sgid_index = 1, .hop_limit = 64 },
	};
	return ibv_create_ah(pd, &ah_attr);
}
#endif
