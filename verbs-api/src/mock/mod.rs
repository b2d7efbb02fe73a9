//! mockall mocks of every trait (feature `mock`), for interaction tests: "after polling a
//! receive completion, the code reposts that slot", "the code arms the CQ before waiting".
//!
//! [`FakeMr`] stands in for a memory region: it owns real memory (the pool layer reads
//! slots through it) and hands out keys the test chooses.

pub(crate) mod fake_mr;

pub use crate::traits::{
    MockAddressHandle, MockCompletionChannel, MockCompletionQueue, MockContext, MockFlow,
    MockMemoryWindow, MockProtectionDomain, MockQueuePair, MockSharedReceiveQueue, MockVerbs,
};
pub use fake_mr::FakeMr;
