//! The connection manager's MADs as a real RDMA stack sends them (IBTA vol. 1 chapter
//! 12): REQ, MRA, REJ, REP, RTU, DREQ, DREP, SIDR REQ and SIDR REP, each a 256-byte MAD of management class
//! 0x07 (in a RoCE v2 UD datagram to QP1, see [`super::cm_frame`]). The layouts are
//! the kernel's `include/rdma/ibta_vol1_c12.h`: a field is at a byte offset after the
//! 24-byte MAD header, from a bit offset counted from the byte's most significant bit,
//! `width` bits wide, big-endian (`IBA_FIELD*_LOC`, include/rdma/iba.h).

/// A MAD's length.
pub const MAD_LEN: usize = 256;
/// The MAD header's length (`struct ib_mad_hdr`).
const HDR: usize = 24;
/// `IB_MGMT_CLASS_CM`.
pub const CLASS_CM: u8 = 0x07;
/// `IB_CM_CLASS_VERSION`.
const CLASS_VERSION: u8 = 2;
/// `IB_MGMT_METHOD_SEND`.
const METHOD_SEND: u8 = 0x03;
/// `IB_QP1_QKEY`: the Q_Key of the GSI QP.
pub const GSI_QKEY: u32 = 0x8001_0000;
/// The default P_Key.
pub const PKEY: u16 = 0xffff;

/// The attribute ids (`CM_*_ATTR_ID`, drivers/infiniband/core/cm.c).
pub mod attr {
    /// ConnectRequest.
    pub const REQ: u16 = 0x0010;
    /// MsgRcptAck.
    pub const MRA: u16 = 0x0011;
    /// ConnectReject.
    pub const REJ: u16 = 0x0012;
    /// ConnectReply.
    pub const REP: u16 = 0x0013;
    /// ReadyToUse.
    pub const RTU: u16 = 0x0014;
    /// DisconnectRequest.
    pub const DREQ: u16 = 0x0015;
    /// DisconnectReply.
    pub const DREP: u16 = 0x0016;
    /// ServiceIDResolutionRequest.
    pub const SIDR_REQ: u16 = 0x0017;
    /// ServiceIDResolutionResponse.
    pub const SIDR_REP: u16 = 0x0018;
}

/// Private data sizes (`IB_CM_*_PRIVATE_DATA_SIZE`, include/rdma/ib_cm.h).
pub mod private {
    /// REQ.
    pub const REQ: usize = 92;
    /// MRA.
    pub const MRA: usize = 222;
    /// REJ.
    pub const REJ: usize = 148;
    /// REP.
    pub const REP: usize = 196;
    /// RTU, DREP.
    pub const RTU: usize = 224;
    /// DREQ.
    pub const DREQ: usize = 220;
    /// SIDR REQ.
    pub const SIDR_REQ: usize = 216;
    /// SIDR REP.
    pub const SIDR_REP: usize = 136;
}

/// Where a field is: byte offset after the MAD header, bit offset from the byte's most
/// significant bit, width in bits.
type Field = (usize, u32, u32);

/// Reads a field of at most 64 bits.
fn get(mad: &[u8; MAD_LEN], (byte, bit, width): Field) -> u64 {
    let start = HDR + byte;
    let bytes = (bit + width).div_ceil(8) as usize;
    let mut v: u128 = 0;
    for b in &mad[start..start + bytes] {
        v = (v << 8) | u128::from(*b);
    }
    let shift = bytes as u32 * 8 - bit - width;
    ((v >> shift) & ((1u128 << width) - 1)) as u64
}

/// Writes a field of at most 64 bits (`v`'s bits beyond the width are dropped).
fn set(mad: &mut [u8; MAD_LEN], (byte, bit, width): Field, v: u64) {
    let start = HDR + byte;
    let bytes = (bit + width).div_ceil(8) as usize;
    let mut cur: u128 = 0;
    for b in &mad[start..start + bytes] {
        cur = (cur << 8) | u128::from(*b);
    }
    let shift = bytes as u32 * 8 - bit - width;
    let mask = ((1u128 << width) - 1) << shift;
    cur = (cur & !mask) | ((u128::from(v) << shift) & mask);
    for (i, b) in mad[start..start + bytes].iter_mut().enumerate() {
        *b = (cur >> (8 * (bytes - 1 - i))) as u8;
    }
}

