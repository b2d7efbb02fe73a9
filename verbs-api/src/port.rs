//! Ports: what `ibv_query_port` reports.

use crate::c_fields::c_mirrored;
use crate::macros::verbs_enum;

verbs_enum! {
    /// `enum ibv_port_state`.
    pub enum PortState: u32 {
        /// No state change.
        Nop = 0 => "no state change (NOP)",
        /// The link is down.
        Down = 1 => "down",
        /// Initializing.
        Init = 2 => "init",
        /// Armed.
        Armed = 3 => "armed",
        /// Active: traffic flows.
        Active = 4 => "active",
        /// Active, deferring.
        ActiveDefer = 5 => "active defer",
    }
}

verbs_enum! {
    /// `enum ibv_mtu`: path MTU codes.
    pub enum Mtu: u32 {
        /// 256 bytes.
        Mtu256 = 1 => "256",
        /// 512 bytes.
        Mtu512 = 2 => "512",
        /// 1024 bytes.
        Mtu1024 = 3 => "1024",
        /// 2048 bytes.
        Mtu2048 = 4 => "2048",
        /// 4096 bytes.
        Mtu4096 = 5 => "4096",
    }
}

impl Mtu {
    /// The MTU in bytes.
    pub const fn bytes(self) -> u32 {
        128 << (self as u32)
    }

    /// The largest MTU code not above `bytes` (as `ibv_rc_pingpong`'s `-m` maps sizes),
    /// or `None` below 256.
    pub fn from_bytes(bytes: u32) -> Option<Self> {
        Mtu::ALL.iter().rev().copied().find(|m| m.bytes() <= bytes)
    }
}

#[allow(clippy::derivable_impls)] // the enum is declared by verbs_enum!
impl Default for Mtu {
    fn default() -> Self {
        Mtu::Mtu1024
    }
}

verbs_enum! {
    /// Link layer of a port (`IBV_LINK_LAYER_*`).
    pub enum LinkLayer: u8 {
        /// Unspecified (treated as InfiniBand).
        Unspecified = 0 => "unspecified",
        /// InfiniBand.
        Infiniband = 1 => "InfiniBand",
        /// Ethernet (RoCE).
        Ethernet = 2 => "Ethernet",
    }
}

#[allow(clippy::derivable_impls)] // the enum is declared by verbs_enum!
impl Default for LinkLayer {
    fn default() -> Self {
        LinkLayer::Ethernet
    }
}

#[allow(clippy::derivable_impls)] // the enum is declared by verbs_enum!
impl Default for PortState {
    fn default() -> Self {
        PortState::Down
    }
}

c_mirrored! { $
    /// `struct ibv_port_attr`.
    #[derive(Debug, Clone, PartialEq, Eq, Default)]
    pub struct PortAttr mirrored by port_attr_c_struct {
        /// Logical port state.
        pub state: PortState => u32,
        /// Largest MTU the port supports.
        pub max_mtu: Mtu => u32,
        /// MTU in use.
        pub active_mtu: Mtu => u32,
        /// Length of the GID table.
        pub gid_tbl_len: u32 => u32,
        /// Port capability flags (`IBV_PORT_*`).
        pub port_cap_flags: u32 => u32,
        /// Largest message size.
        pub max_msg_sz: u32 => u32,
        /// Bad P_Key counter.
        pub bad_pkey_cntr: u32 => u32,
        /// Q_Key violation counter.
        pub qkey_viol_cntr: u32 => u32,
        /// Length of the P_Key table.
        pub pkey_tbl_len: u16 => u16,
        /// Base LID (0 on Ethernet).
        pub lid: u16 => u16,
        /// Subnet manager LID.
        pub sm_lid: u16 => u16,
        /// LID mask control.
        pub lmc: u8 => u8,
        /// Maximum virtual lanes.
        pub max_vl_num: u8 => u8,
        /// Subnet manager service level.
        pub sm_sl: u8 => u8,
        /// Subnet propagation delay.
        pub subnet_timeout: u8 => u8,
        /// Active link width.
        pub active_width: u8 => u8,
        /// Active link speed.
        pub active_speed: u8 => u8,
        /// Physical port state (5 = LinkUp).
        pub phys_state: u8 => u8,
        /// Link layer.
        pub link_layer: LinkLayer => u8,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mtu_codes_and_sizes() {
        assert_eq!(Mtu::Mtu1024.as_raw(), 3);
        assert_eq!(Mtu::Mtu4096.bytes(), 4096);
        assert_eq!(Mtu::Mtu256.bytes(), 256);
        assert_eq!(Mtu::from_bytes(1500), Some(Mtu::Mtu1024));
        assert_eq!(Mtu::from_bytes(100), None);
        assert_eq!(PortState::Active.as_raw(), 4);
        assert_eq!(PortState::Active.as_str(), "active");
        assert_eq!(LinkLayer::Ethernet.as_raw(), 2);
    }
}
