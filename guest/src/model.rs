//! Builders of the contract's records (their types are generated from the
//! WIT into `contract.rs`).
use crate::{Action, Completion, RetrySafety, StepDef, TaskSeed};

impl StepDef {
    /// A step with its dependencies.
    pub fn new(id: &str, depends_on: &[&str]) -> Self {
        StepDef {
            id: id.to_owned(),
            depends_on: depends_on.iter().map(|d| (*d).to_owned()).collect(),
        }
    }
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

impl TaskSeed {
    /// An open task without dependencies.
    pub fn new(id: &str) -> Self {
        TaskSeed {
            id: id.to_owned(),
            title: None,
            deps: Vec::new(),
            state: None,
            priority: None,
            not_before: None,
            max_attempts: None,
            group: None,
        }
    }

    /// The same seed with a priority (higher is claimed first).
    pub fn priority(mut self, priority: i32) -> Self {
        self.priority = Some(priority);
        self
    }

    /// The same seed, not ready before `at` (ms since the epoch).
    pub fn not_before(mut self, at: u64) -> Self {
        self.not_before = Some(at);
        self
    }

    /// The same seed with at most `max` attempts.
    pub fn max_attempts(mut self, max: u32) -> Self {
        self.max_attempts = Some(max);
        self
    }

    /// The same seed in `group`.
    pub fn group(mut self, group: &str) -> Self {
        self.group = Some(group.to_owned());
        self
    }

    /// The same seed with dependencies.
    pub fn deps(mut self, deps: &[&str]) -> Self {
        self.deps = deps.iter().map(|d| (*d).to_owned()).collect();
        self
    }

    /// The same seed in `state` (open, failed or done).
    pub fn state(mut self, state: crate::TaskState) -> Self {
        self.state = Some(state);
        self
    }

    /// The same seed with a title.
    pub fn title(mut self, title: &str) -> Self {
        self.title = Some(title.to_owned());
        self
    }
}

impl Completion {
    /// The item completing `id` with `token`.
    pub fn new(id: &str, token: &str) -> Self {
        Completion {
            id: id.to_owned(),
            token: token.to_owned(),
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::{Lease, ReconcileClaim, Task, TaskState};

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
            priority: 0,
            not_before: None,
            max_attempts: None,
            group: None,
            attempts: 1,
            last_error: None,
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
        // Everything else shows as a derived `Debug` would show it.
        assert_eq!(
            logged,
            "Lease { key: \"k\", resource: \"r\", fence: 1, holder: \"<redacted>\", until: 5 } \
             Task { id: \"t\", title: \"\", deps: [], state: Claimed, owner: Some(\"w\"), \
             token: Some(<redacted>), until: Some(5), fence: 1, priority: 0, not_before: None, \
             max_attempts: None, group: None, attempts: 1, last_error: None } \
             ReconcileClaim { claim: \"<redacted>\", until: 5 }"
        );
        let unclaimed = Task {
            token: None,
            ..task
        };
        assert!(format!("{unclaimed:?}").contains("token: None"));
    }
}
