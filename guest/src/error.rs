//! What the contract's error (generated into `contract.rs`) carries and
//! says beyond the WIT: the storage failure's cause, and which errors are
//! worth another try.
use std::fmt;
use std::sync::Arc;

use crate::Error;

/// Why the store failed: a message for humans, whether it was a conflict
/// that persisted through every re-run, and the underlying error.
///
/// Every kernel call is safe to retry after a storage failure: each
/// decision re-reads the store, and a call whose commit may have landed is
/// judged by the contract's rules the next time (a claim's unknown token
/// expires; an acquire's intent turns `uncertain`).
#[derive(Clone)]
pub struct StorageError {
    message: String,
    conflict: bool,
    source: Option<Arc<dyn std::error::Error + Send + Sync>>,
}

impl StorageError {
    /// A failure described by `message`.
    pub fn new(message: impl Into<String>) -> Self {
        StorageError {
            message: message.into(),
            conflict: false,
            source: None,
        }
    }

    /// The same failure, marked as a store conflict that persisted.
    pub fn conflict(mut self) -> Self {
        self.conflict = true;
        self
    }

    /// The same failure, keeping what caused it.
    pub fn caused_by(mut self, source: impl std::error::Error + Send + Sync + 'static) -> Self {
        self.source = Some(Arc::new(source));
        self
    }

    /// The message.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// Was it a serialization conflict or busy database?
    pub fn is_conflict(&self) -> bool {
        self.conflict
    }
}

impl PartialEq for StorageError {
    fn eq(&self, other: &Self) -> bool {
        self.message == other.message && self.conflict == other.conflict
    }
}

impl Eq for StorageError {}

impl fmt::Debug for StorageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.message, f)
    }
}

impl fmt::Display for StorageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for StorageError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source
            .as_deref()
            .map(|e| e as &(dyn std::error::Error + 'static))
    }
}

impl Error {
    /// A storage failure with this message.
    pub fn storage(message: impl Into<String>) -> Error {
        Error::Storage(StorageError::new(message))
    }

    /// A store conflict (busy database, serialization failure, deadlock)
    /// that persisted through every re-run of the call.
    pub fn is_conflict(&self) -> bool {
        matches!(self, Error::Storage(s) if s.is_conflict())
    }

    /// A storage failure: the call may succeed if made again, and making it
    /// again is always safe (see [`StorageError`]). Contract refusals are
    /// answers, not failures, and are not retryable as such.
    pub fn is_retryable(&self) -> bool {
        matches!(self, Error::Storage(_))
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Storage(s) => Some(s),
            _ => None,
        }
    }
}
