//! Counters of the fabric and of its ports.

use crate::fault::DropReason;

/// Counters of one port (and of the switch's side of its link).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PortStats {
    /// Frames handed to the fabric by this port.
    pub tx_frames: u64,
    /// Bytes handed to the fabric by this port.
    pub tx_bytes: u64,
    /// Frames delivered to this port.
    pub rx_frames: u64,
    /// Bytes delivered to this port.
    pub rx_bytes: u64,
    /// Frames this port's NIC dropped for a bad Ethernet FCS.
    pub rx_fcs_errors: u64,
    /// Frames from this port the switch's ingress dropped for a bad Ethernet FCS.
    pub switch_fcs_errors: u64,
    /// RoCEv2 frames this port's NIC dropped for a bad IPv4 header.
    pub rx_ip_header_errors: u64,
    /// RoCEv2 frames this port's NIC dropped for a wrong UDP checksum.
    pub rx_udp_checksum_errors: u64,
    /// RoCEv2 frames this port's NIC dropped for a wrong ICRC.
    pub rx_icrc_errors: u64,
    /// Frames lost because this port's receive buffer was full.
    pub rx_overrun: u64,
}

/// Counters of the whole fabric.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FabricStats {
    /// Frames handed to the fabric (the next global packet index).
    pub transmitted: u64,
    /// Frames (copies) delivered to ports.
    pub delivered: u64,
    /// Copies made by duplication faults.
    pub duplicated: u64,
    /// Frames with a bit flipped on a wire.
    pub corrupted_wire: u64,
    /// Frames with a bit flipped inside the switch.
    pub corrupted_switch: u64,
    /// Frames whose payload their sender corrupted before making the checksums.
    pub corrupted_payload: u64,
    /// Lost to random loss.
    pub dropped_loss: u64,
    /// Lost in bursts of loss.
    pub dropped_burst: u64,
    /// Lost to the drop list.
    pub dropped_list: u64,
    /// Lost to partitions.
    pub dropped_partition: u64,
    /// Lost to full buffers.
    pub dropped_overrun: u64,
    /// Lost for want of a destination.
    pub dropped_no_route: u64,
    /// Dropped by a receiving port for a bad Ethernet FCS.
    pub dropped_fcs: u64,
    /// Dropped by a receiving NIC for a bad IPv4 header (RoCEv2).
    pub dropped_ip_header: u64,
    /// Dropped by a receiving NIC for a wrong UDP checksum (RoCEv2).
    pub dropped_udp_checksum: u64,
    /// Dropped by a receiving NIC for a wrong ICRC (RoCEv2).
    pub dropped_icrc: u64,
    /// Rejected as too long.
    pub dropped_too_long: u64,
}

impl FabricStats {
    pub(crate) fn count_drop(&mut self, r: DropReason) {
        match r {
            DropReason::Loss => self.dropped_loss += 1,
            DropReason::Burst => self.dropped_burst += 1,
            DropReason::DropList => self.dropped_list += 1,
            DropReason::Partition => self.dropped_partition += 1,
            DropReason::Overrun => self.dropped_overrun += 1,
            DropReason::NoRoute => self.dropped_no_route += 1,
            DropReason::Fcs => self.dropped_fcs += 1,
            DropReason::IpHeader => self.dropped_ip_header += 1,
            DropReason::UdpChecksum => self.dropped_udp_checksum += 1,
            DropReason::Icrc => self.dropped_icrc += 1,
            DropReason::TooLong => self.dropped_too_long += 1,
        }
    }

    /// Frames dropped by a check of their bytes: FCS, IPv4 header, UDP checksum, ICRC.
    #[must_use]
    pub fn dropped_checksum(&self) -> u64 {
        self.dropped_fcs + self.dropped_ip_header + self.dropped_udp_checksum + self.dropped_icrc
    }

    /// Frames with a flipped bit, wherever it was flipped.
    #[must_use]
    pub fn corrupted(&self) -> u64 {
        self.corrupted_wire + self.corrupted_switch + self.corrupted_payload
    }

    /// All frames lost, for any reason.
    #[must_use]
    pub fn dropped(&self) -> u64 {
        self.dropped_loss
            + self.dropped_burst
            + self.dropped_list
            + self.dropped_partition
            + self.dropped_overrun
            + self.dropped_no_route
            + self.dropped_checksum()
            + self.dropped_too_long
    }
}
