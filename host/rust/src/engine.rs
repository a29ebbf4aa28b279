//! The wasmtime embedding: one engine and compiled component per process
//! (over the bindings of `crate::bindings`), and the host side of the
//! `store` import (with the clock and the entropy it hands over).
//!
//! Imports and exports are async: a store call awaits its binding (a
//! PostgreSQL round trip suspends the component on a fiber instead of
//! blocking the thread). Bindings that never wait return ready futures, so
//! they cost a fiber switch, not a thread hop.
//!
//! Compiling the component with Cranelift takes ~0.1 s in a release host and
//! over a second in a debug one, so the compiled artifact is cached on disk
//! (keyed by the component bytes and the engine's compatibility hash) and
//! shared in-process by every kernel.
use std::hash::{DefaultHasher, Hash, Hasher};
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use wasmtime::component::{Component, HasSelf, Linker, ResourceTable};
use wasmtime::{Config, Engine, Store};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use crate::bindings::{self, gak::kernel::store, gak::kernel::types};
use crate::clock::Clock;
use crate::convert::table_out;
use crate::store::{Session, Span, Write};
use gak_rules::StoreFault;

/// The component, as built by `build.rs`.
pub const COMPONENT_WASM: &[u8] = include_bytes!(env!("GAK_COMPONENT_WASM"));

/// The contract this host implements: the version of the WIT package its
/// bindings were generated from (`wit/world.wit`, checked by a test).
pub const CONTRACT: &str = "gak:kernel@0.4.0";

/// Engine, compiled component and linker, shared by every kernel in the process.
pub(crate) struct Compiled {
    pub engine: Engine,
    pub pre: bindings::KernelPre<HostState>,
}

static COMPILED: OnceLock<Result<Arc<Compiled>, String>> = OnceLock::new();

pub(crate) fn compiled() -> Result<Arc<Compiled>, String> {
    COMPILED.get_or_init(|| compile().map(Arc::new)).clone()
}

fn compile() -> Result<Compiled, String> {
    let mut config = Config::new();
    // On by default in wasmtime 48; off it saves ~0.4 µs on every export call.
    config.concurrency_support(false);
    let engine = Engine::new(&config).map_err(|e| format!("wasmtime engine: {e}"))?;
    let component = load_component(&engine)?;
    check_contract(&engine, &component)?;
    let mut linker = Linker::<HostState>::new(&engine);
    wasmtime_wasi::p2::add_to_linker_async(&mut linker).map_err(|e| format!("wasi linker: {e}"))?;
    bindings::Kernel::add_to_linker::<HostState, HasSelf<HostState>>(&mut linker, |s| s)
        .map_err(|e| format!("kernel linker: {e}"))?;
    let pre = linker
        .instantiate_pre(&component)
        .map_err(|e| format!("linking the component: {e}"))?;
    let pre = bindings::KernelPre::new(pre).map_err(|e| format!("component exports: {e}"))?;
    Ok(Compiled { engine, pre })
}

/// Refuse a component of another contract version, naming both: its
/// interfaces would otherwise fail to link with a message about a missing
/// import, or worse, link and mean something else.
fn check_contract(engine: &Engine, component: &Component) -> Result<(), String> {
    let ty = component.component_type();
    let (package, ours) = CONTRACT.split_once('@').expect("CONTRACT is name@version");
    let prefix = format!("{package}/");
    let mut theirs: Vec<&str> = ty
        .exports(engine)
        .chain(ty.imports(engine))
        .filter_map(|(name, _)| name.strip_prefix(&prefix))
        .filter_map(|rest| rest.split_once('@').map(|(_, v)| v))
        .collect();
    theirs.sort_unstable();
    theirs.dedup();
    match theirs.as_slice() {
        [v] if *v == ours => Ok(()),
        [] => Err(format!(
            "the component is not a {package} component; this host implements {CONTRACT}"
        )),
        found => Err(format!(
            "the component is {}; this host implements {CONTRACT}",
            found
                .iter()
                .map(|v| format!("{package}@{v}"))
                .collect::<Vec<_>>()
                .join(" and ")
        )),
    }
}

