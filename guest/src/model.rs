//! The contract's records (WIT types), shared by the component and the host.
use std::fmt;

use serde::{Deserialize, Serialize};

/// A step of a run and the steps it depends on.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct StepDef {
    /// Step id.
    pub id: String,
    /// Ids of the steps that must finish first.
    #[serde(default)]
    pub depends_on: Vec<String>,
}

impl StepDef {
    /// A step with its dependencies.
    pub fn new(id: &str, depends_on: &[&str]) -> Self {
        StepDef {
            id: id.to_owned(),
            depends_on: depends_on.iter().map(|d| (*d).to_owned()).collect(),
        }
    }
}

/// A run's progress snapshot.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct Snapshot {
    /// The run.
    pub run_id: String,
    /// Strictly increasing per run.
    pub seq: u64,
    /// The writer's takeover generation; absent counts as 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fence: Option<u64>,
    /// Free-form status, non-empty.
    pub status: String,
    /// Finished steps.
    #[serde(default)]
    pub done: Vec<String>,
    /// A map given as pairs sorted by key.
    #[serde(default)]
    pub fields: Vec<(String, String)>,
}

/// What to do on resume.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct Plan {
    /// Trusted finished steps, declaration order.
    pub skip: Vec<String>,
    /// Steps to run, in order.
    pub run: Vec<String>,
    /// Done records that could not be trusted.
    pub untrusted: Vec<String>,
}

/// A terminal status.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Status {
    /// It worked.
    Succeeded,
    /// It did not.
    Failed,
}

/// A committed terminal outcome.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Outcome {
    /// Succeeded or failed.
    pub status: Status,
    /// Opaque result bytes.
    pub result: Vec<u8>,
}

/// Whether running an effect twice is harmless.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RetrySafety {
    /// Harmless to retry.
    Safe,
    /// Must not be retried without a forced resolution.
    Unsafe,
}

/// One logical side effect.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct Action {
    /// The idempotency key.
    pub key: String,
    /// The resource it fences on.
    pub resource: String,
    /// Retry safety.
    pub retry_safety: RetrySafety,
    /// Digest of the action's parameters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fingerprint: Option<String>,
}

impl Action {
    /// A safe action without fingerprint.
    pub fn new(key: &str, resource: &str) -> Self {
        Action {
            key: key.to_owned(),
            resource: resource.to_owned(),
            retry_safety: RetrySafety::Safe,
            fingerprint: None,
        }
    }

    /// The same action marked unsafe to retry.
    pub fn unsafe_to_retry(mut self) -> Self {
        self.retry_safety = RetrySafety::Unsafe;
        self
    }

    /// The same action with a fingerprint.
    pub fn with_fingerprint(mut self, fingerprint: &str) -> Self {
        self.fingerprint = Some(fingerprint.to_owned());
        self
    }
}

/// The right to apply an action once. `Debug` redacts the holder.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lease {
    /// The action's key.
    pub key: String,
    /// The action's resource.
    pub resource: String,
    /// The resource's fencing token.
    pub fence: u64,
    /// Minted at grant.
    pub holder: String,
    /// Informative deadline; the stored one counts.
    pub until: u64,
}

/// The outcome of `acquire`. New outcomes may be added in later versions:
/// match with a wildcard arm that treats an unknown outcome as "do not run
/// the body".
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Acquired {
    /// A fresh lease: run the effect.
    Granted(Lease),
    /// Completed before: the first result.
    Replayed(Vec<u8>),
    /// Might have been applied: reconcile first. The reason.
    Uncertain(String),
    /// Another attempt is live.
    InFlight,
    /// Another key holds the resource until this time.
    Contended(u64),
}

/// A reconciler's verdict.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct Resolution {
    /// Did the effect happen?
    pub applied: bool,
    /// Its result, when applied.
    #[serde(default)]
    pub result: Option<Vec<u8>>,
    /// Allow an unsafe key to be retried.
    #[serde(default)]
    pub force_retryable: bool,
    /// The reconcile claim the verdict is given under: when present it must
    /// be the key's current claim, else `reconcile-taken`.
    #[serde(default)]
    pub claim: Option<String>,
}

/// The outcome of `resolve-uncertain`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Resolved {
    /// Completed with this first result.
    Replayed(Vec<u8>),
    /// Cleared: may be granted again.
    Cleared,
}

/// The right to reconcile one uncertain key. `Debug` redacts the claim.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReconcileClaim {
    /// 128-bit hex.
    pub claim: String,
    /// Expiry.
    pub until: u64,
}

/// One page of tasks.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TaskPage {
    /// The tasks, ordered by id, without tokens.
    pub items: Vec<Task>,
    /// The cursor of the next page (the last item's id), when more follow.
    pub next: Option<String>,
}

/// Where a side-effect key stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum KeyState {
    /// No attempt in flight; may be granted.
    Cleared,
    /// An attempt holds a live intent.
    InFlight,
    /// Marked uncertain, or its intent expired without a verdict.
    Uncertain,
    /// Applied, with its first result recorded.
    Completed,
}

impl KeyState {
    /// The spec's kebab-case name.
    pub fn name(self) -> &'static str {
        match self {
            KeyState::Cleared => "cleared",
            KeyState::InFlight => "in-flight",
            KeyState::Uncertain => "uncertain",
            KeyState::Completed => "completed",
        }
    }
}

