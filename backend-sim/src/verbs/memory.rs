//! Registered memory as the simulated NIC sees it: the key table, SGE checks, and the
//! copies in and out of application memory that a real NIC does by DMA.

use rustc_hash::FxHashMap as HashMap;
use verbs_api::{AccessFlags, MwBindInfo, MwType, Sge, WcStatus};

/// A registered region in the device's key table.
#[derive(Debug, Clone, Copy)]
pub(crate) struct MrEntry {
    pub pd: u32,
    pub addr: u64,
    pub len: u64,
    pub access: AccessFlags,
}

/// The key table: lkey == rkey, unique per fabric; and the memory windows.
#[derive(Debug, Default, Clone)]
pub(crate) struct MrTable {
    by_key: HashMap<u32, MrEntry>,
    next_key: u32,
    /// Memory windows by index (`rkey >> 8`, as rxe's pool index).
    mws: HashMap<u32, MwEntry>,
    next_mw: u32,
}

/// The first index of a memory window's rkey (rxe's `RXE_MIN_MW_INDEX`): an rkey whose
/// upper 24 bits are at least this names a window (`rkey_is_mw`), never a region.
const MIN_MW_INDEX: u32 = 0x1_0001;

/// A memory window's state (rxe's `rxe_mw_state`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MwState {
    /// A type 2 window not bound.
    Free,
    /// A type 1 window (bound or not), or a bound type 2 window.
    Valid,
}

/// A memory window in the device's table.
#[derive(Debug, Clone, Copy)]
pub(crate) struct MwEntry {
    pub pd: u32,
    pub mw_type: MwType,
    pub handle: u32,
    /// The rkey the device matches requests against.
    pub rkey: u32,
    /// The rkey `ibv_mw.rkey` holds on the application's side (what a bind names the
    /// window by, and what the application reads).
    pub user_rkey: u32,
    pub state: MwState,
    /// The region's key (lkey) while bound with a length.
    pub mr: Option<u32>,
    pub addr: u64,
    pub len: u64,
    pub access: AccessFlags,
    /// A bound type 2 window: the QP that bound it, the only one it serves.
    pub qpn: Option<u32>,
}

/// What a device does differently with windows.
#[derive(Debug, Clone, Copy)]
pub(crate) struct MwRules {
    /// rxe checks an access through a window against the window's region only
    /// (`check_rkey` calls `mr_check_range` on the MR); mlx5 against the window.
    pub range_is_the_region: bool,
}

/// Where a remote access arrives: the target QP's PD and number, and its device's rules.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RemoteAt {
    pub pd: u32,
    pub qpn: u32,
    pub rules: MwRules,
}

/// A BIND_MW work request as the device takes it (rxe's `rxe_send_wr.wr.mw`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct BindWqe {
    /// The window's rkey as the application's `ibv_mw` held it at post time.
    pub mw_rkey: u32,
    /// The new rkey (its low 8 bits are taken).
    pub rkey: u32,
    pub info: MwBindInfo,
}

/// Where data lands or comes from after the checks: an address and a length.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Span {
    pub addr: u64,
    pub len: usize,
}

impl MrTable {
    /// Every region as key, address and length, by key.
    pub(crate) fn regions(&self) -> Vec<u64> {
        let mut r: Vec<(u32, u64, u64)> = self
            .by_key
            .iter()
            .map(|(&k, e)| (k, e.addr, e.len))
            .collect();
        r.sort_unstable();
        r.into_iter()
            .flat_map(|(k, a, l)| [u64::from(k), a, l])
            .collect()
    }

    /// Every window's index, sorted.
    pub(crate) fn windows(&self) -> Vec<u64> {
        let mut w: Vec<u64> = self.mws.keys().map(|&k| u64::from(k)).collect();
        w.sort_unstable();
        w
    }

