//! errno, the one way this library sets and reads it: what a failed call leaves for the
//! program ([`set_errno`]), what a failed call of our own left ([`last_errno`]), and the
//! errno of a simulator error ([`errno_of`]).

use std::ffi::c_int;

use verbs_api::{Error, ErrorKind};

/// Sets the calling thread's errno.
pub fn set_errno(e: c_int) {
    // SAFETY: __errno_location returns the calling thread's errno slot, always valid.
    unsafe { *libc::__errno_location() = e };
}

/// The calling thread's errno (what a failed verb of this library left); EIO if none.
pub fn last_errno() -> c_int {
    std::io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EIO)
}

/// The errno a libibverbs call fails with for `e`: the backend's own when it has one,
/// else the usual one for its kind.
pub fn errno_of(e: &Error) -> c_int {
    e.errno().unwrap_or(match e.kind() {
        ErrorKind::InvalidArgument | ErrorKind::InvalidState | ErrorKind::LimitExceeded => {
            libc::EINVAL
        }
        ErrorKind::QueueFull | ErrorKind::OutOfResources => libc::ENOMEM,
        ErrorKind::Unsupported => libc::EOPNOTSUPP,
        ErrorKind::NoDevice => libc::ENODEV,
        ErrorKind::PermissionDenied => libc::EPERM,
        ErrorKind::NotFound => libc::ENOENT,
        ErrorKind::Busy => libc::EBUSY,
        _ => libc::EIO,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errnos_follow_the_kind() {
        assert_eq!(
            errno_of(&Error::new(ErrorKind::Unsupported, "x", "y")),
            libc::EOPNOTSUPP
        );
        assert_eq!(
            errno_of(&Error::new(ErrorKind::QueueFull, "x", "y").with_errno(libc::ENOMEM)),
            libc::ENOMEM
        );
        assert_eq!(
            errno_of(&Error::new(ErrorKind::InvalidState, "x", "y")),
            libc::EINVAL
        );
    }
}
