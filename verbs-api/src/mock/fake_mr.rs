//! [`FakeMr`]: a memory region over owned memory, with keys the test chooses.

use std::cell::UnsafeCell;

use crate::{AccessFlags, MemoryRegion, MrKeys};

/// A memory region backed by owned, zeroed memory, with chosen keys.
#[derive(Debug)]
pub struct FakeMr {
    mem: Box<[UnsafeCell<u8>]>,
    keys: MrKeys,
}

impl FakeMr {
    /// `len` zeroed bytes with keys `lkey` and `rkey`.
    pub fn new(len: usize, lkey: u32, rkey: u32, access: AccessFlags) -> Self {
        FakeMr {
            mem: (0..len).map(|_| UnsafeCell::new(0)).collect(),
            keys: MrKeys { lkey, rkey, access },
        }
    }
}

// SAFETY: the memory is owned by the box and lives as long as the FakeMr; nothing but
// callers through `as_ptr` (as a device would) ever writes it.
unsafe impl MemoryRegion for FakeMr {
    fn as_ptr(&self) -> *mut u8 {
        UnsafeCell::raw_get(self.mem.as_ptr())
    }
    fn len(&self) -> usize {
        self.mem.len()
    }
    fn keys(&self) -> MrKeys {
        self.keys
    }
}
