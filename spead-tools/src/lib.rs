//! What `spead-recv`, `spead-send` and `spead-capture` share: command-line handling
//! (one-line errors, exit statuses, value parsers) in [`cli`], the verbs backends
//! (`--backend hw|sim`) and the verbs receivers of a set of endpoints (`--ibv-mode
//! raw|ud`) in [`ibv`], the datagrams of a capture in [`capture`], and the simulated
//! fabric into which `--replay PATH` injects them in [`sim`] (feature `sim`).

pub mod capture;
pub mod cli;
pub mod ibv;
#[cfg(feature = "sim")]
pub mod sim;