fn get_bytes<const N: usize>(mad: &[u8; MAD_LEN], byte: usize) -> [u8; N] {
    let mut a = [0u8; N];
    a.copy_from_slice(&mad[HDR + byte..HDR + byte + N]);
    a
}

fn set_bytes(mad: &mut [u8; MAD_LEN], byte: usize, v: &[u8]) {
    mad[HDR + byte..HDR + byte + v.len()].copy_from_slice(v);
}

fn get_private(mad: &[u8; MAD_LEN], byte: usize, len: usize) -> Vec<u8> {
    mad[HDR + byte..HDR + byte + len].to_vec()
}

/// Private data at its full length: cut or padded with zeros.
fn set_private(mad: &mut [u8; MAD_LEN], byte: usize, len: usize, v: &[u8]) {
    let n = v.len().min(len);
    set_bytes(mad, byte, &v[..n]);
}

// Table 106 REQ (the kernel's `CM_REQ_*`).
const REQ_LOCAL_COMM_ID: Field = (0, 0, 32);
const REQ_SERVICE_ID: Field = (8, 0, 64);
const REQ_LOCAL_CA_GUID: Field = (16, 0, 64);
const REQ_LOCAL_Q_KEY: Field = (28, 0, 32);
const REQ_LOCAL_QPN: Field = (32, 0, 24);
const REQ_RESPONDER_RESOURCES: Field = (35, 0, 8);
const REQ_INITIATOR_DEPTH: Field = (39, 0, 8);
const REQ_REMOTE_CM_RESPONSE_TIMEOUT: Field = (43, 0, 5);
const REQ_TRANSPORT_SERVICE_TYPE: Field = (43, 5, 2);
const REQ_END_TO_END_FLOW_CONTROL: Field = (43, 7, 1);
const REQ_STARTING_PSN: Field = (44, 0, 24);
const REQ_LOCAL_CM_RESPONSE_TIMEOUT: Field = (47, 0, 5);
const REQ_RETRY_COUNT: Field = (47, 5, 3);
const REQ_PARTITION_KEY: Field = (48, 0, 16);
const REQ_PATH_MTU: Field = (50, 0, 4);
const REQ_RNR_RETRY_COUNT: Field = (50, 5, 3);
const REQ_MAX_CM_RETRIES: Field = (51, 0, 4);
const REQ_SRQ: Field = (51, 4, 1);
const REQ_PRIMARY_LOCAL_PORT_LID: Field = (52, 0, 16);
const REQ_PRIMARY_REMOTE_PORT_LID: Field = (54, 0, 16);
const REQ_PRIMARY_LOCAL_PORT_GID: usize = 56;
const REQ_PRIMARY_REMOTE_PORT_GID: usize = 72;
const REQ_PRIMARY_FLOW_LABEL: Field = (88, 0, 20);
const REQ_PRIMARY_PACKET_RATE: Field = (91, 2, 6);
const REQ_PRIMARY_TRAFFIC_CLASS: Field = (92, 0, 8);
const REQ_PRIMARY_HOP_LIMIT: Field = (93, 0, 8);
const REQ_PRIMARY_SL: Field = (94, 0, 4);
const REQ_PRIMARY_SUBNET_LOCAL: Field = (94, 4, 1);
const REQ_PRIMARY_LOCAL_ACK_TIMEOUT: Field = (95, 0, 5);
const REQ_PRIVATE_DATA: usize = 140;

// Table 107 MRA.
const MRA_MESSAGE_MRAED: Field = (8, 0, 2);
const MRA_SERVICE_TIMEOUT: Field = (9, 0, 5);

// Table 108 REJ.
const REJ_MESSAGE_REJECTED: Field = (8, 0, 2);
const REJ_REJECTED_INFO_LENGTH: Field = (9, 0, 7);
const REJ_REASON: Field = (10, 0, 16);
const REJ_ARI: usize = 12;
/// The ARI's room (576 bits).
const REJ_ARI_LEN: usize = 72;
const REJ_PRIVATE_DATA: usize = 84;

