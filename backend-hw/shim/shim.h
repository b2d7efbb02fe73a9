/*
 * A flat C API over libibverbs for backend-hw.
 *
 * Every struct here is mirrored by a #[repr(C)] struct in src/ffi.rs; shim_layout() reports
 * their sizes and field offsets so a unit test can check both sides agree. The structs
 * named for a verbs-api struct (shim_device_attr, shim_port_attr, shim_qp_cap, shim_qp_attr)
 * hold its fields in its order, as fixed-width values: ffi.rs declares them from verbs-api's
 * field lists (verbs_api::*_c_struct!), and any fields of the shim's own follow them. Every function
 * returns 0 or a positive errno. Values (opcodes, flags, masks, states) are libibverbs'
 * numeric values, passed through untouched; imm_data is in host order on our side.
 */
#ifndef BACKEND_HW_SHIM_H
#define BACKEND_HW_SHIM_H

#include <stddef.h>
#include <stdint.h>

#include <infiniband/verbs.h>

#define SHIM_NAME_LEN 64
#define SHIM_PATH_LEN 256 /* IBV_SYSFS_PATH_MAX */

struct shim_device_info {
	char name[SHIM_NAME_LEN];
	uint64_t guid; /* as ibv_get_device_guid gives it (big-endian value) */
	int32_t node_type;
	int32_t transport_type;
	char dev_path[SHIM_PATH_LEN]; /* the uverbs device's sysfs directory */
};

struct shim_context_info {
	int32_t num_comp_vectors;
	int32_t async_fd;
};

struct shim_device_attr {
	char fw_ver[64];
	uint64_t node_guid;
	uint64_t sys_image_guid;
	uint64_t max_mr_size;
	uint64_t page_size_cap;
	uint32_t vendor_id;
	uint32_t vendor_part_id;
	uint32_t hw_ver;
	uint32_t max_qp;
	uint32_t max_qp_wr;
	uint64_t device_cap_flags; /* device_cap_flags_ex when the extended query works */
	uint32_t max_sge;
	uint32_t max_sge_rd;
	uint32_t max_cq;
	uint32_t max_cqe;
	uint32_t max_mr;
	uint32_t max_pd;
	uint32_t max_qp_rd_atom;
	uint32_t max_res_rd_atom;
	uint32_t max_qp_init_rd_atom;
	uint32_t atomic_cap;
	uint32_t max_mw;
	uint32_t max_raw_ipv6_qp;
	uint32_t max_raw_ethy_qp;
	uint32_t max_mcast_grp;
	uint32_t max_mcast_qp_attach;
	uint32_t max_total_mcast_qp_attach;
	uint32_t max_ah;
	uint32_t max_srq;
	uint32_t max_srq_wr;
	uint32_t max_srq_sge;
	uint16_t max_pkeys;
	uint8_t local_ca_ack_delay;
	uint8_t phys_port_cnt;
	uint32_t raw_packet_caps;
	uint32_t ex_supported; /* 1 when ibv_query_device_ex gave the extended fields */
};

struct shim_port_attr {
	uint32_t state;
	uint32_t max_mtu;
	uint32_t active_mtu;
	uint32_t gid_tbl_len;
	uint32_t port_cap_flags;
	uint32_t max_msg_sz;
	uint32_t bad_pkey_cntr;
	uint32_t qkey_viol_cntr;
	uint16_t pkey_tbl_len;
	uint16_t lid;
	uint16_t sm_lid;
	uint8_t lmc;
	uint8_t max_vl_num;
	uint8_t sm_sl;
	uint8_t subnet_timeout;
	uint8_t active_width;
	uint8_t active_speed;
	uint8_t phys_state;
	uint8_t link_layer;
	uint8_t pad[2];
};

struct shim_ah_attr {
	uint8_t dgid[16];
	uint32_t flow_label;
	uint8_t sgid_index;
	uint8_t hop_limit;
	uint8_t traffic_class;
	uint8_t is_global;
	uint16_t dlid;
	uint8_t sl;
	uint8_t src_path_bits;
	uint8_t static_rate;
	uint8_t port_num;
	uint8_t pad[2];
};

