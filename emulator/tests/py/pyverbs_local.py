"""What a user's Python does with rdma-core's bindings (pyverbs, Debian's python3-pyverbs)
on one emulated host, in one process: open the device and query it, then PD, MRs, CQs
(one with a completion channel, one extended), RC QPs connected to each other, UD QPs,
a RAW_PACKET QP steered by a flow, a parent domain, re-registered MRs, an SRQ; traffic between them, checked byte for byte
and completion field by completion field. Prints one line per fact; the Rust test
(tests/pyverbs.rs) compares the whole output. Any exception fails the run.

Uses GID index 1, the IPv4-mapped RoCE v2 GID; an address handle and an RC QP also take
index 0, the port's link-local RoCE v1 GID (mlx5 lists it first).
"""

import ctypes
import errno
import os
import struct

import pyverbs.device as d
import pyverbs.enums as e
from pyverbs.addr import AH, AHAttr, GlobalRoute
from pyverbs.cq import CQ, CQEX, CompChannel, CqInitAttrEx
from pyverbs.flow import Flow, FlowAttr
from pyverbs.mr import MR
from pyverbs.pd import PD, ParentDomain, ParentDomainContext, ParentDomainInitAttr
from pyverbs.pyverbs_error import PyverbsRDMAError, PyverbsUserError
from pyverbs.qp import QP, QPAttr, QPCap, QPInitAttr
from pyverbs.spec import EthSpec
from pyverbs.srq import SRQ, SrqInitAttr
from pyverbs.wr import SGE, RecvWR, SendWR

from pyverbs_common import ACCESS, PORT, to_rts
from pyverbs_common import GID_INDEX as GID

QKEY = 0x11111111


def poll(cq, n=1):
    """Polls `cq` until `n` completions came (bounded), and returns them."""
    got = []
    for _ in range(2_000_000):
        k, wcs = cq.poll(n - len(got))
        got.extend(wcs[:k])
        if len(got) == n:
            return got
    raise RuntimeError(f'{n - len(got)} completions missing')


def wc_line(name, wc):
    """A completion's fields where they are defined: an error completion has its wr_id
    and status only; byte_len is a receive's or a read's."""
    if wc.status != e.IBV_WC_SUCCESS:
        print(f'{name}: wr_id {wc.wr_id} status {wc.status}')
        return
    line = f'{name}: wr_id {wc.wr_id} status {wc.status} opcode {wc.opcode}'
    if wc.opcode & e.IBV_WC_RECV or wc.opcode == e.IBV_WC_RDMA_READ:
        line += f' byte_len {wc.byte_len}'
    print(f'{line} wc_flags {wc.wc_flags:#x}')


def device(ctx):
    names = [x.name.decode() for x in d.get_device_list()]
    print('devices', names)
    a = ctx.query_device()
    ax = ctx.query_device_ex()
    print(f'vendor {a.vendor_id:#x} part {a.vendor_part_id} ports {a.phys_port_cnt} '
          f'ports_ex {ax.phys_port_cnt_ex}')
    p = ctx.query_port(PORT)
    print(f'port state {p.state} link_layer {p.link_layer} active_mtu {p.active_mtu} '
          f'gid_tbl_len {p.gid_tbl_len}')
    for i in range(2):
        print(f'gid {i} {ctx.query_gid(PORT, i).gid} type {ctx.query_gid_type(PORT, i)}')
    dup = os.dup(ctx.cmd_fd)
    print('cmd_fd dups', dup >= 0)
    os.close(dup)


def connect(ctx, q, peer):
    """Takes `q` from RESET (or INIT) to RTS, connected to `peer` on this host."""
    to_rts(q, peer.qp_num, ctx.query_gid(PORT, GID), 14)