// Table 110 REP.
const REP_LOCAL_Q_KEY: Field = (8, 0, 32);
const REP_LOCAL_QPN: Field = (12, 0, 24);
const REP_STARTING_PSN: Field = (20, 0, 24);
const REP_RESPONDER_RESOURCES: Field = (24, 0, 8);
const REP_INITIATOR_DEPTH: Field = (25, 0, 8);
const REP_TARGET_ACK_DELAY: Field = (26, 0, 5);
const REP_FAILOVER_ACCEPTED: Field = (26, 5, 2);
const REP_END_TO_END_FLOW_CONTROL: Field = (26, 7, 1);
const REP_RNR_RETRY_COUNT: Field = (27, 0, 3);
const REP_SRQ: Field = (27, 3, 1);
const REP_LOCAL_CA_GUID: Field = (28, 0, 64);
const REP_PRIVATE_DATA: usize = 36;

// Every message's first two words: its sender's and its receiver's communication ids.
const LOCAL_COMM_ID: Field = (0, 0, 32);
const REMOTE_COMM_ID: Field = (4, 0, 32);
// Tables 111-113: RTU, DREQ, DREP.
const DREQ_REMOTE_QPN_EECN: Field = (8, 0, 24);

// Table 119 SIDR_REQ (`CM_SIDR_REQ_*`).
const SIDR_REQ_REQUESTID: Field = (0, 0, 32);
const SIDR_REQ_PARTITION_KEY: Field = (4, 0, 16);
const SIDR_REQ_SERVICEID: Field = (8, 0, 64);
const SIDR_REQ_PRIVATE_DATA: usize = 16;

// Table 120 SIDR_REP (`CM_SIDR_REP_*`).
const SIDR_REP_REQUESTID: Field = (0, 0, 32);
const SIDR_REP_STATUS: Field = (4, 0, 8);
const SIDR_REP_ADDITIONAL_INFORMATION_LENGTH: Field = (5, 0, 8);
const SIDR_REP_QPN: Field = (8, 0, 24);
const SIDR_REP_SERVICEID: Field = (12, 0, 64);
const SIDR_REP_Q_KEY: Field = (20, 0, 32);
const SIDR_REP_ADDITIONAL_INFORMATION: usize = 24;
/// The additional information's room (576 bits).
const SIDR_REP_INFO_LEN: usize = 72;
const SIDR_REP_PRIVATE_DATA: usize = 96;

/// A REQ's fields (alternate path: none).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Req {
    /// The requester's communication id.
    pub local_comm_id: u32,
    /// The service asked for.
    pub service_id: u64,
    /// The requester's CA GUID.
    pub local_ca_guid: u64,
    /// Its Q_Key (0 for RC).
    pub local_qkey: u32,
    /// Its QP number.
    pub local_qpn: u32,
    /// RDMA reads/atomics it accepts at once.
    pub responder_resources: u8,
    /// RDMA reads/atomics it issues at once.
    pub initiator_depth: u8,
    /// How long the responder may take to answer (4.096 µs * 2^x).
    pub remote_cm_response_timeout: u8,
    /// 0 RC, 1 UC (IBA table 106).
    pub transport_service_type: u8,
    /// End-to-end flow control.
    pub flow_control: bool,
    /// The requester's starting PSN.
    pub starting_psn: u32,
    /// How long the requester takes to answer.
    pub local_cm_response_timeout: u8,
    /// Transport retries.
    pub retry_count: u8,
    /// The P_Key.
    pub pkey: u16,
    /// The path MTU (`enum ib_mtu`: 3 is 1024).
    pub path_mtu: u8,
    /// RNR retries.
    pub rnr_retry_count: u8,
    /// How often the requester sends the REQ at most.
    pub max_cm_retries: u8,
    /// Whether the requester's QP has an SRQ.
    pub srq: bool,
    /// LIDs (0xffff, permissive, over RoCE).
    pub local_lid: u16,
    /// The responder's LID.
    pub remote_lid: u16,
    /// The requester's GID.
    pub local_gid: [u8; 16],
    /// The responder's GID.
    pub remote_gid: [u8; 16],
    /// The primary path's flow label.
    pub flow_label: u32,
    /// Its packet rate.
    pub packet_rate: u8,
    /// Its traffic class.
    pub traffic_class: u8,
    /// Its hop limit.
    pub hop_limit: u8,
    /// Its service level.
    pub sl: u8,
    /// Whether the responder is on the requester's subnet.
    pub subnet_local: bool,
    /// The requester's local ACK timeout.
    pub local_ack_timeout: u8,
    /// The private data (92 bytes).
    pub private_data: Vec<u8>,
}

