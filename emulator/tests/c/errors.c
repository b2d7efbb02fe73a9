/* Bad calls on the emulated NIC give the errno the man pages document, and verbs the
 * emulator lacks fail with EOPNOTSUPP and are reported once on stderr. Prints one line
 * per call: what was called and the errno name (or "ok"). */
#define _GNU_SOURCE
#include <infiniband/verbs.h>
#include <stdio.h>
#include <string.h>
#include <errno.h>

static const char *name(int e) { return e ? strerrorname_np(e) : "ok"; }

int main(void)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_context *ctx = ibv_open_device(list[0]);
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	static char buf[4096];

	errno = 0;
	printf("reg_mr unknown access bit: %s\n", ibv_reg_mr(pd, buf, sizeof buf, 1 << 15) ? "ok" : name(errno));
	errno = 0;
	printf("reg_mr remote write without local write: %s\n",
	       ibv_reg_mr(pd, buf, sizeof buf, IBV_ACCESS_REMOTE_WRITE) ? "ok" : name(errno));
	errno = 0;
	printf("reg_mr zero length: %s\n", ibv_reg_mr(pd, buf, 0, IBV_ACCESS_LOCAL_WRITE) ? "ok" : name(errno));
	errno = 0;
	printf("create_cq 0 entries: %s\n", ibv_create_cq(ctx, 0, NULL, NULL, 0) ? "ok" : name(errno));
	errno = 0;
	printf("create_cq bad vector: %s\n", ibv_create_cq(ctx, 4, NULL, NULL, 99) ? "ok" : name(errno));

	union ibv_gid gid;
	errno = 0;
	printf("query_gid index 5: %s\n", ibv_query_gid(ctx, 1, 5, &gid) ? name(errno) : "ok");
	struct ibv_port_attr pa;
	printf("query_port 2: %s\n", name(ibv_query_port(ctx, 2, &pa)));

	struct ibv_comp_channel *ch = ibv_create_comp_channel(ctx);
	struct ibv_cq *cq = ibv_create_cq(ctx, 4, NULL, ch, 0);
	printf("destroy_comp_channel with a CQ: %s\n", name(ibv_destroy_comp_channel(ch)));
	struct ibv_qp_init_attr init = {
		.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_UD,
		.cap = { .max_send_wr = 2, .max_recv_wr = 2, .max_send_sge = 1, .max_recv_sge = 1 },
	};
	struct ibv_qp *qp = ibv_create_qp(pd, &init);
	printf("destroy_cq used by a QP: %s\n", name(ibv_destroy_cq(cq)));
	printf("dealloc_pd used by a QP: %s\n", name(ibv_dealloc_pd(pd)));
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_RTS };
	printf("modify_qp RESET to RTS: %s\n", name(ibv_modify_qp(qp, &a, IBV_QP_STATE)));
	printf("modify_qp unknown mask bit: %s\n", name(ibv_modify_qp(qp, &a, IBV_QP_STATE | (1 << 30))));
	struct ibv_sge sge = { .addr = (uintptr_t)buf, .length = 8, .lkey = 0 };
	struct ibv_send_wr wr = { .wr_id = 1, .sg_list = &sge, .num_sge = 1, .opcode = 99 }, *bad = NULL;
	int rc = ibv_post_send(qp, &wr, &bad);
	printf("post_send unknown opcode: %s, bad_wr is it %d\n", name(rc), bad == &wr);

	struct ibv_td_init_attr tda = { 0 };
	errno = 0;
	printf("alloc_td: %s\n", ibv_alloc_td(ctx, &tda) ? "ok" : name(errno));
	errno = 0;
	printf("alloc_td again: %s\n", ibv_alloc_td(ctx, &tda) ? "ok" : name(errno));

	ibv_destroy_qp(qp);
	ibv_destroy_cq(cq);
	printf("destroy_comp_channel after its CQ: %s\n", name(ibv_destroy_comp_channel(ch)));
	printf("dealloc_pd after its QP: %s\n", name(ibv_dealloc_pd(pd)));
	ibv_close_device(ctx);
	ibv_free_device_list(list);
	return 0;
}
