/*
 * backend-hw's C shim over libibverbs: see shim.h. Static-inline verbs (post send/recv,
 * poll CQ, request notify, flows, query_device_ex, reg_mr) can only be called from C.
 */
#include "shim.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <string.h>
#include <unistd.h>

#define CHUNK 32

/* A positive errno for a call that failed: `ret` when positive, else errno, else EIO. */
static int err_of(int ret)
{
	if (ret > 0)
		return ret;
	if (ret < 0 && ret > -4096 && ret != -1)
		return -ret;
	return errno > 0 ? errno : EIO;
}

/* errno after a call that returned NULL. */
static int null_err(void)
{
	return errno > 0 ? errno : EIO;
}

#define FIELD(s, f) (uint32_t) offsetof(struct s, f)

static const uint32_t LAYOUT[] = {
	/* ibv_sge, which verbs_api::Sge mirrors */
	sizeof(struct ibv_sge), FIELD(ibv_sge, addr), FIELD(ibv_sge, length), FIELD(ibv_sge, lkey),
	/* shim_device_info */
	sizeof(struct shim_device_info), FIELD(shim_device_info, guid),
	FIELD(shim_device_info, node_type), FIELD(shim_device_info, transport_type),
	FIELD(shim_device_info, dev_path),
	/* shim_context_info */
	sizeof(struct shim_context_info), FIELD(shim_context_info, async_fd),
	/* shim_device_attr */
	sizeof(struct shim_device_attr), FIELD(shim_device_attr, node_guid),
	FIELD(shim_device_attr, device_cap_flags), FIELD(shim_device_attr, vendor_id),
	FIELD(shim_device_attr, atomic_cap), FIELD(shim_device_attr, raw_packet_caps),
	FIELD(shim_device_attr, max_pkeys), FIELD(shim_device_attr, phys_port_cnt),
	FIELD(shim_device_attr, ex_supported),
	/* shim_port_attr */
	sizeof(struct shim_port_attr), FIELD(shim_port_attr, pkey_tbl_len),
	FIELD(shim_port_attr, lmc), FIELD(shim_port_attr, link_layer),
	/* shim_ah_attr */
	sizeof(struct shim_ah_attr), FIELD(shim_ah_attr, flow_label),
	FIELD(shim_ah_attr, is_global), FIELD(shim_ah_attr, dlid), FIELD(shim_ah_attr, port_num),
	/* shim_qp_cap */
	sizeof(struct shim_qp_cap), FIELD(shim_qp_cap, max_inline_data),
	/* shim_qp_attr */
	sizeof(struct shim_qp_attr), FIELD(shim_qp_attr, qp_access_flags), FIELD(shim_qp_attr, cap),
	FIELD(shim_qp_attr, ah_attr), FIELD(shim_qp_attr, alt_ah_attr),
	FIELD(shim_qp_attr, pkey_index), FIELD(shim_qp_attr, en_sqd_async_notify),
	FIELD(shim_qp_attr, alt_timeout), FIELD(shim_qp_attr, rate_limit),
	/* shim_qp_init_attr */
	sizeof(struct shim_qp_init_attr), FIELD(shim_qp_init_attr, srq),
	FIELD(shim_qp_init_attr, cap), FIELD(shim_qp_init_attr, qp_type),
	FIELD(shim_qp_init_attr, sq_sig_all),
	/* shim_srq_attr */
	sizeof(struct shim_srq_attr), FIELD(shim_srq_attr, srq_limit),
	/* shim_send_wr */
	sizeof(struct shim_send_wr), FIELD(shim_send_wr, sg_list), FIELD(shim_send_wr, num_sge),
	FIELD(shim_send_wr, imm_data), FIELD(shim_send_wr, remote_addr),
	FIELD(shim_send_wr, swap), FIELD(shim_send_wr, rkey), FIELD(shim_send_wr, remote_qkey),
	FIELD(shim_send_wr, invalidate_rkey), FIELD(shim_send_wr, ah), FIELD(shim_send_wr, mw),
	FIELD(shim_send_wr, mr), FIELD(shim_send_wr, bind_length), FIELD(shim_send_wr, bind_access),
	/* shim_recv_wr */
	sizeof(struct shim_recv_wr), FIELD(shim_recv_wr, sg_list), FIELD(shim_recv_wr, num_sge),
	/* shim_wc */
	sizeof(struct shim_wc), FIELD(shim_wc, status), FIELD(shim_wc, imm_data),
	FIELD(shim_wc, wc_flags), FIELD(shim_wc, pkey_index), FIELD(shim_wc, sl),
	FIELD(shim_wc, dlid_path_bits),
	/* shim_flow_spec */
	sizeof(struct shim_flow_spec), FIELD(shim_flow_spec, dst_mac),
	FIELD(shim_flow_spec, ether_type), FIELD(shim_flow_spec, mask_dst_mac),
	FIELD(shim_flow_spec, mask_vlan_tag), FIELD(shim_flow_spec, src_ip),
	FIELD(shim_flow_spec, mask_dst_ip), FIELD(shim_flow_spec, dst_port),
	FIELD(shim_flow_spec, mask_src_port),
	/* shim_flow_attr */
	sizeof(struct shim_flow_attr), FIELD(shim_flow_attr, flags), FIELD(shim_flow_attr, priority),
	FIELD(shim_flow_attr, port),
	/* shim_async_event */
	sizeof(struct shim_async_event), FIELD(shim_async_event, element),
	/* shim_wq_ring, shim_striding */
	sizeof(struct shim_wq_ring), FIELD(shim_wq_ring, dbrec), FIELD(shim_wq_ring, wqe_cnt),
	FIELD(shim_wq_ring, stride), sizeof(struct shim_striding),
	FIELD(shim_striding, two_byte_shift),
};

