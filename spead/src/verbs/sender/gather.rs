//! Zero-copy sends: the user's registered regions, and each packet's SGE list (item
//! bytes gathered from a region, or copied into the slot).

use verbs_api::{AccessFlags, Context, MemoryRegion, Sge};

use super::state::{Region, Sender, SlotMeta, NO_HEAP};
use super::types::MAX_SGE;
use crate::send::Part;
use crate::verbs::error::VerbsError;

impl<C: Context> Sender<C> {
    /// Registers `len` bytes at `ptr` with the device, so that heap items lying inside
    /// are sent from there without a copy (spead2's `udp_ibv_config::memory_regions`).
    ///
    /// # Safety
    /// The `len` bytes at `ptr` must stay allocated for as long as the sender lives, and
    /// must not be written while a packet gathering from them is in flight (after
    /// [`Sender::send_heaps`] returned, until [`Sender::drain`], or until the heap is
    /// reported by [`Sender::take_completed`]): the NIC reads them then, by DMA.
    ///
    /// # Errors
    /// [`VerbsError::Config`] for an empty region ("memory region must have non-zero
    /// size") or one overlapping a registered one ("memory regions overlap"), as spead2;
    /// the registration's error.
    pub unsafe fn add_memory_region(
        &mut self,
        ptr: *const u8,
        len: usize,
    ) -> Result<(), VerbsError> {
        if len == 0 {
            return Err(VerbsError::Config(
                "memory region must have non-zero size".into(),
            ));
        }
        let start = ptr as usize;
        let end = start.checked_add(len).ok_or_else(|| {
            VerbsError::Config(format!("memory region of {len} bytes at {ptr:p} wraps"))
        })?;
        let at = self.regions.partition_point(|r| r.start < start);
        let overlaps_prev = at > 0 && {
            let p = &self.regions[at - 1];
            p.start + p.len > start
        };
        let overlaps_next = self.regions.get(at).is_some_and(|n| n.start < end);
        if overlaps_prev || overlaps_next {
            return Err(VerbsError::Config("memory regions overlap".into()));
        }
        // SAFETY: the caller keeps the bytes allocated for the sender's life (the
        // registration's), and sending needs no write access: the NIC only reads them.
        let mr = unsafe {
            self.ep
                .ctx
                .reg_mr(&self.ep.pd, ptr.cast_mut(), len, AccessFlags::empty())?
        };
        self.regions.insert(at, Region { start, len, mr });
        Ok(())
    }

    /// Builds the SGE list of the packet in slot `pos`: its first `prefix` SPEAD bytes
    /// are in the slot behind the headers; `parts` follow, gathered from a registered
    /// region when all fit in [`MAX_SGE`] SGEs, else copied into the slot. Returns the
    /// packet's SPEAD length and the bytes gathered.
    pub(super) fn gather(
        &mut self,
        pos: usize,
        prefix: usize,
        parts: &[Part<'_>],
    ) -> (usize, usize) {
        let pool_lkey = self.pool.mr().lkey();
        let mut meta = SlotMeta {
            sge: [Sge::default(); MAX_SGE],
            nsge: 1,
            substream: 0,
            bytes: 0,
            heap: NO_HEAP,
        };
        let mut copy_at = self.headers + prefix;
        meta.sge[0] = self.pool.send_sge(&self.tokens[pos], copy_at);
        let slot_addr = meta.sge[0].addr;
        // spead2: the slot's SGE and one per part must fit in MAX_SGE (before merging).
        let can_skip_copy = parts.len() < MAX_SGE;
        let mut len = prefix;
        let mut gathered = 0;
        for part in parts {
            let n = part.len();
            if n == 0 {
                continue;
            }
            let region = match part {
                Part::Data(d) if can_skip_copy => self.region_of(d),
                _ => None,
            };
            let cur = match (region, part) {
                (Some((addr, lkey)), _) => {
                    gathered += n;
                    Sge {
                        addr,
                        length: n as u32,
                        lkey,
                    }
                }
                (None, p) => {
                    let slot = self.pool.slot_mut(&mut self.tokens[pos]);
                    match p {
                        Part::Data(d) => slot[copy_at..copy_at + n].copy_from_slice(d),
                        Part::Zeros(_) => slot[copy_at..copy_at + n].fill(0),
                    }
                    let sge = Sge {
                        addr: slot_addr + copy_at as u64,
                        length: n as u32,
                        lkey: pool_lkey,
                    };
                    copy_at += n;
                    sge
                }
            };
            len += n;
            let prev = &mut meta.sge[meta.nsge - 1];
            if prev.lkey == cur.lkey && prev.addr + u64::from(prev.length) == cur.addr {
                prev.length += cur.length;
            } else {
                meta.sge[meta.nsge] = cur;
                meta.nsge += 1;
            }
        }
        meta.bytes = len;
        self.meta[pos] = meta;
        (len, gathered)
    }

    /// The address and lkey of `d` in a registered region, if it lies in one.
    fn region_of(&self, d: &[u8]) -> Option<(u64, u32)> {
        let start = d.as_ptr() as usize;
        let at = self.regions.partition_point(|r| r.start <= start);
        let r = self.regions.get(at.checked_sub(1)?)?;
        (start + d.len() <= r.start + r.len).then(|| (start as u64, r.mr.lkey()))
    }
}
