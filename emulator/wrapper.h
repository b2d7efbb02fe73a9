/* What bindgen reads: rdma-core's public verbs and connection-manager headers (Debian's
   libibverbs-dev and librdmacm-dev) and the kernel ABI structs that libibverbs' marshalling
   helpers convert (linux-libc-dev). */
#include <infiniband/verbs.h>
#include <infiniband/sa.h>
#include <rdma/ib_user_verbs.h>
#include <rdma/ib_user_sa.h>
#include <rdma/rdma_cma.h>