size_t shim_layout(const uint32_t **table)
{
	*table = LAYOUT;
	return sizeof(LAYOUT) / sizeof(LAYOUT[0]);
}

long shim_page_size(void)
{
	long p = sysconf(_SC_PAGESIZE);
	return p > 0 ? p : 4096;
}

static int set_nonblock(int fd)
{
	int flags = fcntl(fd, F_GETFL);
	if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0)
		return null_err();
	return 0;
}

/* ---- devices and contexts ---- */

int shim_get_device_list(struct shim_device_info *out, int cap, int *num)
{
	int n = 0;
	struct ibv_device **list;

	errno = 0;
	list = ibv_get_device_list(&n);
	if (!list)
		return null_err();
	for (int i = 0; i < n && i < cap; i++) {
		const char *name = ibv_get_device_name(list[i]);
		memset(&out[i], 0, sizeof(out[i]));
		if (name)
			strncpy(out[i].name, name, SHIM_NAME_LEN - 1);
		out[i].guid = ibv_get_device_guid(list[i]);
		out[i].node_type = list[i]->node_type;
		out[i].transport_type = list[i]->transport_type;
		strncpy(out[i].dev_path, list[i]->dev_path, SHIM_PATH_LEN - 1);
	}
	*num = n;
	ibv_free_device_list(list);
	return 0;
}

int shim_open_device(const char *name, struct ibv_context **out, struct shim_context_info *info)
{
	int n = 0, ret = ENODEV;
	struct ibv_device **list;

	errno = 0;
	list = ibv_get_device_list(&n);
	if (!list)
		return null_err();
	*out = NULL;
	for (int i = 0; i < n; i++) {
		const char *dev = ibv_get_device_name(list[i]);
		if (!dev || strcmp(dev, name) != 0)
			continue;
		errno = 0;
		*out = ibv_open_device(list[i]);
		ret = *out ? 0 : null_err();
		break;
	}
	ibv_free_device_list(list);
	if (ret)
		return ret;
	ret = set_nonblock((*out)->async_fd);
	if (ret) {
		ibv_close_device(*out);
		*out = NULL;
		return ret;
	}
	info->num_comp_vectors = (*out)->num_comp_vectors;
	info->async_fd = (*out)->async_fd;
	return 0;
}

int shim_close_device(struct ibv_context *ctx)
{
	return ibv_close_device(ctx) ? err_of(-1) : 0;
}

int shim_query_device(struct ibv_context *ctx, struct shim_device_attr *out)
{
	struct ibv_device_attr_ex ex;
	const struct ibv_device_attr *a = &ex.orig_attr;
	int ret;

	memset(&ex, 0, sizeof(ex));
	memset(out, 0, sizeof(*out));
	ret = ibv_query_device_ex(ctx, NULL, &ex);
	if (ret)
		return err_of(ret);
	memcpy(out->fw_ver, a->fw_ver, sizeof(out->fw_ver));
	out->fw_ver[sizeof(out->fw_ver) - 1] = 0;
	out->node_guid = a->node_guid;
	out->sys_image_guid = a->sys_image_guid;
	out->max_mr_size = a->max_mr_size;
	out->page_size_cap = a->page_size_cap;
	/* device_cap_flags_ex holds the 32 legacy bits and more; it is 0 on the legacy path. */
	out->device_cap_flags = ex.device_cap_flags_ex | a->device_cap_flags;
	out->ex_supported = ex.device_cap_flags_ex != 0 || ex.raw_packet_caps != 0;
	out->vendor_id = a->vendor_id;
	out->vendor_part_id = a->vendor_part_id;
	out->hw_ver = a->hw_ver;
	out->max_qp = (uint32_t)a->max_qp;
	out->max_qp_wr = (uint32_t)a->max_qp_wr;
	out->max_sge = (uint32_t)a->max_sge;
	out->max_sge_rd = (uint32_t)a->max_sge_rd;
	out->max_cq = (uint32_t)a->max_cq;
	out->max_cqe = (uint32_t)a->max_cqe;
	out->max_mr = (uint32_t)a->max_mr;
	out->max_pd = (uint32_t)a->max_pd;
	out->max_qp_rd_atom = (uint32_t)a->max_qp_rd_atom;
	out->max_res_rd_atom = (uint32_t)a->max_res_rd_atom;
	out->max_qp_init_rd_atom = (uint32_t)a->max_qp_init_rd_atom;
	out->atomic_cap = a->atomic_cap;
	out->max_mw = (uint32_t)a->max_mw;
	out->max_raw_ipv6_qp = (uint32_t)a->max_raw_ipv6_qp;
	out->max_raw_ethy_qp = (uint32_t)a->max_raw_ethy_qp;
	out->max_mcast_grp = (uint32_t)a->max_mcast_grp;
	out->max_mcast_qp_attach = (uint32_t)a->max_mcast_qp_attach;
	out->max_total_mcast_qp_attach = (uint32_t)a->max_total_mcast_qp_attach;
	out->max_ah = (uint32_t)a->max_ah;
	out->max_srq = (uint32_t)a->max_srq;
	out->max_srq_wr = (uint32_t)a->max_srq_wr;
	out->max_srq_sge = (uint32_t)a->max_srq_sge;
	out->raw_packet_caps = ex.raw_packet_caps;
	out->max_pkeys = a->max_pkeys;
	out->local_ca_ack_delay = a->local_ca_ack_delay;
	out->phys_port_cnt = a->phys_port_cnt;
	return 0;
}

