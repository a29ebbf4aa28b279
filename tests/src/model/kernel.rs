//! The real kernel's side: a [`Call`] applied to a kernel, its answer in
//! the model's terms ([`Out`] with tokens as `String`, errors by name), and
//! fresh kernels on the in-memory and SQLite stores.
use std::any::Any;
use std::sync::Arc;

use gak::blocking::Kernel;
use gak::{Acquired, Clock, Completion, CompletionAnswer, Error, Lease, ManualClock, Task};

use super::answer::{AcqV, LeaseV, Out, TaskV};
use super::call::Call;

fn real_err<T>(e: Error) -> Out<T> {
    match e {
        Error::Storage(why) => Out::Err(format!("storage: {why}")),
        e => Out::Err(e.name().to_owned()),
    }
}

fn real<T, U>(r: Result<T, Error>, f: impl FnOnce(T) -> Out<U>) -> Out<U> {
    r.map_or_else(real_err, f)
}

fn task_v(t: Task) -> TaskV<String> {
    TaskV {
        id: t.id,
        title: t.title,
        deps: t.deps,
        state: t.state,
        owner: t.owner,
        token: t.token,
        until: t.until,
        fence: t.fence,
        priority: t.priority,
        not_before: t.not_before,
        max_attempts: t.max_attempts,
        group: t.group,
        attempts: t.attempts,
        last_error: t.last_error,
    }
}

fn lease_v(l: Lease) -> LeaseV<String> {
    LeaseV {
        key: l.key,
        resource: l.resource,
        fence: l.fence,
        holder: l.holder,
        until: l.until,
    }
}

fn lease_in(l: &LeaseV<String>) -> Lease {
    Lease {
        key: l.key.clone(),
        resource: l.resource.clone(),
        fence: l.fence,
        holder: l.holder.clone(),
        until: l.until,
    }
}

fn sink_key(resource: &str) -> String {
    format!("gak-model/{resource}")
}

