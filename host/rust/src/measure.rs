//! What `gak bench` measures with, beside the kernel's own calls: the
//! component's start-up in this process, and the rules of `gak-rules` run
//! natively over the same store bindings, transaction and call loop as the
//! component (the baseline that isolates the cost of the WebAssembly
//! boundary). Nothing here is on a kernel's call path.
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use wasmtime::component::Component;

use crate::clock::Clock;
use crate::engine::{COMPONENT_WASM, Instance, compiled};
pub use crate::native::{Caller, NativeStore, random128};

/// How many times the calling thread, inside a call of the blocking API,
/// was woken by one of its own PostgreSQL sockets rather than by another
/// thread (Linux; zero elsewhere). For tests and `gak drain`'s report.
#[doc(hidden)]
pub fn caller_socket_wakes() -> u64 {
    crate::drive::socket_wakes()
}

/// Counts what an instance's memories grow to, refusing nothing: a store
/// limiter used only to measure (`instance_bytes`).
#[derive(Default)]
struct MemoryTally {
    bytes: Arc<AtomicUsize>,
}

impl wasmtime::ResourceLimiter for MemoryTally {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        self.bytes
            .fetch_add(desired.saturating_sub(current), Ordering::Relaxed);
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        _desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(true)
    }
}

/// What a process pays for the component before its first call (`gak
/// bench` reports it).
#[derive(Debug)]
pub struct StartupProbe {
    /// `Component::new` from the bytes (Cranelift), no cache.
    pub compile: std::time::Duration,
    /// `Component::deserialize_file` of the serialized artifact, each try.
    pub load_cached: Vec<std::time::Duration>,
    /// `Store::new` + `instantiate_async`, as the kernel does per worker.
    pub instantiate: Vec<std::time::Duration>,
    /// Linear memory given to one fresh instance.
    pub instance_bytes: usize,
}

/// Measure the component's start-up costs in this process: compile it,
/// load its cached artifact five times, and instantiate it `instantiations`
/// times over sessions of `backend`.
///
/// # Errors
/// Why the component could not be compiled, cached or instantiated.
pub async fn probe_startup(
    backend: &dyn crate::store::Backend,
    clock: Arc<dyn Clock>,
    instantiations: usize,
) -> Result<StartupProbe, String> {
    use std::time::Instant;

    let compiled = compiled()?;
    let t = Instant::now();
    let component = Component::new(&compiled.engine, COMPONENT_WASM)
        .map_err(|e| format!("compiling the component: {e}"))?;
    let compile = t.elapsed();
    let bytes = component
        .serialize()
        .map_err(|e| format!("serializing the component: {e}"))?;
    let path = std::env::temp_dir().join(format!("gak-probe-{}.cwasm", std::process::id()));
    std::fs::write(&path, bytes).map_err(|e| format!("writing {}: {e}", path.display()))?;
    let mut load_cached = Vec::new();
    for _ in 0..5 {
        let t = Instant::now();
        // SAFETY: the file was serialized just above by this engine.
        #[allow(unsafe_code)]
        let loaded = unsafe { Component::deserialize_file(&compiled.engine, &path) };
        load_cached.push(t.elapsed());
        if let Err(e) = loaded {
            let _ = std::fs::remove_file(&path);
            return Err(format!("loading the cached component: {e}"));
        }
    }
    let _ = std::fs::remove_file(&path);

    let mut instantiate = Vec::with_capacity(instantiations);
    for _ in 0..instantiations {
        let session = backend.session().await.map_err(|f| f.to_string())?;
        let t = Instant::now();
        let instance = Instance::new(&compiled, session, clock.clone()).await?;
        instantiate.push(t.elapsed());
        drop(instance);
    }

    let session = backend.session().await.map_err(|f| f.to_string())?;
    let tally = MemoryTally::default();
    let grown = tally.bytes.clone();
    let instance = Instance::limited(&compiled, session, clock, Some(Box::new(tally))).await?;
    drop(instance);
    let instance_bytes = grown.load(Ordering::Relaxed);
    Ok(StartupProbe {
        compile,
        load_cached,
        instantiate,
        instance_bytes,
    })
}
