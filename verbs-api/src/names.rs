//! libibverbs' string helpers, as free functions for users who look for them by name.
//! Each is the same as the enum's `as_str()`.

use crate::{EventType, NodeType, PortState, QpState, WcStatus};

/// `ibv_wc_status_str`.
pub fn wc_status_str(status: WcStatus) -> &'static str {
    status.as_str()
}

/// `ibv_event_type_str`.
pub fn event_type_str(event: EventType) -> &'static str {
    event.as_str()
}

/// `ibv_port_state_str`.
pub fn port_state_str(state: PortState) -> &'static str {
    state.as_str()
}

/// `ibv_node_type_str`.
pub fn node_type_str(node_type: NodeType) -> &'static str {
    node_type.as_str()
}

/// The QP state's name as rdma-core's tools print it (`RESET`, `INIT`, `RTR`, ...).
pub fn qp_state_str(state: QpState) -> &'static str {
    state.as_str()
}

/// `ibv_wc_status_str` for a raw value, `"unknown"` outside the enum (as libibverbs).
pub fn wc_status_str_raw(raw: u32) -> &'static str {
    WcStatus::from_raw(raw).map_or("unknown", WcStatus::as_str)
}

/// `ibv_event_type_str` for a raw value, `"unknown"` outside the enum (as libibverbs).
pub fn event_type_str_raw(raw: u32) -> &'static str {
    EventType::from_raw(raw).map_or("unknown", EventType::as_str)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_match_libibverbs() {
        assert_eq!(
            wc_status_str(WcStatus::LocProtErr),
            "local protection error"
        );
        assert_eq!(wc_status_str_raw(99), "unknown");
        assert_eq!(
            event_type_str(EventType::QpLastWqeReached),
            "last WQE reached"
        );
        assert_eq!(event_type_str_raw(4), "communication established");
        assert_eq!(port_state_str(PortState::Active), "active");
        assert_eq!(node_type_str(NodeType::Ca), "InfiniBand channel adapter");
        assert_eq!(qp_state_str(QpState::Rtr), "RTR");
    }
}
