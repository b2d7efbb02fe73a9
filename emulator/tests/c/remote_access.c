/* Remote memory access between two emulated hosts, only through a memory region with a
 * matching rkey and the access rights the operation needs.
 *
 * `remote_access server` (host h1): registers four 4096-byte regions, each filled with its
 * own byte: rw (REMOTE_READ|REMOTE_WRITE, 0x11), ro (REMOTE_READ, 0x22), wo (REMOTE_WRITE,
 * 0x33) and local (LOCAL_WRITE only, 0x44); creates one RC QP per case and prints
 *   server GID QPN... rw ADDR RKEY ro ADDR RKEY wo ADDR RKEY local ADDR RKEY
 * then reads `client GID QPN...` on stdin, connects each QP to the client's, prints
 * `ready`, waits for `done` on stdin and prints, for each region, how many of its bytes
 * differ from its fill and the first byte.
 *
 * `remote_access client` (host h2): reads the server's line on stdin, creates its QPs,
 * prints `client GID QPN...`, waits for `go`, then runs one RDMA operation per case on
 * its own QP and prints `CASE: STATUS` (ibv_wc_status_str), and for the read that
 * succeeds the bytes it read.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <unistd.h>
#include "util.h"

#define SIZE 4096
#define LEN 64
#define REGIONS 4

enum { RW, RO, WO, LOCAL };
static const char *region_name[REGIONS] = { "rw", "ro", "wo", "local" };
static const unsigned char fill[REGIONS] = { 0x11, 0x22, 0x33, 0x44 };
static const int access_of[REGIONS] = {
	IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE,
	IBV_ACCESS_REMOTE_READ,
	IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE,
	IBV_ACCESS_LOCAL_WRITE,
};

struct remote { uint64_t addr; uint32_t rkey; };

/* What a case does: the opcode, the region whose address it targets (plus `offset`), and
 * the region whose rkey it gives (or a wrong rkey). */
struct kase {
	const char *name;
	enum ibv_wr_opcode op;
	int target;
	uint64_t offset;
	int key; /* a region, or -1: a wrong rkey */
};

static const struct kase cases[] = {
	{ "write with the region's rkey", IBV_WR_RDMA_WRITE, RW, 0, RW },
	{ "write with a wrong rkey", IBV_WR_RDMA_WRITE, RW, 128, -1 },
	{ "write with another region's rkey", IBV_WR_RDMA_WRITE, WO, 0, RW },
	{ "write to a region without REMOTE_WRITE", IBV_WR_RDMA_WRITE, RO, 0, RO },
	{ "write to a region with local access only", IBV_WR_RDMA_WRITE, LOCAL, 0, LOCAL },
	{ "write past the region's end", IBV_WR_RDMA_WRITE, RW, SIZE - LEN / 2, RW },
	{ "read with the region's rkey", IBV_WR_RDMA_READ, RO, 0, RO },
	{ "read with a wrong rkey", IBV_WR_RDMA_READ, RO, 0, -1 },
	{ "read from a region without REMOTE_READ", IBV_WR_RDMA_READ, WO, 0, WO },
	{ "read from a region with local access only", IBV_WR_RDMA_READ, LOCAL, 0, LOCAL },
};
#define CASES ((int)(sizeof(cases) / sizeof(cases[0])))

static void print_gid(const union ibv_gid *g)
{
	for (int i = 0; i < 16; i++)
		printf("%02x", g->raw[i]);
}

static int parse_gid(const char *s, union ibv_gid *g)
{
	if (strlen(s) != 32)
		return -1;
	for (int i = 0; i < 16; i++) {
		unsigned v;
		if (sscanf(s + 2 * i, "%2x", &v) != 1)
			return -1;
		g->raw[i] = (uint8_t)v;
	}
	return 0;
}

/* Reads one whitespace-separated word from stdin into `w`; 0 on success. */
static int word(char *w, size_t n)
{
	char fmt[16];
	snprintf(fmt, sizeof fmt, "%%%zus", n - 1);
	return scanf(fmt, w) == 1 ? 0 : -1;
}