def rc_pair(ctx, pd, channel):
    cq_a = CQ(ctx, 16, None, channel, 0)
    cq_b = CQ(ctx, 16)
    cap = QPCap(max_send_wr=8, max_recv_wr=8, max_send_sge=1, max_recv_sge=1)
    qa = QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq_a, rcq=cq_a, cap=cap))
    qb = QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq_b, rcq=cq_b, cap=cap))
    connect(ctx, qa, qb)
    connect(ctx, qb, qa)
    return cq_a, cq_b, qa, qb


def rc(ctx, pd):
    channel = CompChannel(ctx)
    cq_a, cq_b, qa, qb = rc_pair(ctx, pd, channel)
    print('rc states', qa.qp_state, qb.qp_state)
    mr_a = MR(pd, 4096, ACCESS)
    mr_b = MR(pd, 4096, ACCESS)
    # A send into B's posted receive; A's CQ signals its channel.
    cq_a.req_notify()
    qb.post_recv(RecvWR(wr_id=10, num_sge=1, sg=[SGE(mr_b.buf, 64, mr_b.lkey)]))
    mr_a.write(b'hello pyverbs', 13, 0)
    qa.post_send(SendWR(wr_id=1, opcode=e.IBV_WR_SEND, num_sge=1,
                        sg=[SGE(mr_a.buf, 13, mr_a.lkey)],
                        send_flags=e.IBV_SEND_SIGNALED))
    channel.get_cq_event(cq_a)
    cq_a.ack_events(1)
    print('channel event for the send CQ')
    wc_line('send', poll(cq_a)[0])
    wc = poll(cq_b)[0]
    wc_line('recv', wc)
    print('recv qp is B', wc.qp_num == qb.qp_num, 'data', mr_b.read(13, 0))
    # RDMA write with immediate into B's memory, consuming a receive.
    qb.post_recv(RecvWR(wr_id=11, num_sge=1, sg=[SGE(mr_b.buf, 64, mr_b.lkey)]))
    mr_a.write(bytes(range(100, 132)), 32, 64)
    wr = SendWR(wr_id=2, opcode=e.IBV_WR_RDMA_WRITE_WITH_IMM, num_sge=1,
                imm_data=0x12345678, sg=[SGE(mr_a.buf + 64, 32, mr_a.lkey)],
                send_flags=e.IBV_SEND_SIGNALED)
    wr.set_wr_rdma(mr_b.rkey, mr_b.buf + 1000)
    qa.post_send(wr)
    wc_line('write_imm', poll(cq_a)[0])
    wc = poll(cq_b)[0]
    wc_line('recv_imm', wc)
    print(f'imm {wc.imm_data:#x} written {mr_b.read(32, 1000) == bytes(range(100, 132))}')
    # RDMA read of B's memory into A's.
    mr_b.write(b'read me, please!', 16, 2000)
    wr = SendWR(wr_id=3, opcode=e.IBV_WR_RDMA_READ, num_sge=1,
                sg=[SGE(mr_a.buf + 300, 16, mr_a.lkey)], send_flags=e.IBV_SEND_SIGNALED)
    wr.set_wr_rdma(mr_b.rkey, mr_b.buf + 2000)
    qa.post_send(wr)
    wc_line('read', poll(cq_a)[0])
    print('read data', mr_a.read(16, 300))
    # The kernel passes a query's mask to the driver unchecked: any bits will do.
    attr, init = qa.query(0x1ffffff)
    print('query state', attr.qp_state, 'dest is B', attr.dest_qp_num == qb.qp_num,
          'mtu', attr.path_mtu)


