//! A context builder: device, PD, CQ, optional completion channel and QP in one call,
//! with queue sizes checked against the device's limits up front (a clear
//! [`ErrorKind::LimitExceeded`] instead of a bare EINVAL from `ibv_create_qp`).

use std::time::Duration;

use crate::traits::{CompletionChannel, CompletionQueue, Context, Verbs};
use crate::{Completion, Error, ErrorKind, QpCap, QpInitAttr, QpType, Result};

/// How the application learns of completions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Notification {
    /// Busy-poll the CQ; no completion channel.
    #[default]
    Poll,
    /// Wait on a completion channel after polling `max_poll` times in vain.
    Channel {
        /// Arm for solicited (and error) completions only.
        solicited_only: bool,
    },
}

/// Builds an [`Endpoint`]; see the module docs.
#[derive(Debug, Clone)]
pub struct ContextBuilder {
    device: Option<String>,
    port: u8,
    qp_type: QpType,
    cap: QpCap,
    cq_size: Option<u32>,
    notification: Notification,
    comp_vector: i32,
    sq_sig_all: bool,
}

impl ContextBuilder {
    /// A builder for a QP of `qp_type` with 256-deep queues, one SGE each, polling.
    pub fn new(qp_type: QpType) -> Self {
        ContextBuilder {
            device: None,
            port: 1,
            qp_type,
            cap: QpCap::new(256, 256, 1, 1),
            cq_size: None,
            notification: Notification::Poll,
            comp_vector: 0,
            sq_sig_all: false,
        }
    }

    /// Use the device called `name` (default: the first one listed).
    #[must_use]
    pub fn device(mut self, name: impl Into<String>) -> Self {
        self.device = Some(name.into());
        self
    }

    /// Use port `port` (default 1).
    #[must_use]
    pub fn port(mut self, port: u8) -> Self {
        self.port = port;
        self
    }

    /// Queue depths and SGE counts.
    #[must_use]
    pub fn queues(mut self, send_wr: u32, recv_wr: u32, send_sge: u32, recv_sge: u32) -> Self {
        self.cap.max_send_wr = send_wr;
        self.cap.max_recv_wr = recv_wr;
        self.cap.max_send_sge = send_sge;
        self.cap.max_recv_sge = recv_sge;
        self
    }

    /// Bytes of inline data per send.
    #[must_use]
    pub fn max_inline(mut self, bytes: u32) -> Self {
        self.cap.max_inline_data = bytes;
        self
    }

    /// CQ entries (default: send + receive depth).
    #[must_use]
    pub fn cq_size(mut self, cqe: u32) -> Self {
        self.cq_size = Some(cqe);
        self
    }

    /// Completion notification mode.
    #[must_use]
    pub fn notification(mut self, n: Notification) -> Self {
        self.notification = n;
        self
    }

    /// Completion vector, spead2-style: taken modulo the device's vector count; negative
    /// values mean busy polling (and switch the notification to [`Notification::Poll`]).
    #[must_use]
    pub fn comp_vector(mut self, v: i32) -> Self {
        self.comp_vector = v;
        if v < 0 {
            self.notification = Notification::Poll;
        }
        self
    }

    /// Signal every send.
    #[must_use]
    pub fn sq_sig_all(mut self, on: bool) -> Self {
        self.sq_sig_all = on;
        self
    }