int shim_query_port(struct ibv_context *ctx, uint8_t port, struct shim_port_attr *out)
{
	struct ibv_port_attr a;
	int ret;

	memset(&a, 0, sizeof(a));
	memset(out, 0, sizeof(*out));
	ret = ibv_query_port(ctx, port, &a);
	if (ret)
		return err_of(ret);
	out->state = a.state;
	out->max_mtu = a.max_mtu;
	out->active_mtu = a.active_mtu;
	out->gid_tbl_len = (uint32_t)a.gid_tbl_len;
	out->port_cap_flags = a.port_cap_flags;
	out->max_msg_sz = a.max_msg_sz;
	out->bad_pkey_cntr = a.bad_pkey_cntr;
	out->qkey_viol_cntr = a.qkey_viol_cntr;
	out->pkey_tbl_len = a.pkey_tbl_len;
	out->lid = a.lid;
	out->sm_lid = a.sm_lid;
	out->lmc = a.lmc;
	out->max_vl_num = a.max_vl_num;
	out->sm_sl = a.sm_sl;
	out->subnet_timeout = a.subnet_timeout;
	out->active_width = a.active_width;
	out->active_speed = a.active_speed;
	out->phys_state = a.phys_state;
	out->link_layer = a.link_layer;
	return 0;
}

int shim_query_gid(struct ibv_context *ctx, uint8_t port, int index, uint8_t gid[16])
{
	union ibv_gid g;
	int ret = ibv_query_gid(ctx, port, index, &g);

	if (ret)
		return err_of(ret);
	memcpy(gid, g.raw, 16);
	return 0;
}

int shim_query_gid_type(struct ibv_context *ctx, uint8_t port, uint32_t index, uint32_t *type)
{
	struct ibv_gid_entry e;
	int ret = ibv_query_gid_ex(ctx, port, index, &e, 0);

	if (ret)
		return err_of(ret);
	*type = e.gid_type;
	return 0;
}

int shim_get_async_event(struct ibv_context *ctx, struct shim_async_event *out, int *got)
{
	struct pollfd p = { .fd = ctx->async_fd, .events = POLLIN };
	struct ibv_async_event ev;
	int ret;

	*got = 0;
	ret = poll(&p, 1, 0);
	if (ret < 0)
		return errno == EINTR ? 0 : null_err();
	if (ret == 0)
		return 0;
	if (ibv_get_async_event(ctx, &ev)) {
		/* The fd is non-blocking: EAGAIN means another thread took the event. */
		return errno == EAGAIN ? 0 : null_err();
	}
	out->event_type = ev.event_type;
	switch (ev.event_type) {
	case IBV_EVENT_CQ_ERR:
		out->element_kind = SHIM_ELEMENT_CQ;
		out->element = ev.element.cq->handle;
		break;
	case IBV_EVENT_QP_FATAL:
	case IBV_EVENT_QP_REQ_ERR:
	case IBV_EVENT_QP_ACCESS_ERR:
	case IBV_EVENT_COMM_EST:
	case IBV_EVENT_SQ_DRAINED:
	case IBV_EVENT_PATH_MIG:
	case IBV_EVENT_PATH_MIG_ERR:
	case IBV_EVENT_QP_LAST_WQE_REACHED:
		out->element_kind = SHIM_ELEMENT_QP;
		out->element = ev.element.qp->qp_num;
		break;
	case IBV_EVENT_SRQ_ERR:
	case IBV_EVENT_SRQ_LIMIT_REACHED:
		out->element_kind = SHIM_ELEMENT_SRQ;
		out->element = ev.element.srq->handle;
		break;
	case IBV_EVENT_PORT_ACTIVE:
	case IBV_EVENT_PORT_ERR:
	case IBV_EVENT_LID_CHANGE:
	case IBV_EVENT_PKEY_CHANGE:
	case IBV_EVENT_SM_CHANGE:
	case IBV_EVENT_CLIENT_REREGISTER:
	case IBV_EVENT_GID_CHANGE:
		out->element_kind = SHIM_ELEMENT_PORT;
		out->element = (uint32_t)ev.element.port_num;
		break;
	default:
		out->element_kind = SHIM_ELEMENT_DEVICE;
		out->element = 0;
		break;
	}
	ibv_ack_async_event(&ev);
	*got = 1;
	return 0;
}