    /// The registered memory as (address, length) spans, by key.
    pub(crate) fn spans(&self) -> Vec<Span> {
        let mut r: Vec<(u32, Span)> = self
            .by_key
            .iter()
            .map(|(&k, e)| {
                (
                    k,
                    Span {
                        addr: e.addr,
                        len: e.len as usize,
                    },
                )
            })
            .collect();
        r.sort_unstable_by_key(|(k, _)| *k);
        r.into_iter().map(|(_, s)| s).collect()
    }

    /// Registered regions.
    pub(crate) fn len(&self) -> usize {
        self.by_key.len()
    }

    pub fn register(&mut self, e: MrEntry) -> u32 {
        // Keys look like mlx5's: an index in the upper bits and a varying low byte; the
        // indices of windows are left out.
        self.next_key = self.next_key.wrapping_add(0x101);
        while self.next_key == 0
            || self.next_key >> 8 >= MIN_MW_INDEX
            || self.by_key.contains_key(&self.next_key)
        {
            if self.next_key >> 8 >= MIN_MW_INDEX {
                self.next_key = 0;
            }
            self.next_key = self.next_key.wrapping_add(0x101);
        }
        self.by_key.insert(self.next_key, e);
        self.next_key
    }

    /// Removes a region. Windows still bound to it are unbound, so nothing reaches its
    /// memory any more (rxe refuses the deregistration instead and keeps the region; the
    /// simulator cannot keep memory its owner frees).
    pub fn deregister(&mut self, key: u32) {
        self.by_key.remove(&key);
        for mw in self.mws.values_mut() {
            if mw.mr == Some(key) {
                mw.mr = None;
                mw.len = 0;
            }
        }
    }

    /// Changes a registered region in place (`ibv_rereg_mr`): its key stays, windows bound
    /// to it are unbound (as by deregistration). False when `key` is not registered.
    pub fn reregister(&mut self, key: u32, e: MrEntry) -> bool {
        if !self.by_key.contains_key(&key) {
            return false;
        }
        self.deregister(key);
        self.by_key.insert(key, e);
        true
    }

    /// The region with lkey `key`, if registered.
    pub fn region(&self, key: u32) -> Option<&MrEntry> {
        self.by_key.get(&key)
    }

    /// Allocates a window (`rxe_alloc_mw`): index from the window range, a key byte, type
    /// 1 valid (unbound) and type 2 free.
    pub fn alloc_mw(&mut self, pd: u32, mw_type: MwType, handle: u32) -> u32 {
        self.next_mw = self.next_mw.max(MIN_MW_INDEX - 1) + 1;
        let index = self.next_mw;
        // rxe draws the key byte at random; a fixed function of the index keeps the
        // simulator deterministic.
        let rkey = (index << 8) | (index.wrapping_mul(0x9e) & 0xff);
        self.mws.insert(
            index,
            MwEntry {
                pd,
                mw_type,
                handle,
                rkey,
                user_rkey: rkey,
                state: if mw_type == MwType::Type1 {
                    MwState::Valid
                } else {
                    MwState::Free
                },
                mr: None,
                addr: 0,
                len: 0,
                access: AccessFlags::empty(),
                qpn: None,
            },
        );
        rkey
    }

    /// Deallocates a window (unbinding it).
    pub fn dealloc_mw(&mut self, index: u32) {
        self.mws.remove(&index);
    }

    /// The window with index `index`.
    pub fn mw(&self, index: u32) -> Option<&MwEntry> {
        self.mws.get(&index)
    }

    /// The window with index `index`, to change.
    pub fn mw_mut(&mut self, index: u32) -> Option<&mut MwEntry> {
        self.mws.get_mut(&index)
    }

    /// The window whose application handle is `handle`, with its index.
    pub fn mw_by_handle(&self, handle: u32) -> Option<(u32, &MwEntry)> {
        self.mws
            .iter()
            .find(|(_, m)| m.handle == handle)
            .map(|(&i, m)| (i, m))
    }

