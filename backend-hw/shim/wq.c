/*
 * backend-hw's shim over libibverbs' work queues, indirection tables and RSS QPs, and
 * mlx5 direct verbs' striding RQs (see shim.h).
 *
 * libmlx5 is not linked: like spead2 (gen/gen_loader.py, src/common_loader_utils.cpp),
 * the shim loads libmlx5.so.1 with dlopen the first time a striding WQ is asked for, so
 * backend-hw builds and runs where it is absent (a striding WQ is then EOPNOTSUPP). It is the library
 * libibverbs loaded as the mlx5 provider (Debian's ibverbs-providers ships both as one
 * file), or the emulator's libmlx5.so.1 when that is first on LD_LIBRARY_PATH.
 */
#include "shim.h"

#include <dlfcn.h>
#include <endian.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#if __has_include(<infiniband/mlx5dv.h>)
#include <infiniband/mlx5dv.h>
#define HAVE_MLX5DV 1
#endif

static int null_errno(void)
{
	return errno > 0 ? errno : EIO;
}

static int ret_errno(int ret)
{
	if (ret > 0)
		return ret;
	if (ret < 0 && ret > -4096 && ret != -1)
		return -ret;
	return errno > 0 ? errno : EIO;
}

#ifdef HAVE_MLX5DV
/* The mlx5 direct verbs the shim uses, from libmlx5.so.1 (default symbol versions). */
static struct {
	pthread_once_t once;
	int loaded;
	bool (*is_supported)(struct ibv_device *);
	int (*query_device)(struct ibv_context *, struct mlx5dv_context *);
	struct ibv_wq *(*create_wq)(struct ibv_context *, struct ibv_wq_init_attr *,
				    struct mlx5dv_wq_init_attr *);
	int (*init_obj)(struct mlx5dv_obj *, uint64_t);
} mlx5 = { .once = PTHREAD_ONCE_INIT };