/* ---- PD and MR ---- */

int shim_alloc_pd(struct ibv_context *ctx, struct ibv_pd **out, uint32_t *handle)
{
	errno = 0;
	*out = ibv_alloc_pd(ctx);
	if (!*out)
		return null_err();
	*handle = (*out)->handle;
	return 0;
}

int shim_dealloc_pd(struct ibv_pd *pd)
{
	int ret = ibv_dealloc_pd(pd);
	return ret ? err_of(ret) : 0;
}

int shim_reg_mr(struct ibv_pd *pd, void *addr, size_t len, uint32_t access, struct ibv_mr **out,
		uint32_t *lkey, uint32_t *rkey)
{
	errno = 0;
	*out = ibv_reg_mr(pd, addr, len, (int)access);
	if (!*out)
		return null_err();
	*lkey = (*out)->lkey;
	*rkey = (*out)->rkey;
	return 0;
}

int shim_dereg_mr(struct ibv_mr *mr)
{
	int ret = ibv_dereg_mr(mr);
	return ret ? err_of(ret) : 0;
}

/* ---- memory windows ---- */

int shim_alloc_mw(struct ibv_pd *pd, uint32_t type, struct ibv_mw **out, uint32_t *handle,
		  uint32_t *rkey)
{
	errno = 0;
	*out = ibv_alloc_mw(pd, (enum ibv_mw_type)type);
	if (!*out)
		return null_err();
	*handle = (*out)->handle;
	*rkey = (*out)->rkey;
	return 0;
}

int shim_dealloc_mw(struct ibv_mw *mw)
{
	int ret = ibv_dealloc_mw(mw);
	return ret ? err_of(ret) : 0;
}

uint32_t shim_mw_rkey(const struct ibv_mw *mw)
{
	return mw->rkey;
}

void shim_mw_set_rkey(struct ibv_mw *mw, uint32_t rkey)
{
	mw->rkey = rkey;
}

int shim_bind_mw(struct ibv_qp *qp, struct ibv_mw *mw, struct ibv_mr *mr, uint64_t wr_id,
		 uint32_t send_flags, uint64_t addr, uint64_t length, uint32_t access,
		 uint32_t *rkey)
{
	struct ibv_mw_bind b;
	int ret;

	memset(&b, 0, sizeof(b));
	b.wr_id = wr_id;
	b.send_flags = send_flags;
	b.bind_info.mr = mr;
	b.bind_info.addr = addr;
	b.bind_info.length = length;
	b.bind_info.mw_access_flags = access;
	ret = ibv_bind_mw(qp, mw, &b);
	*rkey = mw->rkey;
	return ret ? err_of(ret) : 0;
}

/* ---- completion channels and CQs ---- */

int shim_create_comp_channel(struct ibv_context *ctx, struct ibv_comp_channel **out)
{
	int ret;

	errno = 0;
	*out = ibv_create_comp_channel(ctx);
	if (!*out)
		return null_err();
	ret = set_nonblock((*out)->fd);
	if (ret) {
		ibv_destroy_comp_channel(*out);
		*out = NULL;
	}
	return ret;
}

int shim_destroy_comp_channel(struct ibv_comp_channel *ch)
{
	int ret = ibv_destroy_comp_channel(ch);
	return ret ? err_of(ret) : 0;
}

int shim_get_cq_event(struct ibv_comp_channel *ch, int timeout_ms, void **cq_context, int *got)
{
	struct pollfd p = { .fd = ch->fd, .events = POLLIN };
	struct ibv_cq *cq;
	int ret;

	*got = 0;
	ret = poll(&p, 1, timeout_ms);
	if (ret < 0)
		return errno == EINTR ? 0 : null_err();
	if (ret == 0)
		return 0;
	if (ibv_get_cq_event(ch, &cq, cq_context))
		return errno == EAGAIN ? 0 : null_err();
	*got = 1;
	return 0;
}

int shim_create_cq(struct ibv_context *ctx, int cqe, void *cq_context, struct ibv_comp_channel *ch,
		   int comp_vector, struct ibv_cq **out, uint32_t *handle, uint32_t *actual_cqe)
{
	errno = 0;
	*out = ibv_create_cq(ctx, cqe, cq_context, ch, comp_vector);
	if (!*out)
		return null_err();
	*handle = (*out)->handle;
	*actual_cqe = (uint32_t)(*out)->cqe;
	return 0;
}

