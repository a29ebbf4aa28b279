//! WIT's kebab-case names in each language's style.

/// `retry-safety` → `retry_safety`.
pub fn snake(kebab: &str) -> String {
    kebab.replace('-', "_")
}

/// `retry-safety` → `RETRY_SAFETY`.
pub fn screaming(kebab: &str) -> String {
    snake(kebab).to_uppercase()
}

/// `retry-safety` → `RetrySafety`.
pub fn camel(kebab: &str) -> String {
    kebab
        .split('-')
        .map(|part| {
            let mut chars = part.chars();
            match chars.next() {
                Some(first) => first.to_uppercase().chain(chars).collect::<String>(),
                None => String::new(),
            }
        })
        .collect()
}

/// `retry-safety` → `retrySafety`.
pub fn lower_camel(kebab: &str) -> String {
    let upper = camel(kebab);
    let mut chars = upper.chars();
    match chars.next() {
        Some(first) => first.to_lowercase().chain(chars).collect(),
        None => String::new(),
    }
}

/// The name a host's API gives a contract type, where it is not the WIT
/// name: taskboard's `state` is `TaskState` in every host (`state` alone
/// would be ambiguous beside the side-effect keys' `key-state`).
pub fn type_name(wit: &str) -> String {
    camel(host_kebab(wit))
}

/// [`type_name`] in kebab-case, for languages that spell type names in
/// snake case (libgak's `gak_task_state`).
pub fn host_kebab(wit: &str) -> &str {
    match wit {
        "state" => "task-state",
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cases() {
        assert_eq!(snake("force-retryable"), "force_retryable");
        assert_eq!(screaming("in-flight"), "IN_FLIGHT");
        assert_eq!(camel("key-info"), "KeyInfo");
        assert_eq!(lower_camel("run-id"), "runId");
        assert_eq!(type_name("state"), "TaskState");
        assert_eq!(type_name("reconcile-claim"), "ReconcileClaim");
    }
}