/// A REP's fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rep {
    /// The responder's communication id.
    pub local_comm_id: u32,
    /// The requester's.
    pub remote_comm_id: u32,
    /// The responder's Q_Key.
    pub local_qkey: u32,
    /// Its QP number.
    pub local_qpn: u32,
    /// Its starting PSN.
    pub starting_psn: u32,
    /// RDMA reads/atomics it accepts at once.
    pub responder_resources: u8,
    /// RDMA reads/atomics it issues at once.
    pub initiator_depth: u8,
    /// Its target ACK delay.
    pub target_ack_delay: u8,
    /// Failover (0: accepted).
    pub failover_accepted: u8,
    /// End-to-end flow control.
    pub flow_control: bool,
    /// RNR retries.
    pub rnr_retry_count: u8,
    /// Whether its QP has an SRQ.
    pub srq: bool,
    /// Its CA GUID.
    pub local_ca_guid: u64,
    /// The private data (196 bytes).
    pub private_data: Vec<u8>,
}

/// A REJ's fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rej {
    /// The rejecter's communication id.
    pub local_comm_id: u32,
    /// The other side's (0 if unknown).
    pub remote_comm_id: u32,
    /// 0 REQ, 1 REP, 2 other.
    pub message_rejected: u8,
    /// The reason (`IB_CM_REJ_*`).
    pub reason: u16,
    /// Additional reject information (its length is the ARI's).
    pub ari: Vec<u8>,
    /// The private data (148 bytes).
    pub private_data: Vec<u8>,
}

/// A SIDR REQ's fields (`cm_format_sidr_req`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SidrReq {
    /// The requester's id.
    pub request_id: u32,
    /// The path's P_Key.
    pub pkey: u16,
    /// The service asked for.
    pub service_id: u64,
    /// The private data (216 bytes).
    pub private_data: Vec<u8>,
}

/// A SIDR REP's fields (`cm_format_sidr_rep`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SidrRep {
    /// The requester's id (the SIDR REQ's).
    pub request_id: u32,
    /// `IB_SIDR_*` (0 success).
    pub status: u8,
    /// The responder's QP number.
    pub qpn: u32,
    /// The service (the SIDR REQ's).
    pub service_id: u64,
    /// The responder's Q_Key.
    pub qkey: u32,
    /// Additional information (its length is the field's).
    pub info: Vec<u8>,
    /// The private data (136 bytes).
    pub private_data: Vec<u8>,
}

/// A connection-manager message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Msg {
    /// ConnectRequest.
    Req(Req),
    /// MsgRcptAck: (local, remote comm id, message MRAed 0 REQ 1 REP 2 LAP, service
    /// timeout).
    Mra(u32, u32, u8, u8),
    /// ConnectReject.
    Rej(Rej),
    /// ConnectReply.
    Rep(Rep),
    /// ReadyToUse: (local, remote comm id).
    Rtu(u32, u32),
    /// DisconnectRequest: (local, remote comm id, the receiver's QP number).
    Dreq(u32, u32, u32),
    /// DisconnectReply: (local, remote comm id).
    Drep(u32, u32),
    /// ServiceIDResolutionRequest.
    SidrReq(SidrReq),
    /// ServiceIDResolutionResponse.
    SidrRep(SidrRep),
}

/// A MAD: its transaction id and message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mad {
    /// The transaction id.
    pub tid: u64,
    /// The message.
    pub msg: Msg,
}