/// A cache dir chosen by `Builder::cache_dir` before the first compile.
static CACHE_DIR: OnceLock<PathBuf> = OnceLock::new();

/// Use `dir` for the compiled-component cache, if nothing was compiled yet.
pub(crate) fn set_cache_dir(dir: PathBuf) {
    let _ = CACHE_DIR.set(dir);
}

/// Where compiled artifacts are cached: the builder's choice, else
/// `$GAK_CACHE_DIR`, else the user's cache dir, else the temp dir.
fn cache_dir() -> PathBuf {
    if let Some(dir) = CACHE_DIR.get() {
        return dir.clone();
    }
    if let Some(dir) = std::env::var_os("GAK_CACHE_DIR") {
        return PathBuf::from(dir);
    }
    std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(std::env::temp_dir)
        .join("gak")
}

fn load_component(engine: &Engine) -> Result<Component, String> {
    let mut hasher = DefaultHasher::new();
    COMPONENT_WASM.hash(&mut hasher);
    engine.precompile_compatibility_hash().hash(&mut hasher);
    let dir = cache_dir();
    let path = dir.join(format!("kernel-{:016x}.cwasm", hasher.finish()));
    if path.exists() {
        // SAFETY: the file is one this code wrote (atomically, below) from the
        // embedded component with an engine of the same compatibility hash.
        // Someone able to write into the user's cache dir could substitute
        // native code; that is the same trust as the binary itself.
        #[allow(unsafe_code)]
        match unsafe { Component::deserialize_file(engine, &path) } {
            Ok(component) => return Ok(component),
            Err(_) => {
                let _ = std::fs::remove_file(&path);
            }
        }
    }
    let component = Component::new(engine, COMPONENT_WASM)
        .map_err(|e| format!("compiling the component: {e}"))?;
    // Caching is an optimisation: any failure here only costs the next start.
    if let Ok(bytes) = component.serialize()
        && std::fs::create_dir_all(&dir).is_ok()
    {
        let tmp = dir.join(format!(
            ".tmp-{}-{:016x}",
            std::process::id(),
            hasher.finish()
        ));
        if std::fs::write(&tmp, bytes).is_ok() && std::fs::rename(&tmp, &path).is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
    }
    Ok(component)
}

/// Per-worker host state: the worker's store session (its connection) and
/// the clock. Imports act on the session's open transaction.
///
/// The component asks for the clock once per call, with its first read,
/// and the host reads it after that read's rows (after their locks).
pub(crate) struct HostState {
    wasi: WasiCtx,
    table: ResourceTable,
    pub session: Box<dyn Session>,
    pub clock: Arc<dyn Clock>,
    /// Set when the store reported a conflict during the current call: the
    /// call is re-run whatever the component answered.
    pub conflict: bool,
    /// Set when a store call failed where the component cannot see it (a
    /// sink body's statement): the call ends with `storage`.
    pub failure: Option<String>,
    /// How many store imports (`read`, `write`) this instance's calls made:
    /// with the export itself, a call's crossings of the component
    /// boundary. For the tests and tools that show them.
    pub store_crossings: u64,
    /// What limits this instance's memories and tables, if anything does
    /// (nothing, for the kernel's own instances; `crate::measure` counts
    /// with one).
    limiter: Option<Box<dyn wasmtime::ResourceLimiter + Send>>,
}

impl HostState {
    fn new(session: Box<dyn Session>, clock: Arc<dyn Clock>, wasi: WasiCtx) -> Self {
        HostState {
            wasi,
            table: ResourceTable::new(),
            session,
            clock,
            conflict: false,
            failure: None,
            store_crossings: 0,
            limiter: None,
        }
    }
}

impl HostState {
    fn fault<T>(&mut self, r: Result<T, StoreFault>) -> Result<T, store::StoreError> {
        r.map_err(|f| match f {
            StoreFault::Conflict(m) => {
                self.conflict = true;
                store::StoreError::Conflict(m)
            }
            StoreFault::Failure(m) => store::StoreError::Failure(m),
        })
    }
}