int shim_destroy_cq(struct ibv_cq *cq)
{
	int ret = ibv_destroy_cq(cq);
	return ret ? err_of(ret) : 0;
}

int shim_resize_cq(struct ibv_cq *cq, int cqe, uint32_t *actual_cqe)
{
	int ret = ibv_resize_cq(cq, cqe);
	if (ret)
		return err_of(ret);
	*actual_cqe = (uint32_t)cq->cqe;
	return 0;
}

int shim_req_notify_cq(struct ibv_cq *cq, int solicited_only)
{
	int ret = ibv_req_notify_cq(cq, solicited_only);
	return ret ? err_of(ret) : 0;
}

void shim_ack_cq_events(struct ibv_cq *cq, unsigned int n)
{
	ibv_ack_cq_events(cq, n);
}

int shim_poll_cq(struct ibv_cq *cq, int n, struct shim_wc *out, int *polled)
{
	struct ibv_wc wc[CHUNK];
	int total = 0;

	*polled = 0;
	while (total < n) {
		int want = n - total < CHUNK ? n - total : CHUNK;
		int got = ibv_poll_cq(cq, want, wc);
		if (got < 0) {
			*polled = total;
			/* Providers return various negative values; none is a reliable errno. */
			return EIO;
		}
		for (int i = 0; i < got; i++) {
			struct shim_wc *o = &out[total + i];
			o->wr_id = wc[i].wr_id;
			o->status = wc[i].status;
			o->opcode = wc[i].opcode;
			o->vendor_err = wc[i].vendor_err;
			o->byte_len = wc[i].byte_len;
			o->imm_data = (wc[i].wc_flags & IBV_WC_WITH_IMM) ? ntohl(wc[i].imm_data)
									   : wc[i].invalidated_rkey;
			o->qp_num = wc[i].qp_num;
			o->src_qp = wc[i].src_qp;
			o->wc_flags = wc[i].wc_flags;
			o->pkey_index = wc[i].pkey_index;
			o->slid = wc[i].slid;
			o->sl = wc[i].sl;
			o->dlid_path_bits = wc[i].dlid_path_bits;
			o->pad[0] = o->pad[1] = 0;
		}
		total += got;
		if (got < want)
			break;
	}
	*polled = total;
	return 0;
}

/* ---- SRQs ---- */

int shim_create_srq(struct ibv_pd *pd, struct shim_srq_attr *attr, struct ibv_srq **out,
		    uint32_t *handle)
{
	struct ibv_srq_init_attr init;

	memset(&init, 0, sizeof(init));
	init.attr.max_wr = attr->max_wr;
	init.attr.max_sge = attr->max_sge;
	init.attr.srq_limit = attr->srq_limit;
	errno = 0;
	*out = ibv_create_srq(pd, &init);
	if (!*out)
		return null_err();
	attr->max_wr = init.attr.max_wr;
	attr->max_sge = init.attr.max_sge;
	*handle = (*out)->handle;
	return 0;
}

int shim_destroy_srq(struct ibv_srq *srq)
{
	int ret = ibv_destroy_srq(srq);
	return ret ? err_of(ret) : 0;
}

int shim_modify_srq(struct ibv_srq *srq, const struct shim_srq_attr *attr, int mask)
{
	struct ibv_srq_attr a = {
		.max_wr = attr->max_wr, .max_sge = attr->max_sge, .srq_limit = attr->srq_limit
	};
	int ret = ibv_modify_srq(srq, &a, mask);
	return ret ? err_of(ret) : 0;
}

int shim_query_srq(struct ibv_srq *srq, struct shim_srq_attr *out)
{
	struct ibv_srq_attr a;
	int ret;

	memset(&a, 0, sizeof(a));
	ret = ibv_query_srq(srq, &a);
	if (ret)
		return err_of(ret);
	out->max_wr = a.max_wr;
	out->max_sge = a.max_sge;
	out->srq_limit = a.srq_limit;
	return 0;
}

/* Builds a chain of up to CHUNK receive WRs from `wrs`. */
static void build_recv_chain(struct ibv_recv_wr *w, const struct shim_recv_wr *wrs, size_t m)
{
	for (size_t i = 0; i < m; i++) {
		w[i].wr_id = wrs[i].wr_id;
		/* libibverbs takes a non-const list but only reads it. */
		w[i].sg_list = (struct ibv_sge *)wrs[i].sg_list;
		w[i].num_sge = (int)wrs[i].num_sge;
		w[i].next = i + 1 < m ? &w[i + 1] : NULL;
	}
}

/* Posts receives in chains of CHUNK to a QP or, when `srq` is set, to an SRQ; on a
 * refusal `*bad` is the index of the first request not posted. */
