use std::fmt;
use std::sync::Arc;

/// Every refusal of the contract, one variant each (WIT `types.error`).
///
/// Callers match on the variant, never on the text. A refusal leaves the
/// store unchanged: the host rolls the transaction back.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Error {
    /// The run, outcome, task or key does not exist.
    NotFound,
    /// The snapshot's seq is not strictly newer than the persisted one.
    StaleSeq,
    /// The run or task has reached its terminal state.
    Terminal,
    /// The step DAG is invalid; names the first culprit.
    InvalidPlan(String),
    /// A fence is older than the newest one.
    FenceStale,
    /// A different outcome was already committed.
    AlreadyCommitted,
    /// Not the holder minted at grant, or the attempt is over.
    NotHolder,
    /// The lease's key or resource differ from the action's.
    ResourceMismatch,
    /// Renew of a hold that expired or was released.
    LeaseExpired,
    /// Another reconciler holds a live claim.
    ReconcileTaken,
    /// The key is not uncertain.
    NotUncertain,
    /// An unsafe key resolved "not applied" without force.
    UnsafeNotRetryable,
    /// The key was first used with a different fingerprint.
    KeyReused,
    /// A fenced sink's body failed.
    WriteFailed,
    /// The task is claimed by a live lease.
    Taken,
    /// A dependency of the task is not done.
    DepsPending,
    /// The token is not the task's current one.
    LeaseLost,
    /// An argument no caller should send.
    InvalidInput(String),
    /// The store failed; never a contract outcome.
    Storage(StorageError),
}

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

    /// The spec's kebab-case name of the variant.
    pub fn name(&self) -> &'static str {
        match self {
            Error::NotFound => "not-found",
            Error::StaleSeq => "stale-seq",
            Error::Terminal => "terminal",
            Error::InvalidPlan(_) => "invalid-plan",
            Error::FenceStale => "fence-stale",
            Error::AlreadyCommitted => "already-committed",
            Error::NotHolder => "not-holder",
            Error::ResourceMismatch => "resource-mismatch",
            Error::LeaseExpired => "lease-expired",
            Error::ReconcileTaken => "reconcile-taken",
            Error::NotUncertain => "not-uncertain",
            Error::UnsafeNotRetryable => "unsafe-not-retryable",
            Error::KeyReused => "key-reused",
            Error::WriteFailed => "write-failed",
            Error::Taken => "taken",
            Error::DepsPending => "deps-pending",
            Error::LeaseLost => "lease-lost",
            Error::InvalidInput(_) => "invalid-input",
            Error::Storage(_) => "storage",
        }
    }

    /// Every variant name, for parsers of vector files.
    pub const NAMES: [&'static str; 19] = [
        "not-found",
        "stale-seq",
        "terminal",
        "invalid-plan",
        "fence-stale",
        "already-committed",
        "not-holder",
        "resource-mismatch",
        "lease-expired",
        "reconcile-taken",
        "not-uncertain",
        "unsafe-not-retryable",
        "key-reused",
        "write-failed",
        "taken",
        "deps-pending",
        "lease-lost",
        "invalid-input",
        "storage",
    ];
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::InvalidPlan(m) | Error::InvalidInput(m) => write!(f, "{}: {m}", self.name()),
            Error::Storage(s) => write!(f, "storage: {s}"),
            _ => f.write_str(self.name()),
        }
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
