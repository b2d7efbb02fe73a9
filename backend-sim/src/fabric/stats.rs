//! Counters of the fabric and of its ports.

use crate::fault::DropReason;

/// Counters of one port.
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
    /// Frames that reached this port with a bad checksum or ICRC and were dropped.
    pub rx_bad_checksum: u64,
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
    /// Frames with a flipped bit.
    pub corrupted: u64,
    /// Lost to random loss.
    pub dropped_loss: u64,
    /// Lost to the drop list.
    pub dropped_list: u64,
    /// Lost to partitions.
    pub dropped_partition: u64,
    /// Lost to full buffers.
    pub dropped_overrun: u64,
    /// Lost for want of a destination.
    pub dropped_no_route: u64,
    /// Dropped by receivers for bad checksums.
    pub dropped_checksum: u64,
    /// Rejected as too long.
    pub dropped_too_long: u64,
}

impl FabricStats {
    pub(crate) fn count_drop(&mut self, r: DropReason) {
        match r {
            DropReason::Loss => self.dropped_loss += 1,
            DropReason::DropList => self.dropped_list += 1,
            DropReason::Partition => self.dropped_partition += 1,
            DropReason::Overrun => self.dropped_overrun += 1,
            DropReason::NoRoute => self.dropped_no_route += 1,
            DropReason::BadChecksum => self.dropped_checksum += 1,
            DropReason::TooLong => self.dropped_too_long += 1,
        }
    }

    /// All frames lost, for any reason.
    #[must_use]
    pub fn dropped(&self) -> u64 {
        self.dropped_loss
            + self.dropped_list
            + self.dropped_partition
            + self.dropped_overrun
            + self.dropped_no_route
            + self.dropped_checksum
            + self.dropped_too_long
    }
}