static int post_recv_chunks(struct ibv_qp *qp, struct ibv_srq *srq,
			    const struct shim_recv_wr *wrs, size_t n, size_t *bad)
{
	struct ibv_recv_wr w[CHUNK];

	for (size_t base = 0; base < n; base += CHUNK) {
		size_t m = n - base < CHUNK ? n - base : CHUNK;
		struct ibv_recv_wr *bad_wr = NULL;
		int ret;

		build_recv_chain(w, wrs + base, m);
		ret = srq ? ibv_post_srq_recv(srq, w, &bad_wr) : ibv_post_recv(qp, w, &bad_wr);
		if (ret) {
			*bad = base + (bad_wr ? (size_t)(bad_wr - w) : 0);
			return err_of(ret);
		}
	}
	return 0;
}

int shim_post_srq_recv(struct ibv_srq *srq, const struct shim_recv_wr *wrs, size_t n, size_t *bad)
{
	return post_recv_chunks(NULL, srq, wrs, n, bad);
}

/* ---- QPs ---- */

/* The fields the shim's flat structs share with libibverbs' by name, each a list for an
 * X macro (`X(field)` per field), so that both directions of a conversion copy the same
 * fields. The GRH's fields sit in `grh` on the libibverbs side. */
#define AH_GRH_FIELDS(X) X(flow_label) X(sgid_index) X(hop_limit) X(traffic_class)
#define AH_FIELDS(X) X(is_global) X(dlid) X(sl) X(src_path_bits) X(static_rate) X(port_num)
#define QP_CAP_FIELDS(X) \
	X(max_send_wr) X(max_recv_wr) X(max_send_sge) X(max_recv_sge) X(max_inline_data)
/* struct ibv_qp_attr's integer fields but sq_draining, which only a query reports (the
 * four enums, `cap` and the address vectors are converted on their own). */
#define QP_ATTR_INT_FIELDS(X)                                                             \
	X(qkey) X(rq_psn) X(sq_psn) X(dest_qp_num) X(qp_access_flags) X(pkey_index)        \
	X(alt_pkey_index) X(en_sqd_async_notify) X(max_rd_atomic) X(max_dest_rd_atomic)    \
	X(min_rnr_timer) X(port_num) X(timeout) X(retry_cnt) X(rnr_retry) X(alt_port_num) \
	X(alt_timeout) X(rate_limit)

/* `o->f = a->f`, and the same into or out of the GRH of a libibverbs address vector. */
#define COPY_FIELD(f) o->f = a->f;
#define COPY_TO_GRH(f) o->grh.f = a->f;
#define COPY_FROM_GRH(f) o->f = a->grh.f;

static void ah_to_ibv(struct ibv_ah_attr *o, const struct shim_ah_attr *a)
{
	memset(o, 0, sizeof(*o));
	memcpy(o->grh.dgid.raw, a->dgid, 16);
	AH_GRH_FIELDS(COPY_TO_GRH)
	AH_FIELDS(COPY_FIELD)
}

static void ah_from_ibv(struct shim_ah_attr *o, const struct ibv_ah_attr *a)
{
	memset(o, 0, sizeof(*o));
	memcpy(o->dgid, a->grh.dgid.raw, 16);
	AH_GRH_FIELDS(COPY_FROM_GRH)
	AH_FIELDS(COPY_FIELD)
}

static void cap_to_ibv(struct ibv_qp_cap *o, const struct shim_qp_cap *a)
{
	QP_CAP_FIELDS(COPY_FIELD)
}

static void cap_from_ibv(struct shim_qp_cap *o, const struct ibv_qp_cap *a)
{
	QP_CAP_FIELDS(COPY_FIELD)
}

int shim_create_qp(struct ibv_pd *pd, struct shim_qp_init_attr *attr, struct ibv_qp **out,
		   uint32_t *qp_num)
{
	struct ibv_qp_init_attr init;

	memset(&init, 0, sizeof(init));
	init.send_cq = attr->send_cq;
	init.recv_cq = attr->recv_cq;
	init.srq = attr->srq;
	cap_to_ibv(&init.cap, &attr->cap);
	init.qp_type = (enum ibv_qp_type)attr->qp_type;
	init.sq_sig_all = (int)attr->sq_sig_all;
	errno = 0;
	*out = ibv_create_qp(pd, &init);
	if (!*out)
		return null_err();
	cap_from_ibv(&attr->cap, &init.cap);
	*qp_num = (*out)->qp_num;
	return 0;
}

int shim_destroy_qp(struct ibv_qp *qp)
{
	int ret = ibv_destroy_qp(qp);
	return ret ? err_of(ret) : 0;
}

int shim_modify_qp(struct ibv_qp *qp, const struct shim_qp_attr *a, int mask)
{
	struct ibv_qp_attr attr;
	struct ibv_qp_attr *o = &attr;
	int ret;

	memset(o, 0, sizeof(*o));
	o->qp_state = (enum ibv_qp_state)a->qp_state;
	o->cur_qp_state = (enum ibv_qp_state)a->cur_qp_state;
	o->path_mtu = (enum ibv_mtu)a->path_mtu;
	o->path_mig_state = (enum ibv_mig_state)a->path_mig_state;
	QP_ATTR_INT_FIELDS(COPY_FIELD)
	cap_to_ibv(&o->cap, &a->cap);
	ah_to_ibv(&o->ah_attr, &a->ah_attr);
	ah_to_ibv(&o->alt_ah_attr, &a->alt_ah_attr);
	ret = ibv_modify_qp(qp, o, mask);
	return ret ? err_of(ret) : 0;
}