impl Mad {
    /// The 256 bytes (`cm_format_mad_hdr`: base version 1, class 0x07, class version 2,
    /// method SEND; unused bytes zero).
    #[must_use]
    pub fn encode(&self) -> [u8; MAD_LEN] {
        let mut m = [0u8; MAD_LEN];
        m[0] = 1;
        m[1] = CLASS_CM;
        m[2] = CLASS_VERSION;
        m[3] = METHOD_SEND;
        m[8..16].copy_from_slice(&self.tid.to_be_bytes());
        let id = match &self.msg {
            Msg::Req(r) => {
                encode_req(&mut m, r);
                attr::REQ
            }
            Msg::Mra(l, r, what, timeout) => {
                set(&mut m, LOCAL_COMM_ID, u64::from(*l));
                set(&mut m, REMOTE_COMM_ID, u64::from(*r));
                set(&mut m, MRA_MESSAGE_MRAED, u64::from(*what));
                set(&mut m, MRA_SERVICE_TIMEOUT, u64::from(*timeout));
                attr::MRA
            }
            Msg::Rej(r) => {
                set(&mut m, LOCAL_COMM_ID, u64::from(r.local_comm_id));
                set(&mut m, REMOTE_COMM_ID, u64::from(r.remote_comm_id));
                set(&mut m, REJ_MESSAGE_REJECTED, u64::from(r.message_rejected));
                let ari = &r.ari[..r.ari.len().min(REJ_ARI_LEN)];
                set(&mut m, REJ_REJECTED_INFO_LENGTH, ari.len() as u64);
                set(&mut m, REJ_REASON, u64::from(r.reason));
                set_bytes(&mut m, REJ_ARI, ari);
                set_private(&mut m, REJ_PRIVATE_DATA, private::REJ, &r.private_data);
                attr::REJ
            }
            Msg::Rep(r) => {
                encode_rep(&mut m, r);
                attr::REP
            }
            Msg::Rtu(l, r) => {
                set(&mut m, LOCAL_COMM_ID, u64::from(*l));
                set(&mut m, REMOTE_COMM_ID, u64::from(*r));
                attr::RTU
            }
            Msg::Dreq(l, r, qpn) => {
                set(&mut m, LOCAL_COMM_ID, u64::from(*l));
                set(&mut m, REMOTE_COMM_ID, u64::from(*r));
                set(&mut m, DREQ_REMOTE_QPN_EECN, u64::from(*qpn));
                attr::DREQ
            }
            Msg::Drep(l, r) => {
                set(&mut m, LOCAL_COMM_ID, u64::from(*l));
                set(&mut m, REMOTE_COMM_ID, u64::from(*r));
                attr::DREP
            }
            Msg::SidrReq(r) => {
                set(&mut m, SIDR_REQ_REQUESTID, u64::from(r.request_id));
                set(&mut m, SIDR_REQ_PARTITION_KEY, u64::from(r.pkey));
                set(&mut m, SIDR_REQ_SERVICEID, r.service_id);
                set_private(
                    &mut m,
                    SIDR_REQ_PRIVATE_DATA,
                    private::SIDR_REQ,
                    &r.private_data,
                );
                attr::SIDR_REQ
            }
            Msg::SidrRep(r) => {
                set(&mut m, SIDR_REP_REQUESTID, u64::from(r.request_id));
                set(&mut m, SIDR_REP_STATUS, u64::from(r.status));
                let info = &r.info[..r.info.len().min(SIDR_REP_INFO_LEN)];
                set(
                    &mut m,
                    SIDR_REP_ADDITIONAL_INFORMATION_LENGTH,
                    info.len() as u64,
                );
                set(&mut m, SIDR_REP_QPN, u64::from(r.qpn));
                set(&mut m, SIDR_REP_SERVICEID, r.service_id);
                set(&mut m, SIDR_REP_Q_KEY, u64::from(r.qkey));
                set_bytes(&mut m, SIDR_REP_ADDITIONAL_INFORMATION, info);
                set_private(
                    &mut m,
                    SIDR_REP_PRIVATE_DATA,
                    private::SIDR_REP,
                    &r.private_data,
                );
                attr::SIDR_REP
            }
        };
        m[16..18].copy_from_slice(&id.to_be_bytes());
        m
    }