    /// Executes a BIND_MW request of QP `qpn` (in PD `qp_pd`) as rxe's `rxe_bind_mw`
    /// does; an error is the bind's completion status (MW_BIND_ERR).
    pub fn bind_mw(&mut self, qpn: u32, qp_pd: u32, b: &BindWqe) -> Result<(), WcStatus> {
        const ERR: WcStatus = WcStatus::MwBindErr;
        let index = b.mw_rkey >> 8;
        let mw = *self.mws.get(&index).ok_or(ERR)?;
        if mw.rkey != b.mw_rkey {
            return Err(ERR);
        }
        let info = &b.info;
        let mr = if info.length > 0 {
            Some(*self.by_key.get(&info.mr_lkey).ok_or(ERR)?)
        } else {
            None
        };
        let access = info.mw_access_flags;
        // RXE_ACCESS_SUPPORTED_MW: a region's rights and ZERO_BASED.
        let supported = AccessFlags::LOCAL_WRITE
            | AccessFlags::REMOTE_READ
            | AccessFlags::REMOTE_WRITE
            | AccessFlags::REMOTE_ATOMIC
            | AccessFlags::MW_BIND
            | AccessFlags::ZERO_BASED;
        if !supported.contains(access) {
            return Err(ERR);
        }
        match mw.mw_type {
            MwType::Type1 => {
                if mw.state != MwState::Valid || access.contains(AccessFlags::ZERO_BASED) {
                    return Err(ERR);
                }
            }
            MwType::Type2 => {
                if mw.state != MwState::Free || qp_pd != mw.pd || mr.is_none() {
                    return Err(ERR);
                }
            }
        }
        if let Some(mr) = mr {
            let writable =
                access.intersects(AccessFlags::REMOTE_WRITE | AccessFlags::REMOTE_ATOMIC);
            let inside = if access.contains(AccessFlags::ZERO_BASED) {
                info.length <= mr.len
            } else {
                info.addr >= mr.addr
                    && info
                        .addr
                        .checked_add(info.length)
                        .is_some_and(|end| end <= mr.addr + mr.len)
            };
            if mr.access.contains(AccessFlags::ZERO_BASED)
                || !mr.access.contains(AccessFlags::MW_BIND)
                || (writable && !mr.access.contains(AccessFlags::LOCAL_WRITE))
                || !inside
            {
                return Err(ERR);
            }
        }
        let e = self.mws.get_mut(&index).expect("looked up above");
        e.rkey = (e.rkey & !0xff) | (b.rkey & 0xff);
        e.access = access;
        e.state = MwState::Valid;
        e.addr = info.addr;
        e.len = info.length;
        e.mr = mr.map(|_| info.mr_lkey);
        if e.mw_type == MwType::Type2 {
            e.qpn = Some(qpn);
        }
        Ok(())
    }

    /// Invalidates `rkey` (LOCAL_INV, or SEND_WITH_INV at the responder) as rxe's
    /// `rxe_invalidate_mw` does: only a valid type 2 window's current rkey; a region's
    /// rkey is refused too (user regions cannot be invalidated, `rxe_invalidate_mr`).
    pub fn invalidate(&mut self, rkey: u32) -> Result<(), ()> {
        if rkey >> 8 < MIN_MW_INDEX {
            return Err(());
        }
        let e = self.mws.get_mut(&(rkey >> 8)).ok_or(())?;
        if e.rkey != rkey || e.mw_type == MwType::Type1 || e.state != MwState::Valid {
            return Err(());
        }
        e.state = MwState::Free;
        e.mr = None;
        e.qpn = None;
        e.addr = 0;
        e.len = 0;
        e.access = AccessFlags::empty();
        Ok(())
    }

