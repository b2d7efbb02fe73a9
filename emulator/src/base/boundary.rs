//! The panic boundary. Every function that C calls (the exported symbols, the ops tables'
//! entries, the handlers registered with the C library) runs its body through
//! [`boundary`]: a panic in it becomes the function's documented error return (and EIO in
//! errno where the function reports through errno), and never unwinds into C.
//!
//! The state a panicking body leaves stays usable: every lock is taken with
//! [`crate::base::sync::lock`], which goes on after a panic, and each critical section is
//! a plain update.

use std::ffi::c_int;
use std::panic::{catch_unwind, AssertUnwindSafe};

use crate::base::errno::set_errno;

/// What a function returns to C when its body panicked.
pub trait OnPanic<R> {
    /// The error return (setting errno first where the function reports through it).
    fn value(self) -> R;
}

/// For functions that return 0 or an errno value: returns EIO.
#[derive(Debug, Clone, Copy)]
pub struct ReturnsErrno;

impl OnPanic<c_int> for ReturnsErrno {
    fn value(self) -> c_int {
        libc::EIO
    }
}

/// For functions that return -1 and set errno: sets errno to EIO and returns -1.
#[derive(Debug, Clone, Copy)]
pub struct MinusOne;

impl OnPanic<c_int> for MinusOne {
    fn value(self) -> c_int {
        set_errno(libc::EIO);
        -1
    }
}

impl OnPanic<isize> for MinusOne {
    fn value(self) -> isize {
        set_errno(libc::EIO);
        -1
    }
}

/// For functions that return a pointer, NULL on failure with errno set: sets errno to
/// EIO and returns NULL.
#[derive(Debug, Clone, Copy)]
pub struct Null;

impl<T> OnPanic<*mut T> for Null {
    fn value(self) -> *mut T {
        set_errno(libc::EIO);
        std::ptr::null_mut()
    }
}

impl<T> OnPanic<*const T> for Null {
    fn value(self) -> *const T {
        set_errno(libc::EIO);
        std::ptr::null()
    }
}

/// For functions that return nothing: returns.
#[derive(Debug, Clone, Copy)]
pub struct Nothing;

impl OnPanic<()> for Nothing {
    fn value(self) {}
}

/// For functions whose error return is a value of their own (such as `-EIO` for the
/// ops that return a negative errno, or the "unknown" answer of a conversion).
#[derive(Debug, Clone, Copy)]
pub struct Value<R>(pub R);

impl<R> OnPanic<R> for Value<R> {
    fn value(self) -> R {
        self.0
    }
}

/// For functions whose error return is a value of their own that comes with errno: sets
/// errno to EIO and returns the value.
#[derive(Debug, Clone, Copy)]
pub struct WithErrno<R>(pub R);

impl<R> OnPanic<R> for WithErrno<R> {
    fn value(self) -> R {
        set_errno(libc::EIO);
        self.0
    }
}

/// Runs `body`; if it panics, returns `on_panic`'s error return instead (the panic's
/// message has been printed on stderr by the panic hook).
pub fn boundary<R>(on_panic: impl OnPanic<R>, body: impl FnOnce() -> R) -> R {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(r) => r,
        Err(_) => on_panic.value(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::errno::last_errno;

    /// Panics inside the boundary as an exported function's body would.
    extern "C" fn panicking_minus_one(really: c_int) -> c_int {
        boundary(MinusOne, move || {
            assert!(really == 0, "a bug");
            0
        })
    }

    extern "C" fn panicking_null() -> *mut u8 {
        boundary(Null, || panic!("a bug"))
    }

    #[test]
    fn a_panic_becomes_the_error_return_and_does_not_unwind() {
        set_errno(0);
        assert_eq!(panicking_minus_one(1), -1);
        assert_eq!(last_errno(), libc::EIO);
        set_errno(0);
        assert!(panicking_null().is_null());
        assert_eq!(last_errno(), libc::EIO);
        assert_eq!(
            boundary(ReturnsErrno, || -> c_int { panic!("a bug") }),
            libc::EIO
        );
        assert_eq!(
            boundary(Value(-libc::EIO), || -> c_int { panic!("a bug") }),
            -libc::EIO
        );
        boundary(Nothing, || panic!("a bug"));
    }

    #[test]
    fn without_a_panic_the_body_answers() {
        set_errno(0);
        assert_eq!(panicking_minus_one(0), 0);
        assert_eq!(last_errno(), 0);
        assert_eq!(boundary(Null, || 8 as *mut u8), 8 as *mut u8);
    }
}