    /// Reads a CM MAD.
    ///
    /// # Errors
    /// What is wrong with it: another class, version or method, an attribute this
    /// module does not read (LAP, APR), a length other than 256.
    pub fn decode(b: &[u8]) -> Result<Mad, String> {
        let m: &[u8; MAD_LEN] = b
            .try_into()
            .map_err(|_| format!("a MAD of {} bytes (not {MAD_LEN})", b.len()))?;
        if m[0] != 1 || m[1] != CLASS_CM || m[2] != CLASS_VERSION || m[3] != METHOD_SEND {
            return Err(format!(
                "not a CM SEND MAD (base version {}, class 0x{:02x}, class version {}, method 0x{:02x})",
                m[0], m[1], m[2], m[3]
            ));
        }
        let tid = u64::from_be_bytes([m[8], m[9], m[10], m[11], m[12], m[13], m[14], m[15]]);
        let ids = || (get(m, LOCAL_COMM_ID) as u32, get(m, REMOTE_COMM_ID) as u32);
        let msg = match u16::from_be_bytes([m[16], m[17]]) {
            attr::REQ => Msg::Req(decode_req(m)),
            attr::MRA => {
                let (l, r) = ids();
                Msg::Mra(
                    l,
                    r,
                    get(m, MRA_MESSAGE_MRAED) as u8,
                    get(m, MRA_SERVICE_TIMEOUT) as u8,
                )
            }
            attr::REJ => {
                let (l, r) = ids();
                let n = (get(m, REJ_REJECTED_INFO_LENGTH) as usize).min(REJ_ARI_LEN);
                Msg::Rej(Rej {
                    local_comm_id: l,
                    remote_comm_id: r,
                    message_rejected: get(m, REJ_MESSAGE_REJECTED) as u8,
                    reason: get(m, REJ_REASON) as u16,
                    ari: get_private(m, REJ_ARI, n),
                    private_data: get_private(m, REJ_PRIVATE_DATA, private::REJ),
                })
            }
            attr::REP => Msg::Rep(decode_rep(m)),
            attr::RTU => {
                let (l, r) = ids();
                Msg::Rtu(l, r)
            }
            attr::DREQ => {
                let (l, r) = ids();
                Msg::Dreq(l, r, get(m, DREQ_REMOTE_QPN_EECN) as u32)
            }
            attr::DREP => {
                let (l, r) = ids();
                Msg::Drep(l, r)
            }
            attr::SIDR_REQ => Msg::SidrReq(SidrReq {
                request_id: get(m, SIDR_REQ_REQUESTID) as u32,
                pkey: get(m, SIDR_REQ_PARTITION_KEY) as u16,
                service_id: get(m, SIDR_REQ_SERVICEID),
                private_data: get_private(m, SIDR_REQ_PRIVATE_DATA, private::SIDR_REQ),
            }),
            attr::SIDR_REP => {
                let n = (get(m, SIDR_REP_ADDITIONAL_INFORMATION_LENGTH) as usize)
                    .min(SIDR_REP_INFO_LEN);
                Msg::SidrRep(SidrRep {
                    request_id: get(m, SIDR_REP_REQUESTID) as u32,
                    status: get(m, SIDR_REP_STATUS) as u8,
                    qpn: get(m, SIDR_REP_QPN) as u32,
                    service_id: get(m, SIDR_REP_SERVICEID),
                    qkey: get(m, SIDR_REP_Q_KEY) as u32,
                    info: get_private(m, SIDR_REP_ADDITIONAL_INFORMATION, n),
                    private_data: get_private(m, SIDR_REP_PRIVATE_DATA, private::SIDR_REP),
                })
            }
            a => return Err(format!("a CM MAD of attribute 0x{a:04x}")),
        };
        Ok(Mad { tid, msg })
    }
}

