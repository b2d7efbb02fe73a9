/* Leaves a context, a PD and an MR behind (and destroys a CQ): what the leak report
 * (VERBS_EMU_LEAKS) should name at exit. */
#include "util.h"

int main(void)
{
	struct ibv_device **list;
	struct ibv_context *ctx = open_first_device(&list);
	if (!ctx) return 1;
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	static char buf[64];
	if (!pd || !ibv_reg_mr(pd, buf, sizeof buf, IBV_ACCESS_LOCAL_WRITE)) FAIL("setup");
	struct ibv_cq *cq = ibv_create_cq(ctx, 4, NULL, NULL, 0);
	if (!cq || ibv_destroy_cq(cq)) FAIL("CQ");
	ibv_free_device_list(list);
	printf("leaving\n");
	return 0;
}