struct shim_qp_cap {
	uint32_t max_send_wr;
	uint32_t max_recv_wr;
	uint32_t max_send_sge;
	uint32_t max_recv_sge;
	uint32_t max_inline_data;
};

struct shim_qp_attr {
	uint32_t qp_state;
	uint32_t cur_qp_state;
	uint32_t path_mtu;
	uint32_t path_mig_state;
	uint32_t qkey;
	uint32_t rq_psn;
	uint32_t sq_psn;
	uint32_t dest_qp_num;
	uint32_t qp_access_flags;
	struct shim_qp_cap cap;
	struct shim_ah_attr ah_attr;
	struct shim_ah_attr alt_ah_attr;
	uint16_t pkey_index;
	uint16_t alt_pkey_index;
	uint8_t en_sqd_async_notify;
	uint8_t sq_draining;
	uint8_t max_rd_atomic;
	uint8_t max_dest_rd_atomic;
	uint8_t min_rnr_timer;
	uint8_t port_num;
	uint8_t timeout;
	uint8_t retry_cnt;
	uint8_t rnr_retry;
	uint8_t alt_port_num;
	uint8_t alt_timeout;
	uint32_t rate_limit;
};

struct shim_qp_init_attr {
	struct ibv_cq *send_cq;
	struct ibv_cq *recv_cq;
	struct ibv_srq *srq; /* may be NULL */
	struct shim_qp_cap cap; /* in: requested; out: what the device gave */
	uint32_t qp_type;
	uint32_t sq_sig_all;
};

struct shim_srq_attr {
	uint32_t max_wr;
	uint32_t max_sge;
	uint32_t srq_limit;
};

struct shim_send_wr {
	uint64_t wr_id;
	const struct ibv_sge *sg_list;
	uint32_t num_sge;
	uint32_t opcode;
	uint32_t send_flags;
	uint32_t imm_data; /* host order */
	uint64_t remote_addr;
	uint64_t compare_add;
	uint64_t swap;
	uint32_t rkey;
	uint32_t remote_qpn;
	uint32_t remote_qkey;
	uint32_t invalidate_rkey; /* LOCAL_INV, SEND_WITH_INV */
	struct ibv_ah *ah; /* UD only */
	struct ibv_mw *mw; /* BIND_MW: the window, its new rkey in rkey */
	struct ibv_mr *mr; /* BIND_MW: the region */
	uint64_t bind_addr;
	uint64_t bind_length;
	uint32_t bind_access;
	uint32_t pad2;
};

struct shim_recv_wr {
	uint64_t wr_id;
	const struct ibv_sge *sg_list;
	uint32_t num_sge;
	uint32_t pad;
};

struct shim_wc {
	uint64_t wr_id;
	uint32_t status;
	uint32_t opcode;
	uint32_t vendor_err;
	uint32_t byte_len;
	uint32_t imm_data; /* host order (invalidated_rkey as is with WITH_INV) */
	uint32_t qp_num;
	uint32_t src_qp;
	uint32_t wc_flags;
	uint16_t pkey_index;
	uint16_t slid;
	uint8_t sl;
	uint8_t dlid_path_bits;
	uint8_t pad[2];
};

/* One flow spec; the fields for `type` are used, all in host order. */
struct shim_flow_spec {
	uint32_t type; /* IBV_FLOW_SPEC_ETH, _IPV4, _TCP, _UDP */
	uint8_t dst_mac[6];
	uint8_t src_mac[6];
	uint16_t ether_type;
	uint16_t vlan_tag;
	uint8_t mask_dst_mac[6];
	uint8_t mask_src_mac[6];
	uint16_t mask_ether_type;
	uint16_t mask_vlan_tag;
	uint32_t src_ip;
	uint32_t dst_ip;
	uint32_t mask_src_ip;
	uint32_t mask_dst_ip;
	uint16_t dst_port;
	uint16_t src_port;
	uint16_t mask_dst_port;
	uint16_t mask_src_port;
};

struct shim_flow_attr {
	uint32_t type;
	uint32_t flags;
	uint16_t priority;
	uint8_t port;
	uint8_t pad;
};

struct shim_async_event {
	uint32_t event_type;
	uint32_t element_kind; /* 0 device, 1 cq handle, 2 qp_num, 3 srq handle, 4 port */
	uint32_t element;
};