fn encode_req(m: &mut [u8; MAD_LEN], r: &Req) {
    set(m, REQ_LOCAL_COMM_ID, u64::from(r.local_comm_id));
    set(m, REQ_SERVICE_ID, r.service_id);
    set(m, REQ_LOCAL_CA_GUID, r.local_ca_guid);
    set(m, REQ_LOCAL_Q_KEY, u64::from(r.local_qkey));
    set(m, REQ_LOCAL_QPN, u64::from(r.local_qpn));
    set(m, REQ_RESPONDER_RESOURCES, u64::from(r.responder_resources));
    set(m, REQ_INITIATOR_DEPTH, u64::from(r.initiator_depth));
    set(
        m,
        REQ_REMOTE_CM_RESPONSE_TIMEOUT,
        u64::from(r.remote_cm_response_timeout),
    );
    set(
        m,
        REQ_TRANSPORT_SERVICE_TYPE,
        u64::from(r.transport_service_type),
    );
    set(m, REQ_END_TO_END_FLOW_CONTROL, u64::from(r.flow_control));
    set(m, REQ_STARTING_PSN, u64::from(r.starting_psn));
    set(
        m,
        REQ_LOCAL_CM_RESPONSE_TIMEOUT,
        u64::from(r.local_cm_response_timeout),
    );
    set(m, REQ_RETRY_COUNT, u64::from(r.retry_count));
    set(m, REQ_PARTITION_KEY, u64::from(r.pkey));
    set(m, REQ_PATH_MTU, u64::from(r.path_mtu));
    set(m, REQ_RNR_RETRY_COUNT, u64::from(r.rnr_retry_count));
    set(m, REQ_MAX_CM_RETRIES, u64::from(r.max_cm_retries));
    set(m, REQ_SRQ, u64::from(r.srq));
    set(m, REQ_PRIMARY_LOCAL_PORT_LID, u64::from(r.local_lid));
    set(m, REQ_PRIMARY_REMOTE_PORT_LID, u64::from(r.remote_lid));
    set_bytes(m, REQ_PRIMARY_LOCAL_PORT_GID, &r.local_gid);
    set_bytes(m, REQ_PRIMARY_REMOTE_PORT_GID, &r.remote_gid);
    set(m, REQ_PRIMARY_FLOW_LABEL, u64::from(r.flow_label));
    set(m, REQ_PRIMARY_PACKET_RATE, u64::from(r.packet_rate));
    set(m, REQ_PRIMARY_TRAFFIC_CLASS, u64::from(r.traffic_class));
    set(m, REQ_PRIMARY_HOP_LIMIT, u64::from(r.hop_limit));
    set(m, REQ_PRIMARY_SL, u64::from(r.sl));
    set(m, REQ_PRIMARY_SUBNET_LOCAL, u64::from(r.subnet_local));
    set(
        m,
        REQ_PRIMARY_LOCAL_ACK_TIMEOUT,
        u64::from(r.local_ack_timeout),
    );
    set_private(m, REQ_PRIVATE_DATA, private::REQ, &r.private_data);
}

