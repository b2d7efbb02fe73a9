//! Registered memory as the simulated NIC sees it: the key table, SGE checks, and the
//! copies in and out of application memory that a real NIC does by DMA.

use rustc_hash::FxHashMap as HashMap;
use verbs_api::{AccessFlags, Sge, WcStatus};

/// A registered region in the device's key table.
#[derive(Debug, Clone, Copy)]
pub(crate) struct MrEntry {
    pub pd: u32,
    pub addr: u64,
    pub len: u64,
    pub access: AccessFlags,
}

/// The key table: lkey == rkey, unique per fabric.
#[derive(Debug, Default)]
pub(crate) struct MrTable {
    by_key: HashMap<u32, MrEntry>,
    next_key: u32,
}

/// Where data lands or comes from after the checks: an address and a length.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Span {
    pub addr: u64,
    pub len: usize,
}

impl MrTable {
    /// Registered regions.
    pub(crate) fn len(&self) -> usize {
        self.by_key.len()
    }

    pub fn register(&mut self, e: MrEntry) -> u32 {
        // Keys look like mlx5's: an index in the upper bits and a varying low byte.
        self.next_key = self.next_key.wrapping_add(0x101);
        while self.next_key == 0 || self.by_key.contains_key(&self.next_key) {
            self.next_key = self.next_key.wrapping_add(0x101);
        }
        self.by_key.insert(self.next_key, e);
        self.next_key
    }

    pub fn deregister(&mut self, key: u32) {
        self.by_key.remove(&key);
    }

    fn lookup(&self, key: u32, pd: u32, addr: u64, len: u64) -> Option<&MrEntry> {
        let e = self.by_key.get(&key)?;
        let end = addr.checked_add(len)?;
        (e.pd == pd && addr >= e.addr && end <= e.addr + e.len).then_some(e)
    }

    /// Checks local SGEs (lkey, PD, bounds, LOCAL_WRITE when the NIC writes them). An
    /// unknown key, or a key of another PD, is reported as LOC_QP_OP_ERR and the caller
    /// maps it to what its personality reports (see [`Personality::bad_lkey_status`]);
    /// bounds and access violations are LOC_PROT_ERR.
    ///
    /// [`Personality::bad_lkey_status`]: super::personality::Personality::bad_lkey_status
    pub fn check_local(&self, pd: u32, sges: &[Sge], write: bool) -> Result<u64, WcStatus> {
        let mut total = 0u64;
        for s in sges {
            if s.length == 0 {
                continue;
            }
            let e = match self.by_key.get(&s.lkey) {
                Some(e) if e.pd == pd => e,
                _ => return Err(WcStatus::LocQpOpErr),
            };
            let in_bounds = s
                .addr
                .checked_add(u64::from(s.length))
                .is_some_and(|end| s.addr >= e.addr && end <= e.addr + e.len);
            if !in_bounds || (write && !e.access.contains(AccessFlags::LOCAL_WRITE)) {
                return Err(WcStatus::LocProtErr);
            }
            total += u64::from(s.length);
        }
        Ok(total)
    }

    /// Checks a remote access (rkey, PD of the target QP, bounds, the access right).
    pub fn check_remote(
        &self,
        pd: u32,
        rkey: u32,
        va: u64,
        len: u64,
        need: AccessFlags,
    ) -> Option<Span> {
        let e = if len == 0 {
            // A zero-length RDMA names no memory; IBA allows any rkey then.
            return Some(Span { addr: va, len: 0 });
        } else {
            self.lookup(rkey, pd, va, len)?
        };
        e.access.contains(need).then_some(Span {
            addr: va,
            len: len as usize,
        })
    }
}

/// Appends the bytes of `sges` (already checked, or inline) to `out`.
///
/// # Safety
/// Every SGE must name readable memory: either checked against the key table (which the
/// MR's owner keeps valid while it is registered) or inline data the poster vouched for.
pub(crate) unsafe fn gather(sges: &[Sge], out: &mut Vec<u8>) {
    for s in sges {
        if s.length == 0 {
            continue;
        }
        // SAFETY: the caller guarantees `addr..addr+length` is readable (see above).
        let src = unsafe { std::slice::from_raw_parts(s.addr as *const u8, s.length as usize) };
        out.extend_from_slice(src);
    }
}

