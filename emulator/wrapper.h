/* What bindgen reads: rdma-core's public verbs and connection-manager headers (Debian's
   libibverbs-dev and librdmacm-dev) and the kernel ABI structs that libibverbs' marshalling
   helpers convert (linux-libc-dev); and from libmlx5's direct-verbs header the striding-RQ
   structs (`mlx5dv_context`, `mlx5dv_obj`, `mlx5dv_wq_init_attr`, the receive WQE segments). */
#include <infiniband/verbs.h>
#include <infiniband/sa.h>
#include <rdma/ib_user_verbs.h>
#include <rdma/ib_user_sa.h>
#include <rdma/rdma_cma.h>
#include <infiniband/mlx5dv.h>
