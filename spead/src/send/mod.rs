//! The sending side: heaps, the packetizer, rate limiting and interleaving (sans-IO).

mod heap;
mod packetizer;
mod rate;
mod stream;

pub use heap::{Heap, Item, ItemValue};
pub use packetizer::{heap_to_bytes, Cursor, Packetizer, Part, SendError, PREFIX_SIZE};
pub use rate::{Clock, RateLimiter, WallClock, DEFAULT_BURST_RATE_RATIO, DEFAULT_BURST_SIZE};
pub use stream::{CntSequence, GroupMode, HeapGroup, HeapReference};