def ud(ctx, pd):
    cq_s = CQ(ctx, 3)
    cq_r = CQ(ctx, 16)
    cap = QPCap(max_send_wr=4, max_recv_wr=4, max_send_sge=1, max_recv_sge=1)
    qs = QP(pd, QPInitAttr(qp_type=e.IBV_QPT_UD, scq=cq_s, rcq=cq_s, cap=cap))
    qr = QP(pd, QPInitAttr(qp_type=e.IBV_QPT_UD, scq=cq_r, rcq=cq_r, cap=cap))
    for q in (qs, qr):
        attr = QPAttr(port_num=PORT)
        attr.qkey = QKEY
        q.to_rts(attr)
    gid = ctx.query_gid(PORT, GID)
    ah = AH(pd, attr=AHAttr(port_num=PORT, is_global=1,
                            gr=GlobalRoute(dgid=gid, sgid_index=GID)))
    try:
        AH(pd, attr=AHAttr(port_num=PORT, is_global=1,
                           gr=GlobalRoute(dgid=ctx.query_gid(PORT, 0), sgid_index=0)))
        print('ah on the RoCE v1 GID: made')
    except PyverbsRDMAError as ex:
        print('ah on the RoCE v1 GID: errno', ex.error_code)
    rc_qp = QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq_s, rcq=cq_s, cap=cap))
    attr = QPAttr(port_num=PORT)
    attr.path_mtu = e.IBV_MTU_1024
    attr.dest_qp_num = rc_qp.qp_num
    attr.ah_attr = AHAttr(port_num=PORT, is_global=1,
                          gr=GlobalRoute(dgid=ctx.query_gid(PORT, 0), sgid_index=0))
    try:
        rc_qp.to_rtr(attr)
        print('rtr on the RoCE v1 GID: done')
    except PyverbsRDMAError as ex:
        print('rtr on the RoCE v1 GID: errno', ex.error_code, 'state', rc_qp.qp_state)
    rc_qp.close()
    mr = MR(pd, 4096, ACCESS)
    mr.write(bytes(range(48)), 48, 0)
    print('cqe', cq_s.cqe)
    for i in range(3):
        qr.post_recv(RecvWR(wr_id=20 + i, num_sge=1,
                            sg=[SGE(mr.buf + 1024 * (i + 1), 40 + 48, mr.lkey)]))
        wr = SendWR(wr_id=30 + i, opcode=e.IBV_WR_SEND, num_sge=1,
                    sg=[SGE(mr.buf, 48 - i, mr.lkey)], send_flags=e.IBV_SEND_SIGNALED)
        wr.set_wr_ud(ah, qr.qp_num, QKEY)
        qs.post_send(wr)
    # Three send completions wait in the sender's CQ: it cannot shrink below them.
    try:
        cq_s.resize(1)
        print('resize below the waiting completions: done')
    except PyverbsRDMAError as ex:
        print('resize below the waiting completions: errno', ex.error_code)
    for wc in poll(cq_s, 3):
        wc_line('ud send', wc)
    cq_s.resize(1)
    print('resized to 1: cqe', cq_s.cqe)
    for i, wc in enumerate(poll(cq_r, 3)):
        wc_line('ud recv', wc)
        grh_ok = wc.wc_flags & e.IBV_WC_GRH != 0
        data = mr.read(48 - i, 1024 * (i + 1) + 40) == bytes(range(48 - i))
        print('  from the sender', wc.src_qp == qs.qp_num, 'grh', grh_ok, 'data', data)


def own_mac(ctx):
    """The port's MAC, from its link-local GID (modified EUI-64)."""
    g = bytes.fromhex(ctx.query_gid(PORT, 0).gid.replace(':', ''))
    return bytes([g[8] ^ 2, g[9], g[10], g[13], g[14], g[15]])


def raw_round_trip(rx, tx, mr, cq_tx, cq_rx, frame, wr_id, what):
    """Sends FRAME (put at the start of MR) on TX with a receive posted on RX at MR's
    offset 2048 (wr_id WR_ID, the send WR_ID + 1), prints the send's completion as WHAT,
    and starts polling extended CQ_RX at the receive's completion (the caller reads it
    and ends the poll)."""
    mr.write(frame, len(frame), 0)
    rx.post_recv(RecvWR(wr_id=wr_id, num_sge=1, sg=[SGE(mr.buf + 2048, 1500, mr.lkey)]))
    tx.post_send(SendWR(wr_id=wr_id + 1, opcode=e.IBV_WR_SEND, num_sge=1,
                        sg=[SGE(mr.buf, len(frame), mr.lkey)],
                        send_flags=e.IBV_SEND_SIGNALED))
    wc_line(what, poll(cq_tx)[0])
    for _ in range(2_000_000):
        try:
            cq_rx.start_poll(None)
            return
        except PyverbsRDMAError as ex:
            if ex.error_code != errno.ENOENT:
                raise
    raise RuntimeError(f'{what}: no receive completion')