enum {
	SHIM_ELEMENT_DEVICE = 0,
	SHIM_ELEMENT_CQ = 1,
	SHIM_ELEMENT_QP = 2,
	SHIM_ELEMENT_SRQ = 3,
	SHIM_ELEMENT_PORT = 4,
};

/* A work queue's ring as mlx5dv_init_obj (MLX5DV_OBJ_RWQ) gives it, for a striding RQ
 * (whose entries the caller writes itself); all zero for an ordinary WQ. */
struct shim_wq_ring {
	void *buf;
	uint32_t *dbrec; /* dbrec[0]: the receive doorbell record, big-endian */
	uint32_t wqe_cnt;
	uint32_t stride;
};

/* The striding RQ geometry of mlx5dv_create_wq (struct mlx5dv_striding_rq_init_attr). */
struct shim_striding {
	uint32_t log_stride_bytes;
	uint32_t log_num_strides;
	uint32_t two_byte_shift;
};

size_t shim_layout(const uint32_t **table);
long shim_page_size(void);

int shim_get_device_list(struct shim_device_info *out, int cap, int *num);
int shim_open_device(const char *name, struct ibv_context **out, struct shim_context_info *info);
int shim_close_device(struct ibv_context *ctx);
int shim_query_device(struct ibv_context *ctx, struct shim_device_attr *out);
int shim_query_port(struct ibv_context *ctx, uint8_t port, struct shim_port_attr *out);
int shim_query_gid(struct ibv_context *ctx, uint8_t port, int index, uint8_t gid[16]);
int shim_query_gid_type(struct ibv_context *ctx, uint8_t port, uint32_t index, uint32_t *type);
int shim_get_async_event(struct ibv_context *ctx, struct shim_async_event *out, int *got);

int shim_alloc_pd(struct ibv_context *ctx, struct ibv_pd **out, uint32_t *handle);
int shim_dealloc_pd(struct ibv_pd *pd);
int shim_reg_mr(struct ibv_pd *pd, void *addr, size_t len, uint32_t access, struct ibv_mr **out,
		uint32_t *lkey, uint32_t *rkey);
int shim_dereg_mr(struct ibv_mr *mr);
int shim_alloc_mw(struct ibv_pd *pd, uint32_t type, struct ibv_mw **out, uint32_t *handle,
		  uint32_t *rkey);
int shim_dealloc_mw(struct ibv_mw *mw);
uint32_t shim_mw_rkey(const struct ibv_mw *mw);
/* What a caller of ibv_post_send does after posting a type 2 bind: mw->rkey = new. */
void shim_mw_set_rkey(struct ibv_mw *mw, uint32_t rkey);
/* ibv_bind_mw (type 1): the window's rkey afterwards in *rkey. */
int shim_bind_mw(struct ibv_qp *qp, struct ibv_mw *mw, struct ibv_mr *mr, uint64_t wr_id,
		 uint32_t send_flags, uint64_t addr, uint64_t length, uint32_t access,
		 uint32_t *rkey);

int shim_create_comp_channel(struct ibv_context *ctx, struct ibv_comp_channel **out);
int shim_destroy_comp_channel(struct ibv_comp_channel *ch);
int shim_get_cq_event(struct ibv_comp_channel *ch, int timeout_ms, void **cq_context, int *got);

int shim_create_cq(struct ibv_context *ctx, int cqe, void *cq_context, struct ibv_comp_channel *ch,
		   int comp_vector, struct ibv_cq **out, uint32_t *handle, uint32_t *actual_cqe);
int shim_destroy_cq(struct ibv_cq *cq);
int shim_resize_cq(struct ibv_cq *cq, int cqe, uint32_t *actual_cqe);
int shim_req_notify_cq(struct ibv_cq *cq, int solicited_only);
void shim_ack_cq_events(struct ibv_cq *cq, unsigned int n);
int shim_poll_cq(struct ibv_cq *cq, int n, struct shim_wc *out, int *polled);

int shim_create_srq(struct ibv_pd *pd, struct shim_srq_attr *attr, struct ibv_srq **out,
		    uint32_t *handle);
