/* spead2's ibverbs pattern on the emulated mlx5: two RAW_PACKET QPs on one context, a
 * flow rule (destination MAC, IPv4 group, UDP port) steering a multicast group to one
 * of them, the other sending whole Ethernet/IPv4/UDP frames to that group with the IP
 * checksum offloaded. The static-inline ibv_create_flow reaches the emulator through
 * verbs_context. Prints what was received; exits non-zero at the first failing call. */
#include "util.h"
#include <arpa/inet.h>

struct rule {
	struct ibv_flow_attr attr;
	struct ibv_flow_spec_eth eth;
	struct ibv_flow_spec_ipv4 ipv4;
	struct ibv_flow_spec_tcp_udp udp;
};

static struct ibv_qp *raw_qp(struct ibv_pd *pd, struct ibv_cq *cq)
{
	struct ibv_qp_init_attr init = {
		.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RAW_PACKET,
		.cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1 },
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

int main(void)
{
	struct ibv_device **list;
	struct ibv_context *ctx = open_first_device(&list);
	if (!ctx) return 1;
	struct ibv_device_attr_ex dev;
	if ((errno = ibv_query_device_ex(ctx, NULL, &dev))) FAIL("ibv_query_device_ex");
	printf("managed flow steering %d, raw ip csum %d\n",
	       !!(dev.orig_attr.device_cap_flags & IBV_DEVICE_MANAGED_FLOW_STEERING),
	       !!(dev.raw_packet_caps & IBV_RAW_PACKET_CAP_IP_CSUM));
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	if (!pd) FAIL("ibv_alloc_pd");
	static unsigned char buf[4096];
	struct ibv_mr *mr = ibv_reg_mr(pd, buf, sizeof buf, IBV_ACCESS_LOCAL_WRITE);
	if (!mr) FAIL("ibv_reg_mr");
	struct ibv_cq *rx_cq = ibv_create_cq(ctx, 8, NULL, NULL, 0);
	struct ibv_cq *tx_cq = ibv_create_cq(ctx, 8, NULL, NULL, 0);
	if (!rx_cq || !tx_cq) FAIL("ibv_create_cq");
	struct ibv_qp *rx = raw_qp(pd, rx_cq), *tx = raw_qp(pd, tx_cq);
	if (!rx || !tx) FAIL("RAW_PACKET QP");

	const unsigned char group_mac[6] = { 0x01, 0x00, 0x5e, 0x01, 0x02, 0x03 };
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
	r.udp.val.dst_port = htons(8888);
	r.udp.mask.dst_port = 0xffff;
	struct ibv_flow *flow = ibv_create_flow(rx, &r.attr);
	if (!flow) FAIL("ibv_create_flow");

	struct ibv_sge rsge = { .addr = (uintptr_t)buf + 2048, .length = 2048, .lkey = mr->lkey };
	struct ibv_recv_wr rwr = { .wr_id = 1, .sg_list = &rsge, .num_sge = 1 }, *bad_r;
	if ((errno = ibv_post_recv(rx, &rwr, &bad_r))) FAIL("ibv_post_recv");

	/* Ethernet + IPv4 + UDP + 16 bytes of payload; checksum left to the NIC. */
	unsigned char *f = buf;
	const char payload[16] = "spead-like heap";
	memcpy(f, group_mac, 6);
	memcpy(f + 6, (unsigned char[]){ 0x02, 0, 10, 100, 0, 1 }, 6);
	f[12] = 0x08; f[13] = 0x00;
	unsigned char *ip = f + 14;
	memset(ip, 0, 20);
	ip[0] = 0x45; ip[8] = 1; ip[9] = 17;
	uint16_t tot = htons(20 + 8 + sizeof payload);
	memcpy(ip + 2, &tot, 2);
	uint32_t src = inet_addr("10.100.0.1"), dst = inet_addr("239.1.2.3");
	memcpy(ip + 12, &src, 4);
	memcpy(ip + 16, &dst, 4);
	unsigned char *udp = ip + 20;
	uint16_t sport = htons(7777), dport = htons(8888), ulen = htons(8 + sizeof payload);
	memcpy(udp, &sport, 2); memcpy(udp + 2, &dport, 2); memcpy(udp + 4, &ulen, 2);
	udp[6] = udp[7] = 0;
	memcpy(udp + 8, payload, sizeof payload);
	uint32_t len = 14 + 20 + 8 + sizeof payload;

	struct ibv_sge ssge = { .addr = (uintptr_t)buf, .length = len, .lkey = mr->lkey };
	struct ibv_send_wr swr = {
		.wr_id = 2, .sg_list = &ssge, .num_sge = 1, .opcode = IBV_WR_SEND,
		.send_flags = IBV_SEND_SIGNALED | IBV_SEND_IP_CSUM,
	}, *bad_s;
	if ((errno = ibv_post_send(tx, &swr, &bad_s))) FAIL("ibv_post_send");

	struct ibv_wc wc;
	int n;
	while ((n = ibv_poll_cq(tx_cq, 1, &wc)) == 0)
		;
	if (n < 0) FAIL("ibv_poll_cq (send)");
	printf("send wr_id %llu %s\n", (unsigned long long)wc.wr_id, ibv_wc_status_str(wc.status));
	while ((n = ibv_poll_cq(rx_cq, 1, &wc)) == 0)
		;
	if (n < 0) FAIL("ibv_poll_cq (recv)");
	printf("recv wr_id %llu %s byte_len %u ip_csum_ok %d\n", (unsigned long long)wc.wr_id,
	       ibv_wc_status_str(wc.status), wc.byte_len, !!(wc.wc_flags & IBV_WC_IP_CSUM_OK));
	unsigned char *got = buf + 2048;
	printf("udp dst port %u payload \"%s\"\n", (got[36] << 8) | got[37], (char *)got + 42);

	if (ibv_destroy_flow(flow) || ibv_destroy_qp(rx) || ibv_destroy_qp(tx) ||
	    ibv_destroy_cq(rx_cq) || ibv_destroy_cq(tx_cq) || ibv_dereg_mr(mr) ||
	    ibv_dealloc_pd(pd) || ibv_close_device(ctx))
		FAIL("teardown");
	ibv_free_device_list(list);
	printf("done\n");
	return 0;
}