def raw(ctx, pd):
    mac = own_mac(ctx)
    cq_tx = CQ(ctx, 8)
    cq_rx = CQEX(ctx, CqInitAttrEx(cqe=8, wc_flags=e.IBV_WC_STANDARD_FLAGS |
                                   e.IBV_WC_EX_WITH_CVLAN))
    cap = QPCap(max_send_wr=4, max_recv_wr=4, max_send_sge=1, max_recv_sge=1)
    tx = QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RAW_PACKET, scq=cq_tx, rcq=cq_tx, cap=cap))
    rx = QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RAW_PACKET, scq=cq_rx, rcq=cq_rx, cap=cap))
    for q in (tx, rx):
        q.to_rts(QPAttr(port_num=PORT))
    spec = EthSpec(ether_type=0x0800, dst_mac=':'.join(f'{b:02x}' for b in mac))
    attr = FlowAttr(num_of_specs=1, port=PORT)
    attr.specs.append(spec)
    flow = Flow(rx, attr)
    mr = MR(pd, 4096, ACCESS)
    payload = b'raw frame from pyverbs'
    udp = struct.pack('!HHHH', 4000, 4001, 8 + len(payload), 0) + payload
    ip = struct.pack('!BBHHHBBH4s4s', 0x45, 0, 20 + len(udp), 0, 0x4000, 64, 17, 0,
                     bytes([10, 100, 0, 1]), bytes([10, 100, 0, 1]))
    frame = mac + mac + b'\x08\x00' + ip + udp
    raw_round_trip(rx, tx, mr, cq_tx, cq_rx, frame, 40, 'raw send')
    print(f'raw recv: wr_id {cq_rx.wr_id} status {cq_rx.status} opcode {cq_rx.read_opcode()} '
          f'byte_len {cq_rx.read_byte_len()} cvlan {cq_rx.read_cvlan()}')
    cq_rx.end_poll()
    print('raw frame intact', mr.read(len(frame), 2048) == frame)
    # A flow naming an Ethernet multicast address: mlx5 loops a frame to it back to the
    # port's own steering, whatever its IP destination.
    group = bytes([0x01, 0x50, 0x56, 0x00, 0x00, 0x07])
    spec = EthSpec(ether_type=0x0800, dst_mac=':'.join(f'{b:02x}' for b in group))
    attr = FlowAttr(num_of_specs=1, port=PORT)
    attr.specs.append(spec)
    group_flow = Flow(rx, attr)
    frame = group + mac + frame[12:]
    raw_round_trip(rx, tx, mr, cq_tx, cq_rx, frame, 42, 'raw send to a MAC group')
    print(f'raw recv from the group: wr_id {cq_rx.wr_id} status {cq_rx.status} '
          f'byte_len {cq_rx.read_byte_len()}')
    cq_rx.end_poll()
    print('group frame intact', mr.read(len(frame), 2048) == frame)
    group_flow.close()
    flow.close()


