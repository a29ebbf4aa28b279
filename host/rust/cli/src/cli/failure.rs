//! Why a command failed, as a sentence and an exit code.
//!
//! | exit | meaning |
//! |---|---|
//! | 0 | done |
//! | 1 | refused by the contract (the kebab-case code is printed), or a check failed |
//! | 2 | usage: bad arguments, an unknown store URL, an input file that does not parse |
//! | 3 | storage: the store (or the component) could not be used |
use std::process::ExitCode;

use gak::blocking::Kernel;
use gak::{Error, OpenError};

/// A command's failure.
#[derive(Debug)]
pub enum Failure {
    /// The command line or an input file cannot be used (exit 2).
    Usage(String),
    /// The kernel refused (exit 1); `subject` names what was refused.
    Refused { subject: String, error: Error },
    /// A check the command makes failed: conformance, the demo (exit 1).
    Failed(String),
    /// The store or the component failed (exit 3).
    Storage(String),
    /// Exit with this code; the command already printed why (conformance
    /// prints its failures and closing line itself).
    Quiet(u8),
}

/// The outcome of a command.
pub type Outcome = Result<(), Failure>;

impl Failure {
    /// The failure of a call on `kernel` about `subject` (`task t1`, `key
    /// refund/42`): storage failures stay storage failures, never a contract
    /// answer, and name the store (its description carries no credentials).
    pub fn on(kernel: &Kernel, subject: impl Into<String>) -> impl FnOnce(Error) -> Failure {
        let store = kernel.backend().describe();
        let subject = subject.into();
        move |error| match error {
            Error::Storage(m) => Failure::Storage(format!("the store {store} failed: {m}")),
            error => Failure::Refused { subject, error },
        }
    }

    /// The exit code documented in `gak --help`.
    pub fn exit_code(&self) -> u8 {
        match self {
            Failure::Refused { .. } | Failure::Failed(_) => 1,
            Failure::Usage(_) => 2,
            Failure::Storage(_) => 3,
            Failure::Quiet(code) => *code,
        }
    }

    /// The machine-readable code: the contract's kebab-case variant for a
    /// refusal, else `usage`, `failed` or `storage`.
    pub fn code(&self) -> &'static str {
        match self {
            Failure::Refused { error, .. } => error.name(),
            Failure::Usage(_) => "usage",
            Failure::Failed(_) | Failure::Quiet(_) => "failed",
            Failure::Storage(_) => "storage",
        }
    }

    /// One sentence for a person.
    pub fn message(&self) -> String {
        match self {
            Failure::Usage(m) | Failure::Failed(m) => m.clone(),
            Failure::Quiet(_) => String::new(),
            Failure::Storage(m) => format!("storage failure: {m}"),
            Failure::Refused { subject, error } => {
                format!(
                    "refused ({}): {subject} {}",
                    error.name(),
                    explain(subject, error)
                )
            }
        }
    }

    /// Print the failure to stderr (as JSON when `json`) and give the code.
    pub fn report(&self, json: bool) -> ExitCode {
        if let Failure::Quiet(code) = self {
            return ExitCode::from(*code);
        }
        if json {
            let value = serde_json::json!({
                "error": self.code(),
                "message": self.message(),
                "exit": self.exit_code(),
            });
            eprintln!("{value}");
        } else {
            eprintln!("gak: {}", self.message());
        }
        ExitCode::from(self.exit_code())
    }
}

impl From<OpenError> for Failure {
    fn from(e: OpenError) -> Self {
        // OpenError's Display names the store without credentials.
        match e {
            OpenError::UnknownStore(_) | OpenError::BadOption(_) => Failure::Usage(e.to_string()),
            _ => Failure::Storage(e.to_string()),
        }
    }
}

/// What a refusal means, completing "task t1 …" / "key k …" / "group g …".
fn explain(subject: &str, error: &Error) -> String {
    match error {
        // `get-group` knows only groups with a limit.
        Error::NotFound if subject.starts_with("group ") => "has no limit".into(),
        Error::NotFound => "does not exist".into(),
        Error::StaleSeq => "already has a snapshot at least as new".into(),
        Error::Terminal => "has reached a terminal state (done, dead, or out of attempts)".into(),
        Error::InvalidPlan(m) => format!("has steps that do not form a valid plan: {m}"),
        Error::FenceStale => "has been taken over by a newer fence".into(),
        Error::AlreadyCommitted => "already has a different outcome committed".into(),
        Error::NotHolder => "is not held by this holder, or its attempt is over".into(),
        Error::ResourceMismatch => "names another key or resource than its lease".into(),
        Error::LeaseExpired => "has a lease that expired or was released".into(),
        Error::ReconcileTaken => "is being reconciled under another claim (a live claim is someone else's, or the claim given is no longer the key's)".into(),
        Error::NotUncertain => "is not uncertain: there is nothing to reconcile".into(),
        Error::UnsafeNotRetryable => "is unsafe to retry: resolving it as not applied needs --force, and only when you know the effect did not happen".into(),
        Error::KeyReused => "was first used with a different fingerprint".into(),
        Error::WriteFailed => "had its downstream write fail; nothing was written".into(),
        Error::Taken => "is claimed by a live lease".into(),
        Error::DepsPending => "has a dependency that is not done".into(),
        Error::LeaseLost => "is not claimed under this token (the claim was released, completed by another token, or expired and was taken over)".into(),
        Error::NotDue => "is not due yet (its not-before is in the future)".into(),
        Error::GroupFull => "is in a group that has as many live claims as its limit".into(),
        Error::NotDead => "is not dead: only a dead task is revived".into(),
        Error::InvalidInput(m) => format!("was refused as invalid input: {m}"),
        Error::Storage(m) => format!("hit a storage failure: {m}"),
        // `Error` is non-exhaustive: a newer kernel's variant still gets its code.
        other => format!("was refused ({other})"),
    }
}