int shim_destroy_srq(struct ibv_srq *srq);
int shim_modify_srq(struct ibv_srq *srq, const struct shim_srq_attr *attr, int mask);
int shim_query_srq(struct ibv_srq *srq, struct shim_srq_attr *out);
int shim_post_srq_recv(struct ibv_srq *srq, const struct shim_recv_wr *wrs, size_t n, size_t *bad);

int shim_create_qp(struct ibv_pd *pd, struct shim_qp_init_attr *attr, struct ibv_qp **out,
		   uint32_t *qp_num);
int shim_destroy_qp(struct ibv_qp *qp);
int shim_modify_qp(struct ibv_qp *qp, const struct shim_qp_attr *attr, int mask);
int shim_query_qp(struct ibv_qp *qp, int mask, struct shim_qp_attr *out, struct shim_qp_cap *cap);
int shim_post_send(struct ibv_qp *qp, const struct shim_send_wr *wrs, size_t n, size_t *bad);
int shim_post_recv(struct ibv_qp *qp, const struct shim_recv_wr *wrs, size_t n, size_t *bad);
int shim_attach_mcast(struct ibv_qp *qp, const uint8_t gid[16], uint16_t lid);
int shim_detach_mcast(struct ibv_qp *qp, const uint8_t gid[16], uint16_t lid);

int shim_create_ah(struct ibv_pd *pd, const struct shim_ah_attr *attr, struct ibv_ah **out);
int shim_destroy_ah(struct ibv_ah *ah);

int shim_create_flow(struct ibv_qp *qp, const struct shim_flow_attr *attr,
		     const struct shim_flow_spec *specs, size_t n, struct ibv_flow **out);
int shim_destroy_flow(struct ibv_flow *flow);
/* The bytes shim_create_flow hands to ibv_create_flow (for tests). */
int shim_flow_bytes(const struct shim_flow_attr *attr, const struct shim_flow_spec *specs,
		    size_t n, unsigned char *out, size_t cap, size_t *len);

/* ---- work queues, indirection tables, RSS QPs (wq.c) ---- */

/* ibv_create_wq, or with `striding` mlx5dv_create_wq through libmlx5.so.1 loaded at run
 * time (EOPNOTSUPP when it cannot be loaded or the device is not an mlx5), whose ring it
 * hands out in `ring`. */
int shim_create_wq(struct ibv_context *ctx, struct ibv_pd *pd, struct ibv_cq *cq, uint32_t max_wr,
		   uint32_t max_sge, const struct shim_striding *striding, struct ibv_wq **out,
		   uint32_t *wq_num, struct shim_wq_ring *ring);
int shim_destroy_wq(struct ibv_wq *wq);
/* ibv_modify_wq of the state; `cur` < 0: no IBV_WQ_ATTR_CURR_STATE. */
int shim_modify_wq(struct ibv_wq *wq, uint32_t state, int32_t cur);
/* What libibverbs records as the WQ's state (set by each successful modify). */
uint32_t shim_wq_state(const struct ibv_wq *wq);
int shim_post_wq_recv(struct ibv_wq *wq, const struct shim_recv_wr *wrs, size_t n, size_t *bad);
/* Writes entry `head` of a striding RQ's ring (a struct mlx5_mprq_wqe) and then, with
 * release ordering, the doorbell record (head + 1), as spead2 posts to its
 * multi-packet receive queue. */
void shim_mprq_post(const struct shim_wq_ring *ring, uint32_t head, uint64_t addr, uint32_t len,
		    uint32_t lkey);
/* ibv_create_rwq_ind_table of `1 << log_size` WQs. */
int shim_create_rwq_ind_table(struct ibv_context *ctx, struct ibv_wq **wqs, uint32_t log_size,
			      struct ibv_rwq_ind_table **out, uint32_t *num);
int shim_destroy_rwq_ind_table(struct ibv_rwq_ind_table *table);
/* ibv_create_qp_ex of a RAW_PACKET QP with IBV_QP_INIT_ATTR_IND_TABLE and _RX_HASH. */
int shim_create_rss_qp(struct ibv_context *ctx, struct ibv_pd *pd,
		       struct ibv_rwq_ind_table *table, uint8_t function, const uint8_t *key,
		       uint8_t key_len, uint64_t fields, struct ibv_qp **out, uint32_t *qp_num);

#endif