/// A key as an operator sees it: never its holder or reconcile claim.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct KeyInfo {
    /// The idempotency key.
    pub key: String,
    /// Where it stands.
    pub state: KeyState,
    /// Recorded at the first grant.
    pub retry_safety: RetrySafety,
    /// Recorded at the first grant.
    pub fingerprint: Option<String>,
    /// The resource of the latest attempt.
    pub resource: String,
    /// The intent's deadline (in-flight, uncertain by expiry).
    pub until: Option<u64>,
    /// Why it is uncertain.
    pub reason: Option<String>,
    /// When the first result was recorded.
    pub completed_at: Option<u64>,
    /// Until when a reconciler holds a live claim.
    pub reconciling_until: Option<u64>,
}

/// One page of keys.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KeyPage {
    /// The keys, ordered by key.
    pub items: Vec<KeyInfo>,
    /// The cursor of the next page (the last item's key), when more follow.
    pub next: Option<String>,
}

/// What one `prune` removed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct Pruned {
    /// Completed side-effect keys.
    pub removed_keys: u32,
    /// Done tasks.
    pub removed_tasks: u32,
    /// Runs (snapshot and outcomes).
    pub removed_runs: u32,
    /// Removable records older than `before` remain.
    pub more: bool,
}

/// A task's state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TaskState {
    /// Claimable.
    Open,
    /// Held by a lease.
    Claimed,
    /// Terminal.
    Done,
    /// Failed; claimable again.
    Failed,
}

impl TaskState {
    /// The spec's kebab-case name.
    pub fn name(self) -> &'static str {
        match self {
            TaskState::Open => "open",
            TaskState::Claimed => "claimed",
            TaskState::Done => "done",
            TaskState::Failed => "failed",
        }
    }
}

/// A task as the board shows it. `Debug` redacts the token.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Task {
    /// Id.
    pub id: String,
    /// Title.
    pub title: String,
    /// Dependencies.
    pub deps: Vec<String>,
    /// State.
    pub state: TaskState,
    /// The agent that claimed (or completed) it.
    pub owner: Option<String>,
    /// The claim token: only `claim` / `renew` return it.
    pub token: Option<String>,
    /// Lease deadline.
    pub until: Option<u64>,
    /// Takeover generation.
    pub fence: u64,
}

/// A task to load.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskSeed {
    /// Id.
    pub id: String,
    /// Title, empty when absent.
    #[serde(default)]
    pub title: Option<String>,
    /// Dependencies.
    #[serde(default)]
    pub deps: Vec<String>,
    /// Open when absent.
    #[serde(default)]
    pub state: Option<TaskState>,
}

impl TaskSeed {
    /// An open task without dependencies.
    pub fn new(id: &str) -> Self {
        TaskSeed {
            id: id.to_owned(),
            title: None,
            deps: Vec::new(),
            state: None,
        }
    }

    /// The same seed with dependencies.
    pub fn deps(mut self, deps: &[&str]) -> Self {
        self.deps = deps.iter().map(|d| (*d).to_owned()).collect();
        self
    }

    /// The same seed with a title.
    pub fn title(mut self, title: &str) -> Self {
        self.title = Some(title.to_owned());
        self
    }
}

/// Tokens, holders and claims are capabilities: whoever reads one can act as
/// its owner. `Debug` (what ends up in logs) shows only that one is present.
fn redacted(secret: &Option<String>) -> &'static str {
    if secret.is_some() {
        "Some(<redacted>)"
    } else {
        "None"
    }
}

impl fmt::Debug for Lease {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Lease")
            .field("key", &self.key)
            .field("resource", &self.resource)
            .field("fence", &self.fence)
            .field("holder", &"<redacted>")
            .field("until", &self.until)
            .finish()
    }
}

impl fmt::Debug for ReconcileClaim {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReconcileClaim")
            .field("claim", &"<redacted>")
            .field("until", &self.until)
            .finish()
    }
}

impl fmt::Debug for Task {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Task")
            .field("id", &self.id)
            .field("title", &self.title)
            .field("deps", &self.deps)
            .field("state", &self.state)
            .field("owner", &self.owner)
            .field("token", &format_args!("{}", redacted(&self.token)))
            .field("until", &self.until)
            .field("fence", &self.fence)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_never_shows_capabilities() {
        let lease = Lease {
            key: "k".into(),
            resource: "r".into(),
            fence: 1,
            holder: "deadbeefdeadbeefdeadbeefdeadbeef".into(),
            until: 5,
        };
        let task = Task {
            id: "t".into(),
            title: String::new(),
            deps: vec![],
            state: TaskState::Claimed,
            owner: Some("w".into()),
            token: Some("cafebabecafebabecafebabecafebabe".into()),
            until: Some(5),
            fence: 1,
        };
        let claim = ReconcileClaim {
            claim: "0123456789abcdef0123456789abcdef".into(),
            until: 5,
        };
        let logged = format!("{lease:?} {task:?} {claim:?}");
        for secret in [&lease.holder, task.token.as_ref().unwrap(), &claim.claim] {
            assert!(!logged.contains(secret.as_str()), "{logged}");
        }
        assert!(logged.contains("<redacted>"));
    }
}
