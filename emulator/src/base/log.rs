//! What the emulator says on stderr once per process.

use std::collections::HashSet;
use std::sync::Mutex;

use crate::base::sync::lock;

static LOGGED: Mutex<Option<HashSet<&'static str>>> = Mutex::new(None);

/// Prints `verbs-emu: VERB is not emulated (WHAT)` the first time `verb` is refused.
pub fn log_unsupported_once(verb: &'static str, what: &str) {
    let mut g = lock(&LOGGED);
    if g.get_or_insert_with(HashSet::new).insert(verb) {
        eprintln!("verbs-emu: {verb} is not emulated ({what})");
    }
}
