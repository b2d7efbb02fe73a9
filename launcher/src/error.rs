//! The launcher's errors: each is one line naming the problem (and, where one exists, the
//! command that fixes it).

/// Why `verbs-emu` could not run the command.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The command line is wrong (exit status 2).
    #[error("{0}")]
    Usage(String),
    /// The fabric, the namespaces or the files could not be set up (exit status 125).
    #[error("{0}")]
    Setup(String),
}

impl Error {
    /// The exit status `verbs-emu` ends with.
    pub fn exit_code(&self) -> u8 {
        match self {
            Error::Usage(_) => 2,
            Error::Setup(_) => 125,
        }
    }
}

/// Shorthand for a setup error.
pub fn setup(msg: impl Into<String>) -> Error {
    Error::Setup(msg.into())
}
