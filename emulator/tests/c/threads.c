/* Verbs from many threads at once on one context: each of THREADS threads has its own
 * CQ, UD QP and buffers and sends ROUNDS messages to itself, waiting for each receive on
 * its own completion channel with ibv_get_cq_event (blocking), while the others post and
 * poll. Prints each thread's count of good receives. */
#include "util.h"
#include <pthread.h>
#include <stdlib.h>

#define THREADS 4
#define ROUNDS 50

static struct ibv_context *ctx;
static struct ibv_pd *pd;
static struct ibv_ah *ah;

struct worker {
	int id;
	int good;
	int failed_at; /* 0, or the line that failed */
};

#define CHECK(cond) do { if (!(cond)) { w->failed_at = __LINE__; return NULL; } } while (0)

static void *run(void *arg)
{
	struct worker *w = arg;
	char *buf = calloc(1, 4096);
	CHECK(buf);
	struct ibv_mr *mr = ibv_reg_mr(pd, buf, 4096, IBV_ACCESS_LOCAL_WRITE);
	struct ibv_comp_channel *ch = ibv_create_comp_channel(ctx);
	CHECK(mr && ch);
	struct ibv_cq *cq = ibv_create_cq(ctx, 8, NULL, ch, 0);
	CHECK(cq);
	struct ibv_qp *qp = ud_qp(pd, cq, NULL);
	CHECK(qp);
	for (int r = 0; r < ROUNDS; r++) {
		struct ibv_sge rsge = { .addr = (uintptr_t)buf + 2048, .length = 2048, .lkey = mr->lkey };
		struct ibv_recv_wr rwr = { .wr_id = r, .sg_list = &rsge, .num_sge = 1 }, *bad_r;
		CHECK(!ibv_post_recv(qp, &rwr, &bad_r));
		CHECK(!ibv_req_notify_cq(cq, 0));
		snprintf(buf, 64, "thread %d round %d", w->id, r);
		struct ibv_sge ssge = { .addr = (uintptr_t)buf, .length = 64, .lkey = mr->lkey };
		struct ibv_send_wr swr = {
			.wr_id = 1000 + r, .sg_list = &ssge, .num_sge = 1, .opcode = IBV_WR_SEND,
			/* Signaled: mlx5 frees a send slot only when a CQE at or after it is polled. */
			.send_flags = IBV_SEND_SIGNALED,
			.wr.ud = { .ah = ah, .remote_qpn = qp->qp_num, .remote_qkey = QKEY },
		}, *bad_s;
		CHECK(!ibv_post_send(qp, &swr, &bad_s));
		/* Wait for the receive: events until it is polled. */
		int got = 0;
		while (!got) {
			struct ibv_cq *ev_cq;
			void *ev_ctx;
			CHECK(!ibv_get_cq_event(ch, &ev_cq, &ev_ctx) && ev_cq == cq);
			ibv_ack_cq_events(cq, 1);
			CHECK(!ibv_req_notify_cq(cq, 0));
			struct ibv_wc wc;
			int n;
			while ((n = ibv_poll_cq(cq, 1, &wc)) > 0) {
				CHECK(wc.status == IBV_WC_SUCCESS);
				if (wc.opcode == IBV_WC_RECV) {
					char want[64];
					snprintf(want, sizeof want, "thread %d round %d", w->id, r);
					CHECK(wc.wr_id == (uint64_t)r && !strcmp(buf + 2048 + 40, want));
					got = 1;
				}
			}
			CHECK(n == 0);
		}
		w->good++;
	}
	CHECK(!ibv_destroy_qp(qp) && !ibv_destroy_cq(cq) && !ibv_destroy_comp_channel(ch) &&
	      !ibv_dereg_mr(mr));
	free(buf);
	return NULL;
}

int main(void)
{
	struct ibv_device **list;
	ctx = open_first_device(&list);
	if (!ctx) return 1;
	pd = ibv_alloc_pd(ctx);
	ah = pd ? self_ah(ctx, pd) : NULL;
	if (!ah) FAIL("setup");
	pthread_t t[THREADS];
	struct worker w[THREADS];
	for (int i = 0; i < THREADS; i++) {
		w[i] = (struct worker){ .id = i };
		if (pthread_create(&t[i], NULL, run, &w[i])) FAIL("pthread_create");
	}
	for (int i = 0; i < THREADS; i++) {
		pthread_join(t[i], NULL);
		printf("thread %d: %d good receives%s\n", i, w[i].good, w[i].failed_at ? ", then a failure" : "");
		if (w[i].failed_at)
			fprintf(stderr, "thread %d failed at threads.c:%d\n", i, w[i].failed_at);
	}
	if (ibv_destroy_ah(ah) || ibv_dealloc_pd(pd) || ibv_close_device(ctx)) FAIL("teardown");
	ibv_free_device_list(list);
	return 0;
}