def parent_domain(ctx, pd):
    """A parent domain with allocators of ours, RC traffic on it, a CQ in it."""
    calls = []

    def alloc(pd, context, size, alignment, resource_type):
        calls.append('alloc')
        return e._IBV_ALLOCATOR_USE_DEFAULT

    def free(pd, context, ptr, resource_type):
        calls.append('free')
        return e._IBV_ALLOCATOR_USE_DEFAULT

    domain = ParentDomain(ctx, attr=ParentDomainInitAttr(
        pd=pd, pd_context=ParentDomainContext(pd, alloc, free, 0)))
    cq_ex = CQEX(ctx, CqInitAttrEx(cqe=4, comp_mask=e.IBV_CQ_INIT_ATTR_MASK_PD,
                                   parent_domain=domain))
    print('cq in the parent domain: made')
    cq_a, cq_b, qa, qb = rc_pair(ctx, domain, None)
    mr_a = MR(domain, 4096, ACCESS)
    mr_b = MR(pd, 4096, ACCESS)
    mr_a.write(b'through the parent domain', 25, 0)
    qb.post_recv(RecvWR(wr_id=50, num_sge=1, sg=[SGE(mr_b.buf, 64, mr_b.lkey)]))
    qa.post_send(SendWR(wr_id=51, opcode=e.IBV_WR_SEND, num_sge=1,
                        sg=[SGE(mr_a.buf, 25, mr_a.lkey)], send_flags=e.IBV_SEND_SIGNALED))
    wc_line('domain send', poll(cq_a)[0])
    wc_line('domain recv', poll(cq_b)[0])
    print('domain data', mr_b.read(25, 0))
    # The emulator's queues are in the simulator: it has no memory to allocate with them.
    print('allocator calls', calls)
    for o in (qa, qb, mr_a, mr_b, cq_a, cq_b, cq_ex):
        o.close()
    domain.close()


def rereg(ctx, pd):
    """ibv_rereg_mr: access, protection domain and range changed in place, keys kept;
    a QP reset takes its completions out of its CQs (libmlx5's mlx5_cq_clean)."""
    cq_a, cq_b, qa, qb = rc_pair(ctx, pd, None)
    mr_a = MR(pd, 4096, ACCESS)
    mr_b = MR(pd, 4096, ACCESS)
    keys = (mr_b.lkey, mr_b.rkey)
    mr_a.write(b'0123456789abcdef', 16, 0)

    def write(wr_id, offset):
        wr = SendWR(wr_id=wr_id, opcode=e.IBV_WR_RDMA_WRITE, num_sge=1,
                    sg=[SGE(mr_a.buf, 16, mr_a.lkey)], send_flags=e.IBV_SEND_SIGNALED)
        wr.set_wr_rdma(keys[1], offset)
        qa.post_send(wr)
        return poll(cq_a)[0]

    def reset_both():
        for q, peer in ((qa, qb), (qb, qa)):
            q.modify(QPAttr(qp_state=e.IBV_QPS_RESET), e.IBV_QP_STATE)
        for q, peer in ((qa, qb), (qb, qa)):
            connect(ctx, q, peer)

    try:
        mr_b.rereg(0, None, 0, 0, e.IBV_ACCESS_LOCAL_WRITE)
        print('rereg access without its flag: done')
    except PyverbsRDMAError as ex:
        print('rereg access without its flag: errno', ex.error_code)
    mr_b.rereg(e.IBV_REREG_MR_CHANGE_ACCESS, None, 0, 0, e.IBV_ACCESS_LOCAL_WRITE)
    print('rereg access: keys kept', (mr_b.lkey, mr_b.rkey) == keys)
    wc_line('write without remote access', write(60, mr_b.buf))
    # The failed write moved A to ERR; a receive posted now is flushed into its CQ, and
    # resetting A takes that completion out again.
    qa.post_recv(RecvWR(wr_id=61, num_sge=1, sg=[SGE(mr_a.buf, 16, mr_a.lkey)]))
    reset_both()
    print('completions left after the reset', cq_a.poll(4)[0], cq_b.poll(4)[0])
    mr_b.rereg(e.IBV_REREG_MR_CHANGE_ACCESS, None, 0, 0, ACCESS)
    wc_line('write with remote access again', write(62, mr_b.buf + 100))
    print('written', mr_b.read(16, 100))
    # A new range: the region now covers memory of ours, under the same keys.
    buf = ctypes.create_string_buffer(256)
    mr_b.rereg(e.IBV_REREG_MR_CHANGE_TRANSLATION, None, ctypes.addressof(buf), 256, 0)
    print('rereg range: keys kept', (mr_b.lkey, mr_b.rkey) == keys,
          'length', mr_b.length)
    wc_line('write into the new range', write(63, ctypes.addressof(buf) + 8))
    print('new range holds', buf.raw[8:24])
    # Another protection domain: B's QP may no longer use the region for its receive.
    other = PD(ctx)
    mr_b.rereg(e.IBV_REREG_MR_CHANGE_PD, other, 0, 0, 0)
    qb.post_recv(RecvWR(wr_id=64, num_sge=1, sg=[SGE(ctypes.addressof(buf), 64, mr_b.lkey)]))
    qa.post_send(SendWR(wr_id=65, opcode=e.IBV_WR_SEND, num_sge=1,
                        sg=[SGE(mr_a.buf, 16, mr_a.lkey)], send_flags=e.IBV_SEND_SIGNALED))
    wc_line('send into another PD\'s region', poll(cq_a)[0])
    wc_line('its receive', poll(cq_b)[0])
    reset_both()
    mr_b.rereg(e.IBV_REREG_MR_CHANGE_PD, pd, 0, 0, 0)
    qb.post_recv(RecvWR(wr_id=66, num_sge=1, sg=[SGE(ctypes.addressof(buf), 64, mr_b.lkey)]))
    qa.post_send(SendWR(wr_id=67, opcode=e.IBV_WR_SEND, num_sge=1,
                        sg=[SGE(mr_a.buf, 16, mr_a.lkey)], send_flags=e.IBV_SEND_SIGNALED))
    wc_line('send after the PD is back', poll(cq_a)[0])
    wc_line('its receive', poll(cq_b)[0])
    print('received', buf.raw[:16])
    for o in (qa, qb, mr_a, mr_b, cq_a, cq_b):
        o.close()
    other.close()


