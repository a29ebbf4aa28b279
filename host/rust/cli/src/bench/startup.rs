//! Start-up figures: what a process pays before its first call.
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

/// The start-up figures of `gak bench`'s JSON (`"startup"`).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Startup {
    /// `Component::new` from the component's bytes (Cranelift), no cache, ms.
    pub compile_ms: f64,
    /// Loading the cached compiled artifact (`Component::deserialize_file`),
    /// median of 5, ms.
    pub load_cached_ms: f64,
    /// `Store::new` + `instantiate_async`, what the kernel does once per
    /// worker, median of 200, µs.
    pub instantiate_us: f64,
    /// The linear memory one fresh instance is given (what its memories
    /// grew to at instantiation, measured by a store limiter), bytes.
    pub instance_bytes: u64,
    /// The component's size (`gak component --out`), bytes.
    pub component_bytes: u64,
    /// A warm start: `gak tasks list --store memory:` run as a new process
    /// with the compiled component cached, median of 5 wall times, ms; null
    /// when the binary cannot be re-run.
    pub warm_start_ms: Option<f64>,
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort_unstable();
    v.get(v.len() / 2).copied().unwrap_or_default()
}

pub(super) fn measure() -> Result<Startup, String> {
    let probe = gak::blocking::run_future(gak::measure::probe_startup(
        &gak::store::memory::MemoryBackend::default(),
        std::sync::Arc::new(gak::SystemClock::default()),
        200,
    ))?;
    Ok(Startup {
        compile_ms: probe.compile.as_secs_f64() * 1e3,
        load_cached_ms: median(probe.load_cached).as_secs_f64() * 1e3,
        instantiate_us: median(probe.instantiate).as_secs_f64() * 1e6,
        instance_bytes: probe.instance_bytes as u64,
        component_bytes: gak::COMPONENT_WASM.len() as u64,
        warm_start_ms: warm_start(),
    })
}

/// The median wall time of this binary listing a `memory:` board, after
/// one untimed run that makes sure the compiled component is cached.
fn warm_start() -> Option<f64> {
    let exe = std::env::current_exe().ok()?;
    let once = || {
        let t = Instant::now();
        let ok = Command::new(&exe)
            .args(["tasks", "list", "--store", "memory:"])
            .env_remove("GAK_LOG")
            .env_remove("RUST_LOG")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        ok.then(|| t.elapsed())
    };
    once()?;
    let runs: Option<Vec<Duration>> = (0..5).map(|_| once()).collect();
    Some(median(runs?).as_secs_f64() * 1e3)
}
