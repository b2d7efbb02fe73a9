"""What both pyverbs test programs (pyverbs_local.py, pyverbs_hosts.py) use: the port,
the GID index (1, the IPv4-mapped RoCE v2 GID: the emulated fabric carries RoCE v2 over
IPv4 only), the access flags of their MRs, and taking an RC QP to RTS."""

import pyverbs.enums as e
from pyverbs.addr import AHAttr, GlobalRoute
from pyverbs.qp import QPAttr

PORT = 1
GID_INDEX = 1
ACCESS = (e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE |
          e.IBV_ACCESS_REMOTE_READ)


def to_rts(qp, dest_qp_num, dgid, timeout):
    """Takes RC QP `qp` from RESET (or INIT) to RTS, connected to QP `dest_qp_num` at GID
    `dgid` (a pyverbs GID), PSNs 0, one read in flight each way, ACK timeout `timeout`
    (4.096 us * 2^timeout), retries 7."""
    attr = QPAttr(port_num=PORT)
    attr.qp_access_flags = ACCESS
    attr.path_mtu = e.IBV_MTU_1024
    attr.dest_qp_num = dest_qp_num
    attr.rq_psn = 0
    attr.sq_psn = 0
    attr.max_dest_rd_atomic = 1
    attr.max_rd_atomic = 1
    attr.min_rnr_timer = 12
    attr.timeout = timeout
    attr.retry_cnt = 7
    attr.rnr_retry = 7
    attr.ah_attr = AHAttr(port_num=PORT, is_global=1,
                          gr=GlobalRoute(dgid=dgid, sgid_index=GID_INDEX))
    qp.to_rts(attr)