/// One instantiated component and its store: reused for every call a
/// worker makes (instantiating costs ~20 µs; a call ~0.2 µs).
pub(crate) struct Instance {
    pub store: Store<HostState>,
    pub kernel: bindings::Kernel,
}

/// `wasi:random/random` served from the operating system's CSPRNG on every
/// draw (`getrandom(2)`), with no generator state in the process.
/// wasmtime-wasi's default is a ChaCha generator seeded once per store: a
/// `fork()` copies it, and two children of one parent would then mint the
/// same tokens — a zombie's `complete` accepted under its successor's token
/// (HOSTS.md rule 7). A syscall per token (~0.3 µs) is the price.
struct OsRandom;

impl rand_core::TryRng for OsRandom {
    type Error = std::convert::Infallible;

    fn try_next_u32(&mut self) -> Result<u32, Self::Error> {
        let mut b = [0u8; 4];
        self.try_fill_bytes(&mut b)?;
        Ok(u32::from_le_bytes(b))
    }

    fn try_next_u64(&mut self) -> Result<u64, Self::Error> {
        let mut b = [0u8; 8];
        self.try_fill_bytes(&mut b)?;
        Ok(u64::from_le_bytes(b))
    }

    fn try_fill_bytes(&mut self, dst: &mut [u8]) -> Result<(), Self::Error> {
        if let Err(e) = getrandom::fill(dst) {
            // No token may be minted without a CSPRNG; there is no safe
            // fallback, and the trait cannot report the failure.
            panic!("the operating system's random source failed: {e}");
        }
        Ok(())
    }
}

impl crate::protocol::Attempter for Instance {
    fn session(&mut self) -> &mut dyn Session {
        &mut *self.store.data_mut().session
    }
    fn clear_marks(&mut self) {
        let state = self.store.data_mut();
        state.conflict = false;
        state.failure = None;
    }
    fn conflicted(&self) -> bool {
        self.store.data().conflict
    }
    fn take_failure(&mut self) -> Option<String> {
        self.store.data_mut().failure.take()
    }
}

impl Instance {
    pub async fn new(
        compiled: &Compiled,
        session: Box<dyn Session>,
        clock: Arc<dyn Clock>,
    ) -> Result<Self, String> {
        Instance::limited(compiled, session, clock, None).await
    }

    /// An instance whose memories and tables `limiter` watches from the
    /// first page on.
    pub async fn limited(
        compiled: &Compiled,
        session: Box<dyn Session>,
        clock: Arc<dyn Clock>,
        limiter: Option<Box<dyn wasmtime::ResourceLimiter + Send>>,
    ) -> Result<Self, String> {
        let wasi = WasiCtx::builder()
            .inherit_stderr()
            .secure_random(OsRandom)
            .build();
        let mut state = HostState::new(session, clock, wasi);
        let limited = limiter.is_some();
        state.limiter = limiter;
        let mut store = Store::new(&compiled.engine, state);
        if limited {
            store.limiter(|s| s.limiter.as_deref_mut().expect("set above"));
        }
        let kernel = compiled
            .pre
            .instantiate_async(&mut store)
            .await
            .map_err(|e| format!("instantiating the component: {e}"))?;
        Ok(Instance { store, kernel })
    }
}

impl WasiView for HostState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl types::Host for HostState {}

/// The most entropy one read may ask for (WIT `store.reads.entropy`).
const MAX_ENTROPY: u8 = crate::store::facts::MAX_ENTROPY;

impl HostState {
    /// The call's instant: the binding's clock (the database's) when it has
    /// one, else the kernel's; read after the call's first rows.
    async fn instant(&mut self) -> Result<u64, StoreFault> {
        let read = match self.session.now() {
            None => None,
            Some(read) => Some(read.await),
        };
        crate::clock::call_instant(read, &*self.clock)
    }
}