def srq(pd):
    s = SRQ(pd, SrqInitAttr())
    a = s.query()
    print('srq of no receives: max_wr', a.max_wr, 'max_sge', a.max_sge)


def mlx5dv():
    """libmlx5's functions on an mlx5 device with direct verbs: it opens as an mlx5
    context; what the emulator has no model of is refused."""
    from pyverbs.providers.mlx5.mlx5dv import Mlx5Context, Mlx5DVContextAttr
    try:
        Mlx5Context(Mlx5DVContextAttr(), name='mlx5_0')
        print('Mlx5Context: opened')
    except PyverbsUserError as ex:
        print('Mlx5Context:', ex)
    lib = ctypes.CDLL('libmlx5.so.1', use_errno=True)
    lib.mlx5dv_is_supported.restype = ctypes.c_bool
    print('mlx5dv_is_supported', lib.mlx5dv_is_supported(None))
    qpn = ctypes.c_uint32()
    print('mlx5dv_reserved_qpn_alloc', lib.mlx5dv_reserved_qpn_alloc(None, ctypes.byref(qpn)))
    print('mlx5dv_qp_cancel_posted_send_wrs',
          lib.mlx5dv_qp_cancel_posted_send_wrs(None, ctypes.c_uint64(0)))
    lib.mlx5dv_devx_get_event.restype = ctypes.c_ssize_t
    ctypes.set_errno(0)
    r = lib.mlx5dv_devx_get_event(None, None, ctypes.c_size_t(0))
    print('mlx5dv_devx_get_event', r, ctypes.get_errno())
    lib.mlx5dv_dr_domain_create.restype = ctypes.c_void_p
    ctypes.set_errno(0)
    r = lib.mlx5dv_dr_domain_create(None, 0)
    print('mlx5dv_dr_domain_create', r, ctypes.get_errno())


def main():
    ctx = d.Context(name='mlx5_0')
    device(ctx)
    pd = PD(ctx)
    rc(ctx, pd)
    ud(ctx, pd)
    raw(ctx, pd)
    parent_domain(ctx, pd)
    rereg(ctx, pd)
    srq(pd)
    mlx5dv()
    print('done')


main()
