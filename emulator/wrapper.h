/* What bindgen reads: rdma-core's public verbs header (Debian's libibverbs-dev). */
#include <infiniband/verbs.h>