/// Copies `pieces` in order into the checked SGEs; returns the bytes written, or
/// LOC_LEN_ERR when they do not fit.
///
/// # Safety
/// The SGEs must have passed [`MrTable::check_local`] with `write`, so they lie in
/// registered, writable memory that no Rust reference covers (the MR contract).
pub(crate) unsafe fn scatter(sges: &[Sge], pieces: &[&[u8]]) -> Result<usize, WcStatus> {
    let room: u64 = sges.iter().map(|s| u64::from(s.length)).sum();
    let need: usize = pieces.iter().map(|p| p.len()).sum();
    if need as u64 > room {
        return Err(WcStatus::LocLenErr);
    }
    let mut si = 0;
    let mut soff = 0usize;
    for p in pieces {
        let mut p: &[u8] = p;
        while !p.is_empty() {
            let s = &sges[si];
            let space = s.length as usize - soff;
            if space == 0 {
                si += 1;
                soff = 0;
                continue;
            }
            let n = space.min(p.len());
            // SAFETY: `soff + n <= length` of a checked, writable SGE (caller's contract);
            // `p` is simulator-owned memory, distinct from registered memory.
            unsafe {
                std::ptr::copy_nonoverlapping(p.as_ptr(), (s.addr as *mut u8).add(soff), n);
            }
            soff += n;
            p = &p[n..];
        }
    }
    Ok(need)
}

/// Copies `data` to a checked remote span (RDMA WRITE, READ response landing).
///
/// # Safety
/// `span` must come from [`MrTable::check_remote`] or [`MrTable::check_local`] for a
/// registered region at least `data.len()` long.
pub(crate) unsafe fn write_span(span: Span, data: &[u8]) {
    let n = data.len().min(span.len);
    if n == 0 {
        // A zero-length span names no memory: its address may be anything, null too,
        // which no pointer copy may be given, even of nothing.
        return;
    }
    // SAFETY: the span lies in registered memory (caller's contract), `n <= span.len`.
    unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), span.addr as *mut u8, n) };
}

/// Reads a checked span.
///
/// # Safety
/// As [`write_span`].
pub(crate) unsafe fn read_span(span: Span, out: &mut Vec<u8>) {
    if span.len == 0 {
        // As in write_span: the address of an empty span is not a pointer to anything.
        return;
    }
    // SAFETY: as above; reading registered memory the NIC may read at any time.
    let src = unsafe { std::slice::from_raw_parts(span.addr as *const u8, span.len) };
    out.extend_from_slice(src);
}

/// Reads or updates an 8-byte word for an atomic; returns the original value.
///
/// # Safety
/// `addr` must be an 8-byte span from [`MrTable::check_remote`].
pub(crate) unsafe fn atomic_u64(addr: u64, f: impl FnOnce(u64) -> u64) -> u64 {
    let p = addr as *mut u8;
    let mut b = [0u8; 8];
    // SAFETY: `addr..addr+8` is registered memory (caller's contract); unaligned access is
    // done bytewise, and the simulator is the only writer while it holds the world lock.
    unsafe { std::ptr::copy_nonoverlapping(p, b.as_mut_ptr(), 8) };
    let old = u64::from_ne_bytes(b);
    let new = f(old).to_ne_bytes();
    // SAFETY: as above.
    unsafe { std::ptr::copy_nonoverlapping(new.as_ptr(), p, 8) };
    old
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A zero-length RDMA READ or WRITE names no memory (`check_remote` lets any key and
    /// address through), so its span's address may be null: reading or writing it must
    /// touch nothing (found by the rc_frames fuzz target: a duplicate zero-length READ
    /// request with VA 0 reached `slice::from_raw_parts(null, 0)`).
    #[test]
    fn zero_length_spans_at_any_address_touch_nothing() {
        let table = MrTable::default();
        for va in [0, 1, u64::MAX] {
            let span = table
                .check_remote(0, 0xdead, va, 0, AccessFlags::REMOTE_READ)
                .expect("a zero-length span is allowed");
            let mut out = vec![7u8];
            // SAFETY: a zero-length span, which these functions must not dereference.
            unsafe {
                read_span(span, &mut out);
                write_span(span, &[1, 2, 3]);
            }
            assert_eq!(out, [7]);
        }
    }
}