/// Fresh bytes from the operating system's CSPRNG, drawn now: nothing a
/// `fork()` could copy (HOSTS.md rule 7).
fn entropy(n: u8) -> Result<Vec<u8>, StoreFault> {
    if n > MAX_ENTROPY {
        return Err(StoreFault::Failure(format!(
            "{n} bytes of entropy asked for in one read; at most {MAX_ENTROPY}"
        )));
    }
    let mut bytes = vec![0u8; usize::from(n)];
    getrandom::fill(&mut bytes)
        .map_err(|e| StoreFault::Failure(format!("the operating system's random source: {e}")))?;
    Ok(bytes)
}

impl store::Host for HostState {
    async fn read(&mut self, reads: store::Reads) -> Result<store::Answers, store::StoreError> {
        self.store_crossings += 1;
        let keys: Vec<(&'static str, &str)> = reads
            .keys
            .iter()
            .map(|(t, k)| (table_out(*t).name(), k.as_str()))
            .collect();
        let spans: Vec<Span<'_>> = reads
            .ranges
            .iter()
            .map(|r| Span {
                table: table_out(r.table).name(),
                prefix: &r.prefix,
                after: r.after.as_deref(),
                limit: r.limit,
            })
            .collect();
        let rows = if keys.is_empty() && spans.is_empty() {
            Ok((Vec::new(), Vec::new()))
        } else {
            self.session.read(&keys, &spans).await
        };
        let (values, pages) = self.fault(rows)?;
        let now = if reads.clock {
            let now = self.instant().await;
            Some(self.fault(now)?)
        } else {
            None
        };
        let entropy = entropy(reads.entropy);
        let entropy = self.fault(entropy)?;
        Ok(store::Answers {
            values,
            pages,
            now,
            entropy,
        })
    }

    async fn try_read(
        &mut self,
        keys: Vec<(store::Table, String)>,
    ) -> Result<Vec<store::Probe>, store::StoreError> {
        self.store_crossings += 1;
        let keys: Vec<(&'static str, &str)> = keys
            .iter()
            .map(|(t, k)| (table_out(*t).name(), k.as_str()))
            .collect();
        let rows = if keys.is_empty() {
            Ok(Vec::new())
        } else {
            self.session.try_get_many(&keys).await
        };
        let rows = self.fault(rows)?;
        Ok(rows
            .into_iter()
            .map(|row| match row {
                None => store::Probe::Held,
                Some(value) => store::Probe::Found(value),
            })
            .collect())
    }

    async fn write(&mut self, changes: Vec<store::Change>) -> Result<(), store::StoreError> {
        self.store_crossings += 1;
        let writes: Vec<Write<'_>> = changes
            .iter()
            .map(|c| Write {
                table: table_out(c.table).name(),
                key: &c.key,
                value: c.value.as_deref(),
            })
            .collect();
        let r = self.session.write(&writes).await;
        self.fault(r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(wasm: &[u8]) -> Result<(), String> {
        let engine = Engine::new(&Config::new()).unwrap();
        let component = Component::new(&engine, wasm).unwrap();
        check_contract(&engine, &component)
    }

    #[test]
    fn the_contract_is_the_wit_packages_version() {
        let world = include_str!("../wit/world.wit");
        assert!(
            world.contains(&format!("package {CONTRACT};")),
            "wit/world.wit does not declare {CONTRACT}"
        );
    }

    #[test]
    fn the_embedded_component_is_this_hosts_contract() {
        check(COMPONENT_WASM).unwrap();
    }

    /// The component that wrote the golden data (0.2.0) is refused with a
    /// sentence naming both versions, before anything links.
    #[test]
    fn a_component_of_another_contract_is_refused_naming_both_versions() {
        let old = include_bytes!("../../../tests/golden/gak-0.2.0.wasm");
        let why = check(old).unwrap_err();
        assert_eq!(
            why,
            "the component is gak:kernel@0.2.0; this host implements gak:kernel@0.4.0"
        );
    }
}