    /// Opens the device and creates everything.
    ///
    /// # Errors
    /// [`ErrorKind::NoDevice`] when there is no (such) device;
    /// [`ErrorKind::LimitExceeded`] when a queue is deeper than the device allows;
    /// [`ErrorKind::InvalidArgument`] for a port the device lacks; the backend's errors.
    pub fn build<V: Verbs>(&self, verbs: &V) -> Result<Endpoint<V::Context>> {
        let name = match &self.device {
            Some(n) => n.clone(),
            None => verbs
                .devices()?
                .into_iter()
                .next()
                .map(|d| d.name)
                .ok_or_else(|| {
                    Error::new(
                        ErrorKind::NoDevice,
                        "ibv_get_device_list",
                        "no RDMA device found",
                    )
                })?,
        };
        let ctx = verbs.open(&name)?;
        let attr = ctx.query_device()?;
        if self.port == 0 || self.port > attr.phys_port_cnt {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                "ContextBuilder::build",
                format!(
                    "{name} has {} port(s); port {} does not exist",
                    attr.phys_port_cnt, self.port
                ),
            ));
        }
        let limit = |what: &str, want: u32, max: u32| -> Result<()> {
            if want > max {
                Err(Error::new(
                    ErrorKind::LimitExceeded,
                    "ContextBuilder::build",
                    format!("{what} of {want} exceeds {name}'s limit of {max}"),
                ))
            } else {
                Ok(())
            }
        };
        limit("send queue depth", self.cap.max_send_wr, attr.max_qp_wr)?;
        limit("receive queue depth", self.cap.max_recv_wr, attr.max_qp_wr)?;
        limit("send SGE count", self.cap.max_send_sge, attr.max_sge)?;
        limit("receive SGE count", self.cap.max_recv_sge, attr.max_sge)?;
        let cqe = self
            .cq_size
            .unwrap_or(self.cap.max_send_wr + self.cap.max_recv_wr)
            .max(1);
        limit("CQ size", cqe, attr.max_cqe)?;
        let pd = ctx.alloc_pd()?;
        let channel = match self.notification {
            Notification::Poll => None,
            Notification::Channel { .. } => Some(ctx.create_comp_channel()?),
        };
        let vectors = attr.num_comp_vectors.max(1);
        let vector = u32::try_from(self.comp_vector).unwrap_or(0) % vectors;
        let cq = ctx.create_cq(cqe, channel.as_ref(), vector)?;
        let mut init = QpInitAttr::new(self.qp_type, &cq, self.cap);
        init.sq_sig_all = self.sq_sig_all;
        let qp = ctx.create_qp(&pd, &init)?;
        Ok(Endpoint {
            qp,
            cq,
            channel,
            pd,
            ctx,
            port: self.port,
            notification: self.notification,
        })
    }
}

/// What [`ContextBuilder::build`] makes. Fields drop in declaration order: QP, CQ,
/// channel, PD, context — the order libibverbs requires.
#[derive(Debug)]
pub struct Endpoint<C: Context> {
    /// The queue pair (in RESET).
    pub qp: C::Qp,
    /// The CQ both queues complete to.
    pub cq: C::Cq,
    /// The completion channel, with [`Notification::Channel`].
    pub channel: Option<C::CompChannel>,
    /// The protection domain.
    pub pd: C::Pd,
    /// The open device.
    pub ctx: C,
    /// The port in use.
    pub port: u8,
    /// The notification mode.
    pub notification: Notification,
}

impl<C: Context> Endpoint<C> {
    /// Polls the CQ up to `max_poll` times; if nothing came and there is a channel, arms
    /// the CQ, polls once more (a completion may have slipped in before arming), then
    /// waits for an event up to `timeout` and polls again — spead2's pattern, which runs
    /// unchanged on hardware and on the simulator (whose clock moves while waiting).
    /// Returns the number of completions written to `wc`; 0 means the timeout passed.
    ///
    /// # Errors
    /// The backend's errors from poll, notify or the channel.
    pub fn wait(
        &self,
        wc: &mut [Completion],
        max_poll: u32,
        timeout: Option<Duration>,
    ) -> Result<usize> {
        for _ in 0..max_poll.max(1) {
            let n = self.cq.poll(wc)?;
            if n > 0 {
                return Ok(n);
            }
        }
        let (Some(ch), Notification::Channel { solicited_only }) =
            (&self.channel, self.notification)
        else {
            return Ok(0);
        };
        self.cq.req_notify(solicited_only)?;
        let n = self.cq.poll(wc)?;
        if n > 0 {
            return Ok(n);
        }
        match ch.get_cq_event(timeout)? {
            Some(_) => {
                self.cq.ack_events(1);
                self.cq.poll(wc)
            }
            None => Ok(0),
        }
    }
}
