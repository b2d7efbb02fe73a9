//! Asynchronous events (`ibv_get_async_event`): errors and notices not tied to one work
//! request, such as a CQ overrun or an SRQ reaching its limit.

use crate::macros::verbs_enum;

verbs_enum! {
    /// `enum ibv_event_type`.
    pub enum EventType: u32 {
        /// A CQ overran (or another CQ error).
        CqErr = 0 => "CQ error",
        /// A QP hit a catastrophic error.
        QpFatal = 1 => "local work queue catastrophic error",
        /// Invalid request on a QP's work queue.
        QpReqErr = 2 => "invalid request local work queue error",
        /// Local access violation on a QP's work queue.
        QpAccessErr = 3 => "local access violation work queue error",
        /// Communication established (first packet in RTR).
        CommEst = 4 => "communication established",
        /// The send queue drained (SQD).
        SqDrained = 5 => "send queue drained",
        /// Path migrated.
        PathMig = 6 => "path migrated",
        /// Path migration failed.
        PathMigErr = 7 => "path migration request error",
        /// The device hit a catastrophic error.
        DeviceFatal = 8 => "local catastrophic error",
        /// A port became active.
        PortActive = 9 => "port active",
        /// A port went down.
        PortErr = 10 => "port error",
        /// LID changed.
        LidChange = 11 => "LID change",
        /// P_Key table changed.
        PkeyChange = 12 => "P_Key change",
        /// Subnet manager changed.
        SmChange = 13 => "SM change",
        /// An SRQ hit a catastrophic error.
        SrqErr = 14 => "SRQ catastrophic error",
        /// An SRQ's posted receives fell below its armed limit.
        SrqLimitReached = 15 => "SRQ limit reached",
        /// The last WQE of a QP attached to an SRQ was consumed.
        QpLastWqeReached = 16 => "last WQE reached",
        /// Client reregistration.
        ClientReregister = 17 => "client reregistration",
        /// GID table changed.
        GidChange = 18 => "GID table change",
        /// A work queue hit a fatal error.
        WqFatal = 19 => "WQ fatal",
    }
}

/// What an async event is about (the union `ibv_async_event.element`). Resources are named
/// by their numbers (QP number, CQ/SRQ handle) so events are plain data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventElement {
    /// A completion queue, by [`crate::CompletionQueue::handle`].
    Cq(u32),
    /// A queue pair, by number.
    Qp(u32),
    /// A shared receive queue, by [`crate::SharedReceiveQueue::handle`].
    Srq(u32),
    /// A port, by number.
    Port(u8),
    /// The device as a whole.
    Device,
}

/// `struct ibv_async_event`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AsyncEvent {
    /// What happened.
    pub event_type: EventType,
    /// To what.
    pub element: EventElement,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_and_names_match_libibverbs() {
        assert_eq!(EventType::ALL.len(), 20);
        for (i, e) in EventType::ALL.iter().enumerate() {
            assert_eq!(e.as_raw() as usize, i);
        }
        assert_eq!(EventType::SrqLimitReached.as_str(), "SRQ limit reached");
        assert_eq!(EventType::CqErr.to_string(), "CQ error");
    }
}
