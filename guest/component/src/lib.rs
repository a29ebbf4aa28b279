//! The gak kernel component: `wit-bindgen` glue over `gak-rules`.
//!
//! Every exported call runs the rules over a [`rules::buffer::Buffered`]
//! transaction on the host's store import: reads go out in batches (the
//! first one also brings the clock and, for calls that mint a token, the
//! entropy), writes stay in the component until the call decides `ok`, and
//! then go to the host as one write set. A `claim` or an `acquire` is the
//! export plus two store crossings.
#![allow(unsafe_code)] // the generated export glue

use gak_rules as rules;
use rules::buffer::{Answers, Buffered, Change, Reads, Store};

wit_bindgen::generate!({
    path: "../../wit",
    world: "kernel",
});

mod convert;

use exports::gak::kernel::{checkpoint, commitgate, retention, sideeffect, taskboard};
use gak::kernel::{store, types::Error};

struct Component;
export!(Component);

/// The host's store import, as [`Buffered`] sees it.
struct Host;

impl Store for Host {
    fn read(&mut self, reads: Reads) -> Result<Answers, rules::StoreFault> {
        store::read(&convert::reads_out(reads))
            .map(convert::answers_in)
            .map_err(convert::store_error_in)
    }

    fn write(&mut self, changes: Vec<Change>) -> Result<(), rules::StoreFault> {
        let changes: Vec<store::Change> = changes.into_iter().map(convert::change_out).collect();
        store::write(&changes).map_err(convert::store_error_in)
    }

    fn try_read(
        &mut self,
        keys: Vec<(rules::Table, String)>,
    ) -> Result<Vec<rules::buffer::Probe>, rules::StoreFault> {
        let keys: Vec<(store::Table, String)> = keys
            .into_iter()
            .map(|(t, k)| (convert::table_out(t), k))
            .collect();
        store::try_read(&keys)
            .map(|probes| probes.into_iter().map(convert::probe_in).collect())
            .map_err(convert::store_error_in)
    }
}

/// Run one exported call that mints `tokens` capabilities: the rules, then
/// the write set when they decided `ok`.
fn call_minting<T>(
    tokens: u8,
    f: impl FnOnce(&mut Buffered<Host>) -> Result<T, rules::Error>,
) -> Result<T, Error> {
    Buffered::new(Host)
        .minting(tokens)
        .decide(f)
        .map_err(convert::error_out)
}

/// Run one exported call that may change tasks or keys (and mints `tokens`
/// capabilities): its count record comes with the first read.
fn call_counting<T>(
    tokens: u8,
    f: impl FnOnce(&mut Buffered<Host>) -> Result<T, rules::Error>,
) -> Result<T, Error> {
    Buffered::new(Host)
        .minting(tokens)
        .counting()
        .decide(f)
        .map_err(convert::error_out)
}

/// Run one exported call that mints nothing.
fn call<T>(f: impl FnOnce(&mut Buffered<Host>) -> Result<T, rules::Error>) -> Result<T, Error> {
    call_minting(0, f)
}

impl checkpoint::Guest for Component {
    fn save_if_newer(snap: checkpoint::Snapshot) -> Result<(), Error> {
        call(|tx| rules::checkpoint::save_if_newer(tx, &convert::snapshot_in(snap)))
    }
    fn load(run_id: String) -> Result<checkpoint::Snapshot, Error> {
        call(|tx| rules::checkpoint::load_snapshot(tx, &run_id)).map(convert::snapshot_out)
    }
    fn build_plan(
        steps: Vec<checkpoint::StepDef>,
        snap: Option<checkpoint::Snapshot>,
    ) -> Result<checkpoint::Plan, Error> {
        let steps: Vec<rules::StepDef> = steps.into_iter().map(convert::step_def_in).collect();
        let snap = snap.map(convert::snapshot_in);
        rules::plan::build_plan(&steps, snap.as_ref())
            .map(convert::plan_out)
            .map_err(convert::error_out)
    }
}

impl commitgate::Guest for Component {
    fn commit(
        run_id: String,
        step: Option<String>,
        fence: u64,
        outcome: commitgate::Outcome,
    ) -> Result<commitgate::Outcome, Error> {
        let outcome = convert::outcome_in(outcome);
        call(|tx| rules::commitgate::commit(tx, &run_id, step.as_deref(), fence, &outcome))
            .map(convert::outcome_out)
    }
    fn read(run_id: String, step: Option<String>) -> Result<commitgate::Outcome, Error> {
        call(|tx| rules::commitgate::read(tx, &run_id, step.as_deref())).map(convert::outcome_out)
    }
}

