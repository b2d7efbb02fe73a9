"""An RC connection between two emulated hosts with rdma-core's Python bindings (pyverbs):
`pyverbs_hosts.py server DIR` on one host, `pyverbs_hosts.py client DIR` on the other,
both joined to one fabric. They swap their QP numbers, GIDs and buffer keys through files
in DIR (as programs swap them over TCP), then the client RDMA-writes into the server's
buffer, sends a message and reads the server's buffer back; the server waits for the
message. Each prints what it saw; the Rust test (tests/pyverbs.rs) compares the output.
"""

import json
import os
import sys
import time

import pyverbs.device as d
import pyverbs.enums as e
from pyverbs.addr import GID
from pyverbs.cq import CQ
from pyverbs.mr import MR
from pyverbs.pd import PD
from pyverbs.qp import QP, QPCap, QPInitAttr
from pyverbs.wr import SGE, RecvWR, SendWR

from pyverbs_common import ACCESS, GID_INDEX, PORT, to_rts

DEADLINE = 60
WRITTEN = bytes((7 * i) % 256 for i in range(256))
MESSAGE = b'the client says hello'
SERVER_DATA = b'the server keeps this for reading'


def publish(path, value):
    tmp = path + '.tmp'
    with open(tmp, 'w') as f:
        json.dump(value, f)
    os.rename(tmp, path)


def wait_for(path):
    begin = time.monotonic()
    while not os.path.exists(path):
        if time.monotonic() - begin > DEADLINE:
            raise RuntimeError(f'{path} never came')
        time.sleep(0.01)
    with open(path) as f:
        return json.load(f)


def poll(cq):
    begin = time.monotonic()
    while True:
        k, wcs = cq.poll(1)
        if k:
            return wcs[0]
        if time.monotonic() - begin > DEADLINE:
            raise RuntimeError('no completion')


def connect(qp, peer):
    # About 4.3 s before a retransmission: a busy machine does not make the requester
    # send anything twice, so the fabric sees each frame once.
    to_rts(qp, peer['qpn'], GID(peer['gid']), 20)


def main():
    role, folder = sys.argv[1], sys.argv[2]
    ctx = d.Context(name='mlx5_0')
    pd = PD(ctx)
    cq = CQ(ctx, 8)
    cap = QPCap(max_send_wr=4, max_recv_wr=4, max_send_sge=1, max_recv_sge=1)
    qp = QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq, cap=cap))
    mr = MR(pd, 4096, ACCESS)
    me = {'qpn': qp.qp_num, 'gid': ctx.query_gid(PORT, GID_INDEX).gid,
          'rkey': mr.rkey, 'addr': mr.buf}
    print(role, 'gid', me['gid'])
    if role == 'server':
        mr.write(SERVER_DATA, len(SERVER_DATA), 3000)
        publish(os.path.join(folder, 'server.json'), me)
        peer = wait_for(os.path.join(folder, 'client.json'))
        connect(qp, peer)
        qp.post_recv(RecvWR(wr_id=1, num_sge=1, sg=[SGE(mr.buf + 2048, 64, mr.lkey)]))
        publish(os.path.join(folder, 'ready.json'), {})
        wc = poll(cq)
        print(f'server recv: wr_id {wc.wr_id} status {wc.status} opcode {wc.opcode} '
              f'byte_len {wc.byte_len} on our QP {wc.qp_num == qp.qp_num}')
        print('server message', mr.read(wc.byte_len, 2048))
        print('server written', mr.read(256, 512) == WRITTEN)
        # Stay until the client has read our buffer.
        wait_for(os.path.join(folder, 'done.json'))
    else:
        peer = wait_for(os.path.join(folder, 'server.json'))
        publish(os.path.join(folder, 'client.json'), me)
        connect(qp, peer)
        wait_for(os.path.join(folder, 'ready.json'))
        mr.write(WRITTEN, len(WRITTEN), 0)
        wr = SendWR(wr_id=10, opcode=e.IBV_WR_RDMA_WRITE, num_sge=1,
                    sg=[SGE(mr.buf, 256, mr.lkey)], send_flags=e.IBV_SEND_SIGNALED)
        wr.set_wr_rdma(peer['rkey'], peer['addr'] + 512)
        qp.post_send(wr)
        wc = poll(cq)
        print(f'client write: wr_id {wc.wr_id} status {wc.status} opcode {wc.opcode}')
        mr.write(MESSAGE, len(MESSAGE), 1024)
        qp.post_send(SendWR(wr_id=11, opcode=e.IBV_WR_SEND, num_sge=1,
                            sg=[SGE(mr.buf + 1024, len(MESSAGE), mr.lkey)],
                            send_flags=e.IBV_SEND_SIGNALED))
        wc = poll(cq)
        print(f'client send: wr_id {wc.wr_id} status {wc.status} opcode {wc.opcode}')
        wr = SendWR(wr_id=12, opcode=e.IBV_WR_RDMA_READ, num_sge=1,
                    sg=[SGE(mr.buf + 2048, len(SERVER_DATA), mr.lkey)],
                    send_flags=e.IBV_SEND_SIGNALED)
        wr.set_wr_rdma(peer['rkey'], peer['addr'] + 3000)
        qp.post_send(wr)
        wc = poll(cq)
        print(f'client read: wr_id {wc.wr_id} status {wc.status} opcode {wc.opcode} '
              f'byte_len {wc.byte_len}')
        print('client read data', mr.read(len(SERVER_DATA), 2048))
        publish(os.path.join(folder, 'done.json'), {})
    print(role, 'done')


main()
