//! SIDR (service id resolution: `rdma_connect` on a UD id, RDMA_PS_UDP or RDMA_PS_IPOIB)
//! between an emulated host and a host beyond a port: the emulated CM's `SidrReq` and
//! `SidrRep` messages as the kernel's SIDR REQ and SIDR REP MADs ([`super::cm_mad`]) and
//! back, for [`super::cm_bridge`], and what the kernel's `ib_cm` does around them, for
//! [`super::cm_resend`].
//!
//! - The SIDR REQ is `cm_format_sidr_req`'s: the request id the emulated id, the P_Key
//!   0xffff, the service id the port space and port as for a REQ, and the private data a
//!   `struct cma_hdr` and the program's (`cma_resolve_ib_udp`, cma.c); its transaction id
//!   the request id. The SIDR REP (`cm_format_sidr_rep`) answers with the SIDR REQ's
//!   transaction id, request id and service id, the QP number, the Q_Key and status the
//!   emulated listener gave (`cma_send_sidr_rep`: RDMA_UDP_QKEY 0x01234567 for
//!   RDMA_PS_UDP).
//! - A SIDR REQ is sent again when its SIDR REP has not come within cma.c's
//!   `timeout_ms` (`1 << (CMA_CM_RESPONSE_TIMEOUT - 8)`, 4096 ms), at most
//!   `CMA_MAX_CM_RETRIES` (15) times (`ib_send_cm_sidr_req` puts both on the MAD); when
//!   they are spent the emulated id gets a SIDR REP of status -ETIMEDOUT, which the
//!   emulated CM reports as `RDMA_CM_EVENT_UNREACHABLE` with that status, as cma.c's
//!   `cma_sidr_rep_handler` reports `IB_CM_SIDR_REQ_ERROR`.
//! - A SIDR REQ repeated before the emulated listener answered is dropped
//!   (`cm_sidr_req_handler`: `cm_insert_remote_sidr` finds it, "Duplicate message"); once
//!   the SIDR REP is sent the entry is gone (`cm_send_sidr_rep_locked` erases it from the
//!   remote SIDR table), so a later SIDR REQ is a new one. A SIDR REP for no SIDR REQ
//!   waiting is dropped (`cm_sidr_rep_handler` finds no id).

use std::collections::HashMap;
use std::net::{Ipv4Addr, SocketAddr};

use backend_sim::Nanos;

use super::cm_frame::{CmaHdr, CMA_HDR_LEN};
use super::cm_mad::{SidrRep, SidrReq, PKEY};
use crate::rdmacm::core::messages::{Message, Service, SEND_TIMEOUT};

/// cma.c's SIDR REQ `timeout_ms`, `1 << (CMA_CM_RESPONSE_TIMEOUT - 8)`, in nanoseconds.
pub const SIDR_TIMEOUT: Nanos = (1 << (20 - 8)) * 1_000_000;
/// `CMA_MAX_CM_RETRIES`.
pub const SIDR_RETRIES: u8 = 15;

/// The service id of `service` (`rdma_get_service_id`: the port space above the port).
#[must_use]
pub fn service_id(service: Service) -> u64 {
    (u64::from(service.ps) << 16) | u64::from(service.port)
}

/// The SIDR REQ of emulated id `local` for `service`, its RDMA CM header `hdr` and the
/// program's private data `data`.
#[must_use]
pub fn req(local: u32, service: Service, hdr: &CmaHdr, data: &[u8]) -> SidrReq {
    let mut pd = hdr.encode().to_vec();
    pd.extend_from_slice(data);
    SidrReq {
        request_id: local,
        pkey: PKEY,
        service_id: service_id(service),
        private_data: pd,
    }
}

/// The SIDR REP to request `request_id` for `service_id` of the emulated listener's
/// answer (`status`, `qpn`, `qkey`, `data`).
///
/// # Errors
/// A status that is no `IB_SIDR_*` (negative or above 255).
pub fn rep(
    request_id: u32,
    service_id: u64,
    status: i32,
    qpn: u32,
    qkey: u32,
    data: Vec<u8>,
) -> Result<SidrRep, String> {
    let status = u8::try_from(status).map_err(|_| format!("a SIDR REP of status {status}"))?;
    Ok(SidrRep {
        request_id,
        status,
        qpn,
        service_id,
        qkey,
        info: Vec::new(),
        private_data: data,
    })
}

/// The emulated CM's message of a SIDR REQ that reached emulated host `host_ip`
/// (`service_ip` the address its RDMA CM header connects to, as the emulated CM knows
/// it), with its service; `None` if its private data has no RDMA CM header.
#[must_use]
pub fn req_message(
    r: &SidrReq,
    service_ip: impl FnOnce(&CmaHdr) -> Option<Ipv4Addr>,
) -> Option<(Service, Message)> {
    let hdr = CmaHdr::decode(&r.private_data).ok()?;
    let ip = service_ip(&hdr)?;
    let port = (r.service_id & 0xffff) as u16;
    let service = Service {
        ip,
        port,
        ps: ((r.service_id >> 16) & 0xffff) as u32,
    };
    let msg = Message::SidrReq {
        service,
        src: hdr.src,
        dst: SocketAddr::new(hdr.dst, port),
        private_data: r.private_data[CMA_HDR_LEN..].to_vec(),
    };
    Some((service, msg))
}

