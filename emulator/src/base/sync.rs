//! Locking that goes on after a panic elsewhere.

use std::sync::{Mutex, MutexGuard, PoisonError};

/// Locks a mutex, going on after a panic elsewhere (the data stays consistent: every
/// critical section here is a plain update).
pub fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}