int shim_query_qp(struct ibv_qp *qp, int mask, struct shim_qp_attr *out, struct shim_qp_cap *cap)
{
	struct ibv_qp_attr attr;
	struct ibv_qp_init_attr init;
	const struct ibv_qp_attr *a = &attr;
	struct shim_qp_attr *o = out;
	int ret;

	memset(&attr, 0, sizeof(attr));
	memset(&init, 0, sizeof(init));
	memset(out, 0, sizeof(*out));
	ret = ibv_query_qp(qp, &attr, mask, &init);
	if (ret)
		return err_of(ret);
	o->qp_state = a->qp_state;
	o->cur_qp_state = a->cur_qp_state;
	o->path_mtu = a->path_mtu;
	o->path_mig_state = a->path_mig_state;
	QP_ATTR_INT_FIELDS(COPY_FIELD)
	o->sq_draining = a->sq_draining;
	cap_from_ibv(&o->cap, &a->cap);
	ah_from_ibv(&o->ah_attr, &a->ah_attr);
	ah_from_ibv(&o->alt_ah_attr, &a->alt_ah_attr);
	cap_from_ibv(cap, &init.cap);
	return 0;
}

int shim_post_send(struct ibv_qp *qp, const struct shim_send_wr *wrs, size_t n, size_t *bad)
{
	struct ibv_send_wr w[CHUNK];

	for (size_t base = 0; base < n; base += CHUNK) {
		size_t m = n - base < CHUNK ? n - base : CHUNK;
		struct ibv_send_wr *bad_wr = NULL;
		int ret;

		memset(w, 0, m * sizeof(w[0]));
		for (size_t i = 0; i < m; i++) {
			const struct shim_send_wr *s = &wrs[base + i];
			struct ibv_send_wr *o = &w[i];

			o->wr_id = s->wr_id;
			o->next = i + 1 < m ? &w[i + 1] : NULL;
			o->sg_list = (struct ibv_sge *)s->sg_list;
			o->num_sge = (int)s->num_sge;
			o->opcode = (enum ibv_wr_opcode)s->opcode;
			o->send_flags = s->send_flags;
			if (s->opcode != IBV_WR_LOCAL_INV && s->opcode != IBV_WR_SEND_WITH_INV)
				o->imm_data = htonl(s->imm_data);
			switch (s->opcode) {
			case IBV_WR_RDMA_WRITE:
			case IBV_WR_RDMA_WRITE_WITH_IMM:
			case IBV_WR_RDMA_READ:
				o->wr.rdma.remote_addr = s->remote_addr;
				o->wr.rdma.rkey = s->rkey;
				break;
			case IBV_WR_ATOMIC_CMP_AND_SWP:
			case IBV_WR_ATOMIC_FETCH_AND_ADD:
				o->wr.atomic.remote_addr = s->remote_addr;
				o->wr.atomic.compare_add = s->compare_add;
				o->wr.atomic.swap = s->swap;
				o->wr.atomic.rkey = s->rkey;
				break;
			case IBV_WR_LOCAL_INV:
			case IBV_WR_SEND_WITH_INV:
				o->invalidate_rkey = s->invalidate_rkey;
				break;
			case IBV_WR_BIND_MW:
				o->bind_mw.mw = s->mw;
				o->bind_mw.rkey = s->rkey;
				o->bind_mw.bind_info.mr = s->mr;
				o->bind_mw.bind_info.addr = s->bind_addr;
				o->bind_mw.bind_info.length = s->bind_length;
				o->bind_mw.bind_info.mw_access_flags = s->bind_access;
				break;
			default:
				break;
			}
			/* UD fields live in a union with the above; UD QPs only take SEND(_WITH_IMM). */
			if (s->ah) {
				o->wr.ud.ah = s->ah;
				o->wr.ud.remote_qpn = s->remote_qpn;
				o->wr.ud.remote_qkey = s->remote_qkey;
			}
		}
		ret = ibv_post_send(qp, w, &bad_wr);
		if (ret) {
			*bad = base + (bad_wr ? (size_t)(bad_wr - w) : 0);
			return err_of(ret);
		}
	}
	return 0;
}

int shim_post_recv(struct ibv_qp *qp, const struct shim_recv_wr *wrs, size_t n, size_t *bad)
{
	return post_recv_chunks(qp, NULL, wrs, n, bad);
}

int shim_attach_mcast(struct ibv_qp *qp, const uint8_t gid[16], uint16_t lid)
{
	union ibv_gid g;
	int ret;

	memcpy(g.raw, gid, 16);
	ret = ibv_attach_mcast(qp, &g, lid);
	return ret ? err_of(ret) : 0;
}

int shim_detach_mcast(struct ibv_qp *qp, const uint8_t gid[16], uint16_t lid)
{
	union ibv_gid g;
	int ret;

	memcpy(g.raw, gid, 16);
	ret = ibv_detach_mcast(qp, &g, lid);
	return ret ? err_of(ret) : 0;
}

