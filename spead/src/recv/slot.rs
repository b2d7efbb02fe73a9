//! The rings of live heaps a stream keeps, one per substream.

use super::sink::LiveHeap;

/// A slot of a substream's ring: a live heap, or none. The heap's memory stays in
/// the slot between heaps (its pointer and range lists keep their capacity), so a
/// heap begins and ends where it lies instead of being built and moved in and out.
#[derive(Debug)]
pub(super) struct Slot<S> {
    pub(super) heap: LiveHeap<S>,
    pub(super) live: bool,
}

impl<S: Default> Slot<S> {
    pub(super) fn new() -> Self {
        Self {
            heap: LiveHeap {
                cnt: 0,
                flavour: crate::wire::Flavour::default(),
                heap_length: None,
                received: 0,
                min_length: 0,
                pointers: Vec::new(),
                ranges: Vec::new(),
                end_of_stream: false,
                storage: S::default(),
            },
            live: false,
        }
    }

    pub(super) fn is_some(&self) -> bool {
        self.live
    }

    pub(super) fn as_ref(&self) -> Option<&LiveHeap<S>> {
        self.live.then_some(&self.heap)
    }

    pub(super) fn as_mut(&mut self) -> Option<&mut LiveHeap<S>> {
        self.live.then_some(&mut self.heap)
    }

    /// A new heap in this (empty) slot.
    pub(super) fn begin(&mut self, cnt: u64, flavour: crate::wire::Flavour, storage: S) {
        let h = &mut self.heap;
        h.cnt = cnt;
        h.flavour = flavour;
        h.heap_length = None;
        h.received = 0;
        h.min_length = 0;
        h.end_of_stream = false;
        h.storage = storage;
        self.live = true;
    }

    /// Empties the slot: its heap's storage goes (back to its pool, or its chunk), its
    /// lists are emptied for the next heap.
    pub(super) fn clear(&mut self) {
        self.live = false;
        self.heap.storage = S::default();
        self.heap.pointers.clear();
        self.heap.ranges.clear();
    }
}

#[derive(Debug)]
pub(super) struct Substream<S> {
    pub(super) slots: Vec<Slot<S>>,
    pub(super) head: usize,
}