/// The emulated CM's message of a SIDR REP.
#[must_use]
pub fn rep_message(r: SidrRep) -> Message {
    Message::SidrRep {
        status: i32::from(r.status),
        qpn: r.qpn,
        qkey: r.qkey,
        private_data: r.private_data,
    }
}

/// The message an emulated id gets when its SIDR REQ's retries are spent.
#[must_use]
pub fn timed_out() -> Message {
    Message::SidrRep {
        status: SEND_TIMEOUT,
        qpn: 0,
        qkey: 0,
        private_data: Vec::new(),
    }
}

/// What the bridge remembers of a remote SIDR REQ until it is answered: its transaction
/// id, service id and whether it came over IPv6.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Asked {
    /// The SIDR REQ's transaction id.
    pub tid: u64,
    /// Its service id.
    pub service_id: u64,
    /// Whether it came over IPv6.
    pub v6: bool,
}

/// A SIDR REQ of an emulated host waiting for its SIDR REP.
#[derive(Debug, Clone)]
struct Waiting {
    host: Ipv4Addr,
    request_id: u32,
    remote: Ipv4Addr,
    frame: Vec<u8>,
    due: Nanos,
    left: u8,
}

/// What the clock calls for ([`Sidr::poll`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Due {
    /// Send `frame` again from emulated host `host`'s port.
    Again {
        /// The emulated host.
        host: Ipv4Addr,
        /// The frame.
        frame: Vec<u8>,
    },
    /// The retries of emulated host `host`'s id `request_id`, asking remote host
    /// `remote`, are spent.
    GaveUp {
        /// The emulated host.
        host: Ipv4Addr,
        /// Its id.
        request_id: u32,
        /// The remote host.
        remote: Ipv4Addr,
    },
}

/// What a SIDR MAD that reached an emulated host's port is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Seen {
    /// New: translate it.
    New,
    /// A repeat: drop it.
    Duplicate,
    /// For no SIDR REQ waiting: drop it.
    Stray,
}

/// `ib_cm`'s SIDR state for the emulated hosts: their SIDR REQs waiting, the remote SIDR
/// REQs not answered yet.
#[derive(Debug, Default)]
pub struct Sidr {
    waiting: Vec<Waiting>,
    /// (remote host, request id) -> the emulated host asked.
    asked: HashMap<(Ipv4Addr, u32), Ipv4Addr>,
}

impl Sidr {
    /// SIDR REQs waiting and remote SIDR REQs unanswered.
    #[must_use]
    pub fn live(&self) -> usize {
        self.waiting.len() + self.asked.len()
    }

    /// When [`Sidr::poll`] has something to do next.
    #[must_use]
    pub fn next_due(&self) -> Option<Nanos> {
        self.waiting.iter().map(|w| w.due).min()
    }

    /// Emulated host `host` sent SIDR REQ `r` to `remote` in `frame` at `now`.
    pub fn sent_req(
        &mut self,
        now: Nanos,
        host: Ipv4Addr,
        remote: Ipv4Addr,
        r: &SidrReq,
        frame: &[u8],
    ) {
        self.waiting
            .retain(|w| !(w.host == host && w.request_id == r.request_id));
        self.waiting.push(Waiting {
            host,
            request_id: r.request_id,
            remote,
            frame: frame.to_vec(),
            due: now + SIDR_TIMEOUT,
            left: SIDR_RETRIES,
        });
    }

    /// An emulated host answered remote host `remote`'s SIDR REQ `request_id`.
    pub fn sent_rep(&mut self, remote: Ipv4Addr, request_id: u32) {
        self.asked.remove(&(remote, request_id));
    }

    /// SIDR REQ `r` of remote host `remote` reached emulated host `host`.
    pub fn received_req(&mut self, host: Ipv4Addr, remote: Ipv4Addr, r: &SidrReq) -> Seen {
        match self.asked.insert((remote, r.request_id), host) {
            Some(_) => Seen::Duplicate,
            None => Seen::New,
        }
    }

    /// SIDR REP `r` of remote host `remote` reached emulated host `host`.
    pub fn received_rep(&mut self, host: Ipv4Addr, remote: Ipv4Addr, r: &SidrRep) -> Seen {
        let at = self
            .waiting
            .iter()
            .position(|w| w.host == host && w.remote == remote && w.request_id == r.request_id);
        match at {
            Some(i) => {
                self.waiting.swap_remove(i);
                Seen::New
            }
            None => Seen::Stray,
        }
    }

    /// What is due by `now`.
    pub fn poll(&mut self, now: Nanos) -> Vec<Due> {
        let mut out = Vec::new();
        self.waiting.retain_mut(|w| {
            if w.due > now {
                return true;
            }
            if w.left == 0 {
                out.push(Due::GaveUp {
                    host: w.host,
                    request_id: w.request_id,
                    remote: w.remote,
                });
                return false;
            }
            w.left -= 1;
            w.due = now + SIDR_TIMEOUT;
            out.push(Due::Again {
                host: w.host,
                frame: w.frame.clone(),
            });
            true
        });
        out
    }
}

#[cfg(test)]
mod tests;
