//! Writes golden databases of the stored format the current kernel writes
//! (`golden::FORMAT`), named after it: `format<N>.sqlite`,
//! `format<N>-postgres.sql` (`tests/golden/` holds format 1's, written by
//! gak:kernel 0.2.0, with `capabilities.json`; never overwrite them), and
//! `format<N>-capabilities.json`.
//!
//! usage: `gak-golden OUT_DIR [POSTGRES_DSN]`
//!
//! `cargo run -p gak-tests --bin gak-golden -- tests/golden postgres://postgres@127.0.0.1:5432/test`
//!
//! Run it only when a new stored format is introduced (to write that
//! format's golden files beside the old ones): the files of a released
//! format are never rewritten, since every later kernel must read them as
//! they are. See `tests/golden/README.md`.
use std::path::Path;
use std::sync::Arc;

use anyhow::{Context, Result, bail};
use gak::ManualClock;
use gak::blocking::Kernel;
use gak::store::postgres::PostgresBackend;
use gak_tests::golden;

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (out, dsn) = match args.as_slice() {
        [out] => (Path::new(out), None),
        [out, dsn] => (Path::new(out), Some(dsn.as_str())),
        _ => bail!("usage: gak-golden OUT_DIR [POSTGRES_DSN]"),
    };
    std::fs::create_dir_all(out)?;
    let mut caps = serde_json::Map::new();

    // SQLite: the file itself.
    let file = out.join(format!("format{}.sqlite", golden::FORMAT));
    let _ = std::fs::remove_file(&file);
    let url = format!("sqlite:{}", file.display());
    let clock = Arc::new(ManualClock::at(golden::T0));
    let backend = gak::blocking::run_future(gak::store::open(&url))?;
    let kernel = Kernel::with_backend(backend, clock)?;
    caps.insert("sqlite".into(), golden::write(&kernel).to_json());
    drop(kernel);
    golden::seal_sqlite(&file);
    println!("wrote {}", file.display());

    // PostgreSQL: a restore script of a schema written the same way.
    if let Some(dsn) = dsn {
        let schema = "gak_golden_writer";
        let backend = PostgresBackend::parse(dsn)?.with_schema(schema)?;
        gak::blocking::run_future(backend.drop_schema())?;
        gak::blocking::run_future(backend.ensure_schema())?;
        let clock = Arc::new(ManualClock::at(golden::T0));
        let kernel = Kernel::with_backend(Arc::new(backend), clock)?;
        caps.insert("postgres".into(), golden::write(&kernel).to_json());
        let script = golden::dump_postgres(&kernel, schema);
        drop(kernel);
        let backend = PostgresBackend::parse(dsn)?.with_schema(schema)?;
        gak::blocking::run_future(backend.drop_schema())?;
        let path = out.join(format!("format{}-postgres.sql", golden::FORMAT));
        std::fs::write(&path, script).context("write the dump")?;
        println!("wrote {}", path.display());
    }
    // Format 1's are `capabilities.json`, which must not be overwritten.
    let path = out.join(format!("format{}-capabilities.json", golden::FORMAT));
    let text = serde_json::to_string_pretty(&serde_json::Value::Object(caps))?;
    std::fs::write(&path, text + "\n")?;
    println!("wrote {}", path.display());
    Ok(())
}