fn decode_req(m: &[u8; MAD_LEN]) -> Req {
    let g = |f| get(m, f);
    Req {
        local_comm_id: g(REQ_LOCAL_COMM_ID) as u32,
        service_id: g(REQ_SERVICE_ID),
        local_ca_guid: g(REQ_LOCAL_CA_GUID),
        local_qkey: g(REQ_LOCAL_Q_KEY) as u32,
        local_qpn: g(REQ_LOCAL_QPN) as u32,
        responder_resources: g(REQ_RESPONDER_RESOURCES) as u8,
        initiator_depth: g(REQ_INITIATOR_DEPTH) as u8,
        remote_cm_response_timeout: g(REQ_REMOTE_CM_RESPONSE_TIMEOUT) as u8,
        transport_service_type: g(REQ_TRANSPORT_SERVICE_TYPE) as u8,
        flow_control: g(REQ_END_TO_END_FLOW_CONTROL) != 0,
        starting_psn: g(REQ_STARTING_PSN) as u32,
        local_cm_response_timeout: g(REQ_LOCAL_CM_RESPONSE_TIMEOUT) as u8,
        retry_count: g(REQ_RETRY_COUNT) as u8,
        pkey: g(REQ_PARTITION_KEY) as u16,
        path_mtu: g(REQ_PATH_MTU) as u8,
        rnr_retry_count: g(REQ_RNR_RETRY_COUNT) as u8,
        max_cm_retries: g(REQ_MAX_CM_RETRIES) as u8,
        srq: g(REQ_SRQ) != 0,
        local_lid: g(REQ_PRIMARY_LOCAL_PORT_LID) as u16,
        remote_lid: g(REQ_PRIMARY_REMOTE_PORT_LID) as u16,
        local_gid: get_bytes(m, REQ_PRIMARY_LOCAL_PORT_GID),
        remote_gid: get_bytes(m, REQ_PRIMARY_REMOTE_PORT_GID),
        flow_label: g(REQ_PRIMARY_FLOW_LABEL) as u32,
        packet_rate: g(REQ_PRIMARY_PACKET_RATE) as u8,
        traffic_class: g(REQ_PRIMARY_TRAFFIC_CLASS) as u8,
        hop_limit: g(REQ_PRIMARY_HOP_LIMIT) as u8,
        sl: g(REQ_PRIMARY_SL) as u8,
        subnet_local: g(REQ_PRIMARY_SUBNET_LOCAL) != 0,
        local_ack_timeout: g(REQ_PRIMARY_LOCAL_ACK_TIMEOUT) as u8,
        private_data: get_private(m, REQ_PRIVATE_DATA, private::REQ),
    }
}

fn encode_rep(m: &mut [u8; MAD_LEN], r: &Rep) {
    set(m, LOCAL_COMM_ID, u64::from(r.local_comm_id));
    set(m, REMOTE_COMM_ID, u64::from(r.remote_comm_id));
    set(m, REP_LOCAL_Q_KEY, u64::from(r.local_qkey));
    set(m, REP_LOCAL_QPN, u64::from(r.local_qpn));
    set(m, REP_STARTING_PSN, u64::from(r.starting_psn));
    set(m, REP_RESPONDER_RESOURCES, u64::from(r.responder_resources));
    set(m, REP_INITIATOR_DEPTH, u64::from(r.initiator_depth));
    set(m, REP_TARGET_ACK_DELAY, u64::from(r.target_ack_delay));
    set(m, REP_FAILOVER_ACCEPTED, u64::from(r.failover_accepted));
    set(m, REP_END_TO_END_FLOW_CONTROL, u64::from(r.flow_control));
    set(m, REP_RNR_RETRY_COUNT, u64::from(r.rnr_retry_count));
    set(m, REP_SRQ, u64::from(r.srq));
    set(m, REP_LOCAL_CA_GUID, r.local_ca_guid);
    set_private(m, REP_PRIVATE_DATA, private::REP, &r.private_data);
}

fn decode_rep(m: &[u8; MAD_LEN]) -> Rep {
    let g = |f| get(m, f);
    Rep {
        local_comm_id: g(LOCAL_COMM_ID) as u32,
        remote_comm_id: g(REMOTE_COMM_ID) as u32,
        local_qkey: g(REP_LOCAL_Q_KEY) as u32,
        local_qpn: g(REP_LOCAL_QPN) as u32,
        starting_psn: g(REP_STARTING_PSN) as u32,
        responder_resources: g(REP_RESPONDER_RESOURCES) as u8,
        initiator_depth: g(REP_INITIATOR_DEPTH) as u8,
        target_ack_delay: g(REP_TARGET_ACK_DELAY) as u8,
        failover_accepted: g(REP_FAILOVER_ACCEPTED) as u8,
        flow_control: g(REP_END_TO_END_FLOW_CONTROL) != 0,
        rnr_retry_count: g(REP_RNR_RETRY_COUNT) as u8,
        srq: g(REP_SRQ) != 0,
        local_ca_guid: g(REP_LOCAL_CA_GUID),
        private_data: get_private(m, REP_PRIVATE_DATA, private::REP),
    }
}

#[cfg(test)]
mod tests;