static int connect_rc(struct ibv_qp *qp, uint32_t remote_qpn, const union ibv_gid *gid)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_INIT, .pkey_index = 0, .port_num = 1,
		.qp_access_flags = IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE,
	};
	if ((errno = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				   IBV_QP_ACCESS_FLAGS)))
		return -1;
	memset(&a, 0, sizeof a);
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = remote_qpn;
	a.rq_psn = 0;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 12;
	a.ah_attr.is_global = 1;
	a.ah_attr.port_num = 1;
	a.ah_attr.grh.dgid = *gid;
	a.ah_attr.grh.sgid_index = 1;
	a.ah_attr.grh.hop_limit = 64;
	if ((errno = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
				   IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
				   IBV_QP_MIN_RNR_TIMER)))
		return -1;
	memset(&a, 0, sizeof a);
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.sq_psn = 0;
	a.max_rd_atomic = 1;
	if ((errno = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
				   IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC)))
		return -1;
	return 0;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc != 2 || (strcmp(argv[1], "server") && strcmp(argv[1], "client"))) {
		fprintf(stderr, "usage: remote_access server|client\n");
		return 2;
	}
	int server = !strcmp(argv[1], "server");
	struct ibv_device **devs;
	struct ibv_context *ctx = open_first_device(&devs);
	if (!ctx) return 1;
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	if (!pd)
		FAIL("ibv_alloc_pd");
	struct ibv_cq *cq = ibv_create_cq(ctx, 2 * CASES, NULL, NULL, 0);
	if (!cq)
		FAIL("ibv_create_cq");
	union ibv_gid gid, peer_gid;
	if (ibv_query_gid(ctx, 1, 1, &gid))
		FAIL("ibv_query_gid");
	struct ibv_qp *qp[CASES];
	for (int i = 0; i < CASES; i++) {
		struct ibv_qp_init_attr init = {
			.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
			.cap = { .max_send_wr = 2, .max_recv_wr = 2, .max_send_sge = 1, .max_recv_sge = 1 },
		};
		if (!(qp[i] = ibv_create_qp(pd, &init)))
			FAIL("ibv_create_qp");
	}
	static unsigned char mem[REGIONS][SIZE];
	struct ibv_mr *mr[REGIONS];
	int regions = server ? REGIONS : 1;
	for (int r = 0; r < regions; r++) {
		memset(mem[r], server ? fill[r] : 0xc0, SIZE);
		if (!(mr[r] = ibv_reg_mr(pd, mem[r], SIZE, server ? access_of[r] : IBV_ACCESS_LOCAL_WRITE)))
			FAIL("ibv_reg_mr");
	}
	char w[64];
	uint32_t peer_qpn[CASES];
	struct remote remote[REGIONS];
	if (!server) {
		/* The server's line. */
		if (word(w, sizeof w) || strcmp(w, "server") || word(w, sizeof w) || parse_gid(w, &peer_gid))
			FAIL("reading the server's GID");
		for (int i = 0; i < CASES; i++)
			if (scanf("%" SCNu32, &peer_qpn[i]) != 1)
				FAIL("reading the server's QPNs");
		for (int r = 0; r < REGIONS; r++)
			if (word(w, sizeof w) || strcmp(w, region_name[r]) ||
			    scanf("%" SCNx64 " %" SCNx32, &remote[r].addr, &remote[r].rkey) != 2)
				FAIL("reading the server's regions");
	}
	printf("%s ", argv[1]);
	print_gid(&gid);
	for (int i = 0; i < CASES; i++)
		printf(" %" PRIu32, qp[i]->qp_num);
	if (server)
		for (int r = 0; r < REGIONS; r++)
			printf(" %s %" PRIx64 " %" PRIx32, region_name[r], (uint64_t)(uintptr_t)mem[r], mr[r]->rkey);
	printf("\n");
	if (server) {
		if (word(w, sizeof w) || strcmp(w, "client") || word(w, sizeof w) || parse_gid(w, &peer_gid))
			FAIL("reading the client's GID");
		for (int i = 0; i < CASES; i++)
			if (scanf("%" SCNu32, &peer_qpn[i]) != 1)
				FAIL("reading the client's QPNs");
	}
	for (int i = 0; i < CASES; i++)
		if (connect_rc(qp[i], peer_qpn[i], &peer_gid))
			FAIL("connecting a QP");
	if (server) {
		printf("ready\n");
		if (word(w, sizeof w) || strcmp(w, "done"))
			FAIL("waiting for done");
		for (int r = 0; r < REGIONS; r++) {
			int changed = 0;
			for (int i = 0; i < SIZE; i++)
				changed += mem[r][i] != fill[r];
			printf("%s: %d bytes changed, first byte 0x%02x\n", region_name[r], changed, mem[r][0]);
		}
		return 0;
	}
	if (word(w, sizeof w) || strcmp(w, "go"))
		FAIL("waiting for go");
	/* A key no region has. */
	uint32_t wrong = 0x5a5a5a5a;
	for (int again = 1; again;) {
		again = 0;
		for (int r = 0; r < REGIONS; r++)
			if (remote[r].rkey == wrong) {
				wrong++;
				again = 1;
			}
	}
	for (int i = 0; i < CASES; i++) {
		const struct kase *k = &cases[i];
		memset(mem[0], k->op == IBV_WR_RDMA_WRITE ? 0xab : 0xc0, SIZE);
		struct ibv_sge sge = { .addr = (uintptr_t)mem[0], .length = LEN, .lkey = mr[0]->lkey };
		struct ibv_send_wr wr = {
			.wr_id = (uint64_t)i, .sg_list = &sge, .num_sge = 1, .opcode = k->op,
			.send_flags = IBV_SEND_SIGNALED,
			.wr.rdma = { .remote_addr = remote[k->target].addr + k->offset,
				     .rkey = k->key < 0 ? wrong : remote[k->key].rkey },
		};
		struct ibv_send_wr *bad;
		if ((errno = ibv_post_send(qp[i], &wr, &bad)))
			FAIL("ibv_post_send");
		struct ibv_wc wc;
		int got;
		while ((got = ibv_poll_cq(cq, 1, &wc)) == 0)
			;
		if (got < 0)
			FAIL("ibv_poll_cq");
		if (wc.wr_id != (uint64_t)i)
			FAIL("a completion of another case");
		printf("%s: %s", k->name, ibv_wc_status_str(wc.status));
		if (k->op == IBV_WR_RDMA_READ && wc.status == IBV_WC_SUCCESS) {
			int same = 1;
			for (int b = 1; b < LEN; b++)
				same &= mem[0][b] == mem[0][0];
			printf(", read %d bytes of 0x%02x%s", LEN, mem[0][0], same ? "" : " and others");
		}
		printf("\n");
	}
	return 0;
}
