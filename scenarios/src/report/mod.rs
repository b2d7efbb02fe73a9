//! What the `scenario` tool shows: the per-receiver table, the SVG plot of heap
//! completeness, the demo (with its replay), the replay of recorded captures, and the
//! simulator run underneath them all (with a progress bar).

pub mod demo;
pub mod replay;
pub mod simrun;
pub mod svg;
pub mod table;
