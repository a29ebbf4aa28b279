use std::fmt;

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
    Storage(String),
}

impl Error {
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
            Error::InvalidPlan(m) | Error::InvalidInput(m) | Error::Storage(m) => {
                write!(f, "{}: {m}", self.name())
            }
            _ => f.write_str(self.name()),
        }
    }
}

impl std::error::Error for Error {}