static void load_mlx5(void)
{
	void *h = dlopen("libmlx5.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!h)
		return;
	*(void **)&mlx5.is_supported = dlsym(h, "mlx5dv_is_supported");
	*(void **)&mlx5.query_device = dlsym(h, "mlx5dv_query_device");
	*(void **)&mlx5.create_wq = dlsym(h, "mlx5dv_create_wq");
	*(void **)&mlx5.init_obj = dlsym(h, "mlx5dv_init_obj");
	/* The handle stays open: the functions are used for the life of the process. */
	mlx5.loaded = mlx5.is_supported && mlx5.query_device && mlx5.create_wq && mlx5.init_obj;
}

/* mlx5dv_create_wq with a striding geometry on a device whose striding RQ caps (from
 * mlx5dv_query_device) include RAW_PACKET QPs, as spead2 checks; then the ring. */
static int create_striding(struct ibv_context *ctx, struct ibv_wq_init_attr *wa,
			   const struct shim_striding *s, struct ibv_wq **out,
			   struct shim_wq_ring *ring)
{
	struct mlx5dv_context dvc;
	struct mlx5dv_wq_init_attr dv;
	struct mlx5dv_rwq rwq;
	struct mlx5dv_obj obj;
	int ret;

	pthread_once(&mlx5.once, load_mlx5);
	if (!mlx5.loaded || !mlx5.is_supported(ctx->device))
		return EOPNOTSUPP;
	memset(&dvc, 0, sizeof(dvc));
	dvc.comp_mask = MLX5DV_CONTEXT_MASK_STRIDING_RQ;
	ret = mlx5.query_device(ctx, &dvc);
	if (ret)
		return ret_errno(ret);
	if (!(dvc.comp_mask & MLX5DV_CONTEXT_MASK_STRIDING_RQ) ||
	    !(dvc.striding_rq_caps.supported_qpts & (1u << IBV_QPT_RAW_PACKET)))
		return EOPNOTSUPP;
	memset(&dv, 0, sizeof(dv));
	dv.comp_mask = MLX5DV_WQ_INIT_ATTR_MASK_STRIDING_RQ;
	dv.striding_rq_attrs.single_stride_log_num_of_bytes = s->log_stride_bytes;
	dv.striding_rq_attrs.single_wqe_log_num_of_strides = s->log_num_strides;
	dv.striding_rq_attrs.two_byte_shift_en = (uint8_t)(s->two_byte_shift != 0);
	errno = 0;
	*out = mlx5.create_wq(ctx, wa, &dv);
	if (!*out)
		return null_errno();
	memset(&obj, 0, sizeof(obj));
	memset(&rwq, 0, sizeof(rwq));
	obj.rwq.in = *out;
	obj.rwq.out = &rwq;
	ret = mlx5.init_obj(&obj, MLX5DV_OBJ_RWQ);
	if (ret) {
		ibv_destroy_wq(*out);
		*out = NULL;
		return ret_errno(ret);
	}
	ring->buf = rwq.buf;
	ring->dbrec = (uint32_t *)rwq.dbrec;
	ring->wqe_cnt = rwq.wqe_cnt;
	ring->stride = rwq.stride;
	return 0;
}

void shim_mprq_post(const struct shim_wq_ring *ring, uint32_t head, uint64_t addr, uint32_t len,
		    uint32_t lkey)
{
	struct mlx5_mprq_wqe *wqe =
		(struct mlx5_mprq_wqe *)((char *)ring->buf +
					 (size_t)(head & (ring->wqe_cnt - 1)) * ring->stride);

	memset(&wqe->nseg, 0, sizeof(wqe->nseg));
	wqe->dseg.byte_count = htobe32(len);
	wqe->dseg.lkey = htobe32(lkey);
	wqe->dseg.addr = htobe64(addr);
	/* The entry before the doorbell record (spead2 src/common_ibv.cpp,
	 * ibv_wq_mprq_t::post_recv). */
	atomic_store_explicit((_Atomic uint32_t *)ring->dbrec, htobe32((head + 1) & 0xffff),
			      memory_order_release);
}
#else
static int create_striding(struct ibv_context *ctx, struct ibv_wq_init_attr *wa,
			   const struct shim_striding *s, struct ibv_wq **out,
			   struct shim_wq_ring *ring)
{
	(void)ctx, (void)wa, (void)s, (void)out, (void)ring;
	return EOPNOTSUPP;
}

void shim_mprq_post(const struct shim_wq_ring *ring, uint32_t head, uint64_t addr, uint32_t len,
		    uint32_t lkey)
{
	/* No striding WQ can exist without mlx5dv.h. */
	(void)ring, (void)head, (void)addr, (void)len, (void)lkey;
}
#endif

int shim_create_wq(struct ibv_context *ctx, struct ibv_pd *pd, struct ibv_cq *cq, uint32_t max_wr,
		   uint32_t max_sge, const struct shim_striding *striding, struct ibv_wq **out,
		   uint32_t *wq_num, struct shim_wq_ring *ring)
{
	struct ibv_wq_init_attr wa;
	int ret;

	memset(&wa, 0, sizeof(wa));
	memset(ring, 0, sizeof(*ring));
	wa.wq_type = IBV_WQT_RQ;
	wa.max_wr = max_wr;
	wa.max_sge = max_sge;
	wa.pd = pd;
	wa.cq = cq;
	*out = NULL;
	if (striding) {
		ret = create_striding(ctx, &wa, striding, out, ring);
		if (ret)
			return ret;
	} else {
		errno = 0;
		*out = ibv_create_wq(ctx, &wa);
		if (!*out)
			return null_errno();
	}
	*wq_num = (*out)->wq_num;
	return 0;
}

int shim_destroy_wq(struct ibv_wq *wq)
{
	int ret = ibv_destroy_wq(wq);
	return ret ? ret_errno(ret) : 0;
}

int shim_modify_wq(struct ibv_wq *wq, uint32_t state, int32_t cur)
{
	struct ibv_wq_attr a;
	int ret;

	memset(&a, 0, sizeof(a));
	a.attr_mask = IBV_WQ_ATTR_STATE;
	a.wq_state = (enum ibv_wq_state)state;
	if (cur >= 0) {
		a.attr_mask |= IBV_WQ_ATTR_CURR_STATE;
		a.curr_wq_state = (enum ibv_wq_state)cur;
	}
	ret = ibv_modify_wq(wq, &a);
	return ret ? ret_errno(ret) : 0;
}

uint32_t shim_wq_state(const struct ibv_wq *wq)
{
	return (uint32_t)wq->state;
}

int shim_post_wq_recv(struct ibv_wq *wq, const struct shim_recv_wr *wrs, size_t n, size_t *bad)
{
	for (size_t i = 0; i < n; i++) {
		struct ibv_recv_wr w, *bad_wr = NULL;
		int ret;

		memset(&w, 0, sizeof(w));
		w.wr_id = wrs[i].wr_id;
		/* libibverbs takes a non-const list but only reads it. */
		w.sg_list = (struct ibv_sge *)wrs[i].sg_list;
		w.num_sge = (int)wrs[i].num_sge;
		ret = ibv_post_wq_recv(wq, &w, &bad_wr);
		if (ret) {
			*bad = i;
			return ret_errno(ret);
		}
	}
	return 0;
}

int shim_create_rwq_ind_table(struct ibv_context *ctx, struct ibv_wq **wqs, uint32_t log_size,
			      struct ibv_rwq_ind_table **out, uint32_t *num)
{
	struct ibv_rwq_ind_table_init_attr a;

	memset(&a, 0, sizeof(a));
	a.log_ind_tbl_size = log_size;
	a.ind_tbl = wqs;
	errno = 0;
	*out = ibv_create_rwq_ind_table(ctx, &a);
	if (!*out)
		return null_errno();
	*num = (*out)->ind_tbl_num;
	return 0;
}

int shim_destroy_rwq_ind_table(struct ibv_rwq_ind_table *table)
{
	int ret = ibv_destroy_rwq_ind_table(table);
	return ret ? ret_errno(ret) : 0;
}

int shim_create_rss_qp(struct ibv_context *ctx, struct ibv_pd *pd,
		       struct ibv_rwq_ind_table *table, uint8_t function, const uint8_t *key,
		       uint8_t key_len, uint64_t fields, struct ibv_qp **out, uint32_t *qp_num)
{
	struct ibv_qp_init_attr_ex a;

	memset(&a, 0, sizeof(a));
	a.qp_type = IBV_QPT_RAW_PACKET;
	a.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_IND_TABLE | IBV_QP_INIT_ATTR_RX_HASH;
	a.pd = pd;
	a.rwq_ind_tbl = table;
	a.rx_hash_conf.rx_hash_function = function;
	a.rx_hash_conf.rx_hash_key_len = key_len;
	/* libibverbs takes a non-const key but only reads it. */
	a.rx_hash_conf.rx_hash_key = (uint8_t *)key;
	a.rx_hash_conf.rx_hash_fields_mask = fields;
	errno = 0;
	*out = ibv_create_qp_ex(ctx, &a);
	if (!*out)
		return null_errno();
	*qp_num = (*out)->qp_num;
	return 0;
}