    /// Checks a remote access arriving at QP `qpn` (PD `pd`): a region's rkey as
    /// [`MrTable::check_remote`], or a window's as rxe's `rxe_lookup_mw` (rkey, PD, the
    /// binding QP for type 2, bound, the right), then the range (see [`MwRules`]).
    pub fn check_remote_at(
        &self,
        at: RemoteAt,
        rkey: u32,
        va: u64,
        len: u64,
        need: AccessFlags,
    ) -> Option<Span> {
        let RemoteAt { pd, qpn, rules } = at;
        if len == 0 || rkey >> 8 < MIN_MW_INDEX {
            return self.check_remote(pd, rkey, va, len, need);
        }
        let mw = self.mws.get(&(rkey >> 8))?;
        let ok = mw.rkey == rkey
            && mw.pd == pd
            && (mw.mw_type == MwType::Type1 || mw.qpn == Some(qpn))
            && mw.len > 0
            && mw.access.contains(need)
            && mw.state == MwState::Valid;
        if !ok {
            return None;
        }
        let mr = self.by_key.get(&mw.mr?)?;
        let va = if mw.access.contains(AccessFlags::ZERO_BASED) {
            va.checked_add(mw.addr)?
        } else {
            va
        };
        let end = va.checked_add(len)?;
        let (lo, hi) = if rules.range_is_the_region {
            (mr.addr, mr.addr + mr.len)
        } else {
            (mw.addr, mw.addr + mw.len)
        };
        (va >= lo && end <= hi).then_some(Span {
            addr: va,
            len: len as usize,
        })
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

    /// Checks a remote access to a region (rkey, PD of the target QP, bounds, the access
    /// right); a window's rkey finds nothing here (see [`MrTable::check_remote_at`]).
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

    const RXE: MwRules = MwRules {
        range_is_the_region: true,
    };

    fn table() -> (MrTable, u32, u32) {
        let mut t = MrTable::default();
        let mr = t.register(MrEntry {
            pd: 1,
            addr: 0x10_000,
            len: 4096,
            access: AccessFlags::LOCAL_WRITE | AccessFlags::MW_BIND,
        });
        let rkey = t.alloc_mw(1, MwType::Type1, 9);
        (t, mr, rkey)
    }

    fn bind(t: &mut MrTable, mr: u32, mw_rkey: u32, len: u64) -> Result<u32, WcStatus> {
        let rkey = verbs_api::inc_rkey(mw_rkey);
        let b = BindWqe {
            mw_rkey,
            rkey,
            info: MwBindInfo {
                mr_lkey: mr,
                addr: 0x10_100,
                length: len,
                mw_access_flags: AccessFlags::REMOTE_READ,
            },
        };
        t.bind_mw(3, 1, &b).map(|()| rkey)
    }

    #[test]
    fn window_keys_are_apart_from_region_keys() {
        let (t, mr, rkey) = table();
        assert!(rkey >> 8 >= MIN_MW_INDEX && mr >> 8 < MIN_MW_INDEX);
        assert_eq!(t.mw_by_handle(9).map(|(i, _)| i), Some(rkey >> 8));
    }

    #[test]
    fn deregistering_the_region_unbinds_its_windows() {
        let (mut t, mr, rkey) = table();
        let rkey = bind(&mut t, mr, rkey, 64).expect("bind");
        let at = RemoteAt {
            pd: 1,
            qpn: 3,
            rules: RXE,
        };
        assert!(t
            .check_remote_at(at, rkey, 0x10_100, 8, AccessFlags::REMOTE_READ)
            .is_some());
        t.deregister(mr);
        assert!(t
            .check_remote_at(at, rkey, 0x10_100, 8, AccessFlags::REMOTE_READ)
            .is_none());
    }

    #[test]
    fn a_stale_window_rkey_fails_the_bind() {
        let (mut t, mr, rkey) = table();
        let new = bind(&mut t, mr, rkey, 64).expect("bind");
        assert_eq!(bind(&mut t, mr, rkey, 64), Err(WcStatus::MwBindErr));
        let current = bind(&mut t, mr, new, 0).expect("unbind with length 0");
        assert_eq!(t.mw(current >> 8).map(|m| m.rkey), Some(current));
        assert_eq!(t.invalidate(current), Err(()), "type 1 is not invalidated");
    }

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
