//! Errors of verbs calls.
//!
//! A work-completion status is data ([`crate::WcStatus`]), never an `Err`. An `Err` means a
//! *call* failed: a bad argument, a wrong QP state, a full queue, a missing device. Generic
//! code branches on [`ErrorKind`]; the backend's detail (the operation, errno, the index of
//! the rejected work request) is kept for the message.

use std::fmt;

/// What went wrong, in terms generic code can act on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// An argument is out of range or inconsistent (EINVAL), including a missing or
    /// unexpected attribute in a QP modify.
    InvalidArgument,
    /// The object is in a state that does not allow the call (a QP transition not in the
    /// state table, posting to a QP in RESET, a slot token that is not posted).
    InvalidState,
    /// A work queue or completion queue has no room (ENOMEM from a post).
    QueueFull,
    /// The device or backend does not offer this (EOPNOTSUPP), e.g. RAW_PACKET on rxe.
    Unsupported,
    /// There is no such device, or no RDMA support in the kernel (ENODEV, ENOSYS).
    NoDevice,
    /// The caller lacks a permission (EPERM, EACCES), e.g. CAP_NET_RAW for RAW_PACKET QPs.
    PermissionDenied,
    /// The system or device ran out of memory or objects (ENOMEM outside a post).
    OutOfResources,
    /// A request exceeds a limit the device reports (max_mr_size, max_qp_wr, max_cqe...).
    LimitExceeded,
    /// A named object was not found (a multicast group not attached, a GID index).
    NotFound,
    /// The object is still in use (EBUSY), e.g. a CQ that a QP still refers to.
    Busy,
    /// Any other operating-system error.
    Io,
}

impl ErrorKind {
    /// Maps a Linux errno to the kind a verbs call failing with it means.
    pub fn from_errno(errno: i32) -> Self {
        match errno {
            1 | 13 => Self::PermissionDenied, // EPERM, EACCES
            2 => Self::NotFound,              // ENOENT
            12 => Self::OutOfResources,       // ENOMEM
            16 => Self::Busy,                 // EBUSY
            19 | 38 => Self::NoDevice,        // ENODEV, ENOSYS
            22 | 34 => Self::InvalidArgument, // EINVAL, ERANGE
            95 => Self::Unsupported,          // EOPNOTSUPP
            _ => Self::Io,
        }
    }

    /// A short lower-case name for messages.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::InvalidArgument => "invalid argument",
            Self::InvalidState => "invalid state",
            Self::QueueFull => "queue full",
            Self::Unsupported => "unsupported",
            Self::NoDevice => "no device",
            Self::PermissionDenied => "permission denied",
            Self::OutOfResources => "out of resources",
            Self::LimitExceeded => "exceeds device limit",
            Self::NotFound => "not found",
            Self::Busy => "busy",
            Self::Io => "I/O error",
        }
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The error of a verbs call: a kind, the operation, a message, and the backend's detail.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    kind: ErrorKind,
    op: &'static str,
    message: String,
    errno: Option<i32>,
    bad_wr: Option<usize>,
}

impl Error {
    /// A new error of `kind` from operation `op` (a libibverbs name such as `ibv_modify_qp`).
    pub fn new(kind: ErrorKind, op: &'static str, message: impl Into<String>) -> Self {
        Self {
            kind,
            op,
            message: message.into(),
            errno: None,
            bad_wr: None,
        }
    }

    /// An error from an errno returned by the backend; the kind follows from the errno.
    pub fn from_errno(op: &'static str, errno: i32, message: impl Into<String>) -> Self {
        Self::new(ErrorKind::from_errno(errno), op, message).with_errno(errno)
    }

    /// Attaches the backend's errno.
    #[must_use]
    pub fn with_errno(mut self, errno: i32) -> Self {
        self.errno = Some(errno);
        self
    }

    /// Attaches the index of the work request a post rejected (libibverbs' `bad_wr`): the
    /// requests before it were posted, it and the ones after were not.
    #[must_use]
    pub fn with_bad_wr(mut self, index: usize) -> Self {
        self.bad_wr = Some(index);
        self
    }

    /// What went wrong.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The operation that failed.
    pub fn op(&self) -> &'static str {
        self.op
    }

    /// The human-readable detail.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The backend's errno, when there was one.
    pub fn errno(&self) -> Option<i32> {
        self.errno
    }

    /// For a failed post: the index of the first work request that was not posted.
    pub fn bad_wr(&self) -> Option<usize> {
        self.bad_wr
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {} ({}", self.op, self.message, self.kind)?;
        if let Some(e) = self.errno {
            write!(f, ", errno {e}")?;
        }
        if let Some(i) = self.bad_wr {
            write!(f, ", work request {i}")?;
        }
        f.write_str(")")
    }
}

impl std::error::Error for Error {}

/// The result of a verbs call.
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errno_maps_to_kind_and_shows_in_message() {
        let e = Error::from_errno("ibv_open_device", 38, "kernel has no RDMA support");
        assert_eq!(e.kind(), ErrorKind::NoDevice);
        assert_eq!(e.errno(), Some(38));
        assert_eq!(
            e.to_string(),
            "ibv_open_device: kernel has no RDMA support (no device, errno 38)"
        );
        assert_eq!(ErrorKind::from_errno(95), ErrorKind::Unsupported);
        assert_eq!(ErrorKind::from_errno(1), ErrorKind::PermissionDenied);
        assert_eq!(ErrorKind::from_errno(9999), ErrorKind::Io);
    }

    #[test]
    fn bad_wr_is_kept() {
        let e = Error::new(ErrorKind::QueueFull, "ibv_post_send", "send queue full").with_bad_wr(3);
        assert_eq!(e.bad_wr(), Some(3));
        assert!(e.to_string().contains("work request 3"));
    }
}