impl sideeffect::Guest for Component {
    fn acquire(action: sideeffect::Action, ttl: u64) -> Result<sideeffect::Acquired, Error> {
        let action = convert::action_in(action);
        call_counting(1, |tx| rules::sideeffect::acquire(tx, &action, ttl))
            .map(convert::acquired_out)
    }
    fn complete(
        action: sideeffect::Action,
        lease: sideeffect::Lease,
        result: Vec<u8>,
    ) -> Result<Vec<u8>, Error> {
        let (action, lease) = (convert::action_in(action), convert::lease_in(lease));
        call_counting(0, |tx| {
            rules::sideeffect::complete(tx, &action, &lease, &result)
        })
    }
    fn release(action: sideeffect::Action, lease: sideeffect::Lease) -> Result<(), Error> {
        let (action, lease) = (convert::action_in(action), convert::lease_in(lease));
        call(|tx| rules::sideeffect::release(tx, &action, &lease))
    }
    fn abandon(
        action: sideeffect::Action,
        lease: sideeffect::Lease,
        reason: String,
    ) -> Result<(), Error> {
        let (action, lease) = (convert::action_in(action), convert::lease_in(lease));
        call_counting(0, |tx| {
            rules::sideeffect::abandon(tx, &action, &lease, &reason)
        })
    }
    fn renew(
        action: sideeffect::Action,
        lease: sideeffect::Lease,
        ttl: u64,
    ) -> Result<sideeffect::Lease, Error> {
        let (action, lease) = (convert::action_in(action), convert::lease_in(lease));
        call(|tx| rules::sideeffect::renew(tx, &action, &lease, ttl)).map(convert::lease_out)
    }
    fn mark_uncertain(
        action: sideeffect::Action,
        lease: sideeffect::Lease,
        reason: String,
    ) -> Result<(), Error> {
        let (action, lease) = (convert::action_in(action), convert::lease_in(lease));
        call_counting(0, |tx| {
            rules::sideeffect::mark_uncertain(tx, &action, &lease, &reason)
        })
    }
    fn begin_reconcile(
        action: sideeffect::Action,
        ttl: u64,
    ) -> Result<sideeffect::ReconcileClaim, Error> {
        let action = convert::action_in(action);
        call_minting(1, |tx| rules::sideeffect::begin_reconcile(tx, &action, ttl))
            .map(convert::reconcile_claim_out)
    }
    fn resolve_uncertain(
        action: sideeffect::Action,
        resolution: sideeffect::Resolution,
    ) -> Result<sideeffect::Resolved, Error> {
        let action = convert::action_in(action);
        let resolution = convert::resolution_in(resolution);
        call_counting(0, |tx| {
            rules::sideeffect::resolve_uncertain(tx, &action, &resolution)
        })
        .map(convert::resolved_out)
    }
    fn sink_advance(resource: String, presented: u64) -> Result<(), Error> {
        call(|tx| rules::sideeffect::sink_advance(tx, &resource, presented))
    }
    fn sink_seen(resource: String) -> Result<u64, Error> {
        call(|tx| rules::sideeffect::sink_seen(tx, &resource))
    }
    fn list(
        state: Option<sideeffect::KeyState>,
        after: Option<String>,
        limit: u32,
    ) -> Result<sideeffect::KeyPage, Error> {
        let state = state.map(convert::key_state_in);
        call(|tx| rules::sideeffect::list(tx, state, after.as_deref(), limit))
            .map(convert::key_page_out)
    }
    fn get(key: String) -> Result<sideeffect::KeyInfo, Error> {
        call(|tx| rules::sideeffect::get(tx, &key)).map(convert::key_info_out)
    }
    fn count() -> Result<sideeffect::KeyCounts, Error> {
        call(rules::sideeffect::count).map(convert::key_counts_out)
    }
    fn recount(limit: u32) -> Result<bool, Error> {
        call_counting(0, |tx| rules::sideeffect::recount(tx, limit))
    }
}