pub(crate) fn apply_real(k: &Kernel, clock: &ManualClock, call: &Call<String>) -> Out<String> {
    let unit = |r: Result<(), Error>| real(r, |()| Out::Unit);
    let se = k.sideeffect();
    let tb = k.taskboard();
    match call {
        Call::Advance(ms) => {
            clock.advance(*ms);
            Out::Unit
        }
        Call::AdvanceTo(t) => {
            if *t > clock.now() {
                clock.set(*t).expect("forward");
            }
            Out::Unit
        }
        Call::Seed(seeds) => unit(tb.seed(seeds)),
        Call::List => real(tb.list(None, None, 1000).map(|p| p.items), |ts| {
            Out::Tasks(ts.into_iter().map(task_v).collect())
        }),
        Call::Claim { id, agent, ttl } => real(tb.claim(id, agent, *ttl), |t| Out::Task(task_v(t))),
        Call::TRelease { id, token } => unit(tb.release(id, token)),
        Call::TComplete { id, token } => unit(tb.complete(id, token)),
        Call::TRenew { id, token, ttl } => {
            real(tb.renew(id, token, *ttl), |t| Out::Task(task_v(t)))
        }
        Call::Acquire { action, ttl } => real(se.acquire(action, *ttl), |a| {
            Out::Acq(match a {
                Acquired::Granted(l) => AcqV::Granted(lease_v(l)),
                Acquired::Replayed(r) => AcqV::Replayed(r),
                Acquired::Uncertain(why) => AcqV::Uncertain(why),
                Acquired::InFlight => AcqV::InFlight,
                Acquired::Contended(until) => AcqV::Contended(until),
                other => panic!("an acquire outcome the model does not know: {other:?}"),
            })
        }),
        Call::Complete {
            action,
            lease,
            result,
        } => real(se.complete(action, &lease_in(lease), result), Out::Bytes),
        Call::Release { action, lease } => unit(se.release(action, &lease_in(lease))),
        Call::Abandon { action, lease } => {
            unit(se.abandon(action, &lease_in(lease), "did not apply"))
        }
        Call::Renew { action, lease, ttl } => real(se.renew(action, &lease_in(lease), *ttl), |l| {
            Out::Lease(lease_v(l))
        }),
        Call::Mark {
            action,
            lease,
            reason,
        } => unit(se.mark_uncertain(action, &lease_in(lease), reason)),
        Call::Begin { action, ttl } => real(se.begin_reconcile(action, *ttl), |c| Out::Claim {
            claim: c.claim,
            until: c.until,
        }),
        Call::Resolve { action, resolution } => {
            real(se.resolve_uncertain(action, resolution), Out::Resolved)
        }
        Call::Sink {
            resource,
            presented,
            fail,
            marker,
        } => {
            let key = sink_key(resource);
            // Err(None): the body's deliberate failure, after a write that
            // must roll back; Err(Some(e)): a storage failure.
            let r = se.write_fenced(resource, *presented, |d| {
                if *fail {
                    d.put(&key, "ROLLED BACK").map_err(Some)?;
                    Err(None)
                } else {
                    d.put(&key, marker).map_err(Some)
                }
            });
            match r {
                Ok(()) => Out::Unit,
                Err(gak::SinkError::Body(Some(e))) => real_err(e),
                Err(e) => real_err(e.contract_error()),
            }
        }
        Call::SinkRead {
            resource,
            downstream: false,
        } => real(se.sink_seen(resource), Out::Seen),
        Call::SinkRead {
            resource,
            downstream: true,
        } => {
            let key = sink_key(resource);
            real(k.with_downstream(|d| d.get(&key)), Out::Marker)
        }
        Call::Save(snap) => unit(k.checkpoint().save_if_newer(snap)),
        Call::Load(run) => real(k.checkpoint().load(run), Out::Snap),
        Call::Commit {
            run,
            step,
            fence,
            outcome,
        } => real(
            k.commitgate().commit(run, step.as_deref(), *fence, outcome),
            Out::Outcome,
        ),
        Call::Read { run, step } => real(k.commitgate().read(run, step.as_deref()), Out::Outcome),
        Call::KeyGet(key) => real(se.get(key), Out::Key),
        Call::Invalid(call) => apply_real(k, clock, call),
        Call::ClaimNext { agent, ttl } => real(tb.claim_next(agent, *ttl), |t| {
            Out::Tasks(t.into_iter().map(task_v).collect())
        }),
        Call::ClaimBatch { agent, ttl, limit } => real(tb.claim_batch(agent, *ttl, *limit), |ts| {
            Out::Tasks(ts.into_iter().map(task_v).collect())
        }),
        Call::CompleteBatch { items } => {
            let items: Vec<Completion> = items
                .iter()
                .map(|(id, token)| Completion {
                    id: id.clone(),
                    token: token.clone(),
                })
                .collect();
            real(tb.complete_batch(&items), |rs| {
                Out::Items(
                    rs.into_iter()
                        .map(|r| {
                            let answer = match r.answer {
                                CompletionAnswer::Completed => Out::Unit,
                                other => Out::Err(other.name().to_owned()),
                            };
                            (r.id, answer)
                        })
                        .collect(),
                )
            })
        }
        Call::Fail {
            id,
            token,
            reason,
            retry_after,
        } => real(tb.fail(id, token, reason, *retry_after), |t| {
            Out::Task(task_v(t))
        }),
        Call::Revive(id) => real(tb.revive(id), |t| Out::Task(task_v(t))),
        Call::SetGroupLimit { group, limit } => unit(tb.set_group_limit(group, *limit)),
        Call::GetGroup(group) => real(tb.get_group(group), |g| Out::Group {
            limit: g.limit,
            live: g.live,
        }),
    }
}

/// Makes a fresh kernel on a binding, with whatever must outlive it.
pub type Fresh<'a> = dyn Fn(Arc<ManualClock>) -> (Kernel, Box<dyn Any>) + 'a;

/// A fresh kernel on the in-memory store.
pub fn fresh_memory(clock: Arc<ManualClock>) -> (Kernel, Box<dyn Any>) {
    let backend = gak::blocking::run_future(gak::store::open("memory:")).expect("memory store");
    (
        Kernel::with_backend(backend, clock).expect("kernel"),
        Box::new(()),
    )
}

/// A fresh kernel on SQLite, in a temp dir removed with the guard.
pub fn fresh_sqlite(clock: Arc<ManualClock>) -> (Kernel, Box<dyn Any>) {
    let dir = tempfile::tempdir().expect("temp dir");
    let url = format!("sqlite:{}", dir.path().join("model.db").display());
    let backend = gak::blocking::run_future(gak::store::open(&url)).expect("sqlite store");
    (
        Kernel::with_backend(backend, clock).expect("kernel"),
        Box::new(dir),
    )
}