/* ---- AHs ---- */

int shim_create_ah(struct ibv_pd *pd, const struct shim_ah_attr *attr, struct ibv_ah **out)
{
	struct ibv_ah_attr a;

	ah_to_ibv(&a, attr);
	errno = 0;
	*out = ibv_create_ah(pd, &a);
	return *out ? 0 : null_err();
}

int shim_destroy_ah(struct ibv_ah *ah)
{
	int ret = ibv_destroy_ah(ah);
	return ret ? err_of(ret) : 0;
}

/* ---- flows ---- */

#define MAX_FLOW_SPECS 8

struct flow_buf {
	struct ibv_flow_attr attr;
	unsigned char specs[MAX_FLOW_SPECS * sizeof(struct ibv_flow_spec)];
} __attribute__((aligned(8)));

/* Lays out an ibv_flow_attr followed by its specs in `buf`, as ibv_create_flow takes it. */
static int build_flow(struct flow_buf *buf, const struct shim_flow_attr *attr,
		      const struct shim_flow_spec *specs, size_t n)
{
	unsigned char *p = buf->specs;

	if (n > MAX_FLOW_SPECS)
		return EINVAL;
	memset(buf, 0, sizeof(*buf));
	for (size_t i = 0; i < n; i++) {
		const struct shim_flow_spec *s = &specs[i];

		switch (s->type) {
		case IBV_FLOW_SPEC_ETH: {
			struct ibv_flow_spec_eth *e = (struct ibv_flow_spec_eth *)p;
			e->type = IBV_FLOW_SPEC_ETH;
			e->size = sizeof(*e);
			memcpy(e->val.dst_mac, s->dst_mac, 6);
			memcpy(e->val.src_mac, s->src_mac, 6);
			e->val.ether_type = htons(s->ether_type);
			e->val.vlan_tag = htons(s->vlan_tag);
			memcpy(e->mask.dst_mac, s->mask_dst_mac, 6);
			memcpy(e->mask.src_mac, s->mask_src_mac, 6);
			e->mask.ether_type = htons(s->mask_ether_type);
			e->mask.vlan_tag = htons(s->mask_vlan_tag);
			p += sizeof(*e);
			break;
		}
		case IBV_FLOW_SPEC_IPV4: {
			struct ibv_flow_spec_ipv4 *e = (struct ibv_flow_spec_ipv4 *)p;
			e->type = IBV_FLOW_SPEC_IPV4;
			e->size = sizeof(*e);
			e->val.src_ip = htonl(s->src_ip);
			e->val.dst_ip = htonl(s->dst_ip);
			e->mask.src_ip = htonl(s->mask_src_ip);
			e->mask.dst_ip = htonl(s->mask_dst_ip);
			p += sizeof(*e);
			break;
		}
		case IBV_FLOW_SPEC_TCP:
		case IBV_FLOW_SPEC_UDP: {
			struct ibv_flow_spec_tcp_udp *e = (struct ibv_flow_spec_tcp_udp *)p;
			e->type = (enum ibv_flow_spec_type)s->type;
			e->size = sizeof(*e);
			e->val.dst_port = htons(s->dst_port);
			e->val.src_port = htons(s->src_port);
			e->mask.dst_port = htons(s->mask_dst_port);
			e->mask.src_port = htons(s->mask_src_port);
			p += sizeof(*e);
			break;
		}
		default:
			return EINVAL;
		}
	}
	buf->attr.comp_mask = 0;
	buf->attr.type = (enum ibv_flow_attr_type)attr->type;
	buf->attr.size = (uint16_t)(sizeof(buf->attr) + (size_t)(p - buf->specs));
	buf->attr.priority = attr->priority;
	buf->attr.num_of_specs = (uint8_t)n;
	buf->attr.port = attr->port;
	buf->attr.flags = attr->flags;
	return 0;
}

int shim_flow_bytes(const struct shim_flow_attr *attr, const struct shim_flow_spec *specs,
		    size_t n, unsigned char *out, size_t cap, size_t *len)
{
	struct flow_buf buf;
	int ret = build_flow(&buf, attr, specs, n);

	if (ret)
		return ret;
	*len = buf.attr.size;
	if (*len > cap)
		return ERANGE;
	memcpy(out, &buf, *len);
	return 0;
}

int shim_create_flow(struct ibv_qp *qp, const struct shim_flow_attr *attr,
		     const struct shim_flow_spec *specs, size_t n, struct ibv_flow **out)
{
	struct flow_buf buf;
	int ret = build_flow(&buf, attr, specs, n);

	if (ret)
		return ret;
	errno = 0;
	*out = ibv_create_flow(qp, &buf.attr);
	return *out ? 0 : null_err();
}

int shim_destroy_flow(struct ibv_flow *flow)
{
	int ret = ibv_destroy_flow(flow);
	return ret ? err_of(ret) : 0;
}