impl taskboard::Guest for Component {
    fn seed(tasks: Vec<taskboard::TaskSeed>) -> Result<(), Error> {
        let tasks: Vec<rules::TaskSeed> = tasks.into_iter().map(convert::task_seed_in).collect();
        call_counting(0, |tx| rules::taskboard::seed(tx, &tasks))
    }
    fn list(
        state: Option<taskboard::State>,
        after: Option<String>,
        limit: u32,
    ) -> Result<taskboard::TaskPage, Error> {
        let state = state.map(convert::state_in);
        call(|tx| rules::taskboard::list(tx, state, after.as_deref(), limit))
            .map(convert::task_page_out)
    }
    fn get(id: String) -> Result<taskboard::Task, Error> {
        call(|tx| rules::taskboard::get(tx, &id)).map(convert::task_out)
    }
    fn claim_next(agent: String, ttl: u64) -> Result<Option<taskboard::Task>, Error> {
        // A seed of 32 bytes (SPEC 10), drawn with the first read.
        call_counting(2, |tx| rules::taskboard::claim_next(tx, &agent, ttl))
            .map(|t| t.map(convert::task_out))
    }
    fn claim_batch(agent: String, ttl: u64, limit: u32) -> Result<Vec<taskboard::Task>, Error> {
        call_counting(2, |tx| {
            rules::taskboard::claim_batch(tx, &agent, ttl, limit)
        })
        .map(|tasks| tasks.into_iter().map(convert::task_out).collect())
    }
    fn claim(id: String, agent: String, ttl: u64) -> Result<taskboard::Task, Error> {
        call_counting(1, |tx| rules::taskboard::claim(tx, &id, &agent, ttl)).map(convert::task_out)
    }
    fn release(id: String, token: String) -> Result<(), Error> {
        call_counting(0, |tx| rules::taskboard::release(tx, &id, &token))
    }
    fn complete(id: String, token: String) -> Result<(), Error> {
        call_counting(0, |tx| rules::taskboard::complete(tx, &id, &token))
    }
    fn renew(id: String, token: String, ttl: u64) -> Result<taskboard::Task, Error> {
        call(|tx| rules::taskboard::renew(tx, &id, &token, ttl)).map(convert::task_out)
    }
    fn complete_batch(
        items: Vec<taskboard::Completion>,
    ) -> Result<Vec<taskboard::CompletionResult>, Error> {
        let items: Vec<rules::Completion> = items.into_iter().map(convert::completion_in).collect();
        call_counting(0, |tx| rules::taskboard::complete_batch(tx, &items)).map(|answers| {
            answers
                .into_iter()
                .map(convert::completion_result_out)
                .collect()
        })
    }
    fn fail(
        id: String,
        token: String,
        reason: String,
        retry_after: Option<u64>,
    ) -> Result<taskboard::Task, Error> {
        call_counting(0, |tx| {
            rules::taskboard::fail(tx, &id, &token, &reason, retry_after)
        })
        .map(convert::task_out)
    }
    fn revive(id: String) -> Result<taskboard::Task, Error> {
        call_counting(0, |tx| rules::taskboard::revive(tx, &id)).map(convert::task_out)
    }
    fn set_group_limit(group: String, limit: Option<u32>) -> Result<(), Error> {
        call(|tx| rules::taskboard::set_group_limit(tx, &group, limit))
    }
    fn get_group(group: String) -> Result<taskboard::GroupInfo, Error> {
        call(|tx| rules::taskboard::get_group(tx, &group)).map(convert::group_info_out)
    }
    fn list_groups(after: Option<String>, limit: u32) -> Result<taskboard::GroupPage, Error> {
        call(|tx| rules::taskboard::list_groups(tx, after.as_deref(), limit))
            .map(convert::group_page_out)
    }
    fn list_delayed(after: Option<String>, limit: u32) -> Result<taskboard::TaskPage, Error> {
        call(|tx| rules::taskboard::list_delayed(tx, after.as_deref(), limit))
            .map(convert::task_page_out)
    }
    fn list_group(
        group: String,
        after: Option<String>,
        limit: u32,
    ) -> Result<taskboard::TaskPage, Error> {
        call(|tx| rules::taskboard::list_group(tx, &group, after.as_deref(), limit))
            .map(convert::task_page_out)
    }
    fn count() -> Result<taskboard::TaskCounts, Error> {
        call(rules::taskboard::count).map(convert::task_counts_out)
    }
    fn recount(limit: u32) -> Result<bool, Error> {
        call_counting(0, |tx| rules::taskboard::recount(tx, limit))
    }
}

impl retention::Guest for Component {
    fn prune(before: u64, limit: u32) -> Result<retention::Pruned, Error> {
        call_counting(0, |tx| rules::retention::prune(tx, before, limit)).map(convert::pruned_out)
    }
}
