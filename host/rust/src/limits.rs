//! Sizes checked before anything is lowered into the component (HOSTS.md
//! rule 16): no contract value is longer than 1 MiB and no list longer than
//! 10,000 items, so a call carrying more is refused with `invalid-input`
//! before it is copied, converted or given a transaction. Everything within
//! these bounds is the component's to judge.
use gak_rules::{
    Action, Completion, Error, Lease, Outcome, Resolution, Snapshot, StepDef, TaskSeed,
    input::MAX_ITEMS, input::MAX_PAYLOAD,
};

/// The most bytes of strings and byte lists one call may carry in all.
pub(crate) const MAX_CALL: usize = crate::store::facts::MAX_CALL_BYTES;

// The component's own bounds are the protocol's (HOSTS.md rule 16): one
// number in `host/sql/store.json`, checked against the rules here.
const _: () = assert!(MAX_PAYLOAD == crate::store::facts::MAX_VALUE_BYTES);
const _: () = assert!(MAX_ITEMS == crate::store::facts::MAX_LIST_ITEMS);

/// What a call's argument carries, for the checks before lowering.
pub(crate) trait Weigh {
    /// Add this value's strings and bytes to `total`; an error naming the
    /// first value or list over its bound.
    fn weigh(&self, total: &mut usize) -> Result<(), String>;
}

fn value(len: usize, total: &mut usize) -> Result<(), String> {
    if len > MAX_PAYLOAD {
        return Err(format!(
            "a value of {len} bytes is longer than the largest the contract accepts (1 MiB)"
        ));
    }
    *total += len;
    if *total > MAX_CALL {
        return Err("the call's arguments are larger than 64 MiB in all".into());
    }
    Ok(())
}

fn list<T>(
    items: &[T],
    total: &mut usize,
    each: impl Fn(&T, &mut usize) -> Result<(), String>,
) -> Result<(), String> {
    if items.len() > MAX_ITEMS {
        return Err(format!(
            "a list of {} items is longer than the contract accepts (10,000)",
            items.len()
        ));
    }
    items.iter().try_for_each(|item| each(item, total))
}

impl Weigh for str {
    fn weigh(&self, total: &mut usize) -> Result<(), String> {
        value(self.len(), total)
    }
}

impl Weigh for String {
    fn weigh(&self, total: &mut usize) -> Result<(), String> {
        value(self.len(), total)
    }
}

impl Weigh for [u8] {
    fn weigh(&self, total: &mut usize) -> Result<(), String> {
        value(self.len(), total)
    }
}

impl Weigh for Vec<u8> {
    fn weigh(&self, total: &mut usize) -> Result<(), String> {
        value(self.len(), total)
    }
}

impl<T: Weigh + ?Sized> Weigh for &T {
    fn weigh(&self, total: &mut usize) -> Result<(), String> {
        (**self).weigh(total)
    }
}

impl<T: Weigh> Weigh for Option<T> {
    fn weigh(&self, total: &mut usize) -> Result<(), String> {
        self.as_ref().map_or(Ok(()), |v| v.weigh(total))
    }
}

impl Weigh for [String] {
    fn weigh(&self, total: &mut usize) -> Result<(), String> {
        list(self, total, |s, t| s.weigh(t))
    }
}

impl Weigh for Vec<String> {
    fn weigh(&self, total: &mut usize) -> Result<(), String> {
        self.as_slice().weigh(total)
    }
}

impl Weigh for Action {
    fn weigh(&self, total: &mut usize) -> Result<(), String> {
        self.key.weigh(total)?;
        self.resource.weigh(total)?;
        self.fingerprint.weigh(total)
    }
}

impl Weigh for Lease {
    fn weigh(&self, total: &mut usize) -> Result<(), String> {
        self.key.weigh(total)?;
        self.resource.weigh(total)?;
        self.holder.weigh(total)
    }
}

impl Weigh for Snapshot {
    fn weigh(&self, total: &mut usize) -> Result<(), String> {
        self.run_id.weigh(total)?;
        self.status.weigh(total)?;
        self.done.weigh(total)?;
        list(&self.fields, total, |(k, v), t| {
            k.weigh(t)?;
            v.weigh(t)
        })
    }
}

impl Weigh for Outcome {
    fn weigh(&self, total: &mut usize) -> Result<(), String> {
        self.result.weigh(total)
    }
}

impl Weigh for Resolution {
    fn weigh(&self, total: &mut usize) -> Result<(), String> {
        self.result.weigh(total)?;
        self.claim.weigh(total)
    }
}

impl Weigh for [TaskSeed] {
    fn weigh(&self, total: &mut usize) -> Result<(), String> {
        list(self, total, |t, total| {
            t.id.weigh(total)?;
            t.title.weigh(total)?;
            t.group.weigh(total)?;
            t.deps.weigh(total)
        })
    }
}

impl Weigh for [Completion] {
    fn weigh(&self, total: &mut usize) -> Result<(), String> {
        list(self, total, |c, total| {
            c.id.weigh(total)?;
            c.token.weigh(total)
        })
    }
}

impl Weigh for [StepDef] {
    fn weigh(&self, total: &mut usize) -> Result<(), String> {
        list(self, total, |s, total| {
            s.id.weigh(total)?;
            s.depends_on.weigh(total)
        })
    }
}

/// `invalid-input` unless every argument fits the bounds above.
pub(crate) fn fits(args: &[&dyn Weigh]) -> Result<(), Error> {
    let mut total = 0;
    args.iter()
        .try_for_each(|a| a.weigh(&mut total))
        .map_err(Error::InvalidInput)
}

/// `invalid-input` when a plan's step ids, dependencies and snapshot total
/// more than 64 MiB: `checkpoint.build-plan` is pure and its step-id
/// problems (an overlong id included) are the component's `invalid-plan`
/// (SPEC 8), so only the call's total is the host's to bound.
pub(crate) fn plan_fits(steps: &[StepDef], snap: Option<&Snapshot>) -> Result<(), Error> {
    let ids: usize = steps
        .iter()
        .map(|s| s.id.len() + s.depends_on.iter().map(String::len).sum::<usize>())
        .sum();
    let snap: usize = snap.map_or(0, |s| {
        s.run_id.len()
            + s.status.len()
            + s.done.iter().map(String::len).sum::<usize>()
            + s.fields
                .iter()
                .map(|(k, v)| k.len() + v.len())
                .sum::<usize>()
    });
    if ids + snap > MAX_CALL {
        return Err(Error::InvalidInput(
            "the call's arguments are larger than 64 MiB in all".into(),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_lists_and_totals_are_bounded() {
        let big = "x".repeat(MAX_PAYLOAD + 1);
        assert!(fits(&[&"ok"]).is_ok());
        assert!(fits(&[&"x".repeat(MAX_PAYLOAD)]).is_ok());
        assert!(matches!(fits(&[&big]), Err(Error::InvalidInput(_))));
        let many: Vec<String> = (0..=MAX_ITEMS).map(|i| i.to_string()).collect();
        assert!(fits(&[&many]).is_err());
        let mb = vec![0u8; MAX_PAYLOAD];
        let parts: Vec<&dyn Weigh> = (0..65).map(|_| &mb as &dyn Weigh).collect();
        assert!(fits(&parts[..64]).is_ok());
        assert!(fits(&parts).is_err());
    }
}
