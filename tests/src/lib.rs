//! # workspace-tests
//!
//! Cross-crate integration tests live in `tests/tests/`; shared helpers for them live here.
//! Test data (pcaps made from real spead2 traffic) lives in `tests/data/`.

pub mod spead2;

pub mod conformance;
pub mod pool_model;
pub mod rc_frames;
pub mod soak;
pub mod spead_verbs;

/// A file of `tests/data` (recordings of real spead2 traffic).
pub fn data(name: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("data")
        .join(name)
}
