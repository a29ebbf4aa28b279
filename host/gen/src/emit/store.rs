//! The store facts every binding shares, once: the tables (WIT
//! `store.table` and the extra ones of `host/sql/store.json`), the SQLite
//! schema and settings, the store-URL grammar's fixed parts, the PostgreSQL
//! schema-name rule, and `prefix-end` (the upper bound of a prefix range
//! read). One generated module per host. (`host/sql/postgres.sql` is read
//! as it is by every host; the Python wheel's copy is checked byte for byte
//! by `host/python/tests/test_wheel.py`.)
use std::fmt::Write as _;
use std::path::Path;

use serde_json::Value;

use super::rustfmt;
use crate::{Contract, Output, banner};

/// The files besides `wit/` this module reads.
pub const INPUTS: &[&str] = &["host/sql/store.json"];

/// What `host/sql/store.json` says, checked.
struct Facts {
    /// Every table a binding provides: the kernel's, then the extra ones.
    tables: Vec<(String, String)>,
    sqlite_scheme: String,
    sqlite_suffixes: Vec<String>,
    sqlite_prefix: String,
    sqlite_schema: Vec<String>,
    journal_mode: String,
    busy_timeout_ms: u64,
    synchronous_default: String,
    synchronous: Vec<String>,
    pg_schemes: Vec<String>,
    pg_default_schema: String,
    pg_setup_lock: u64,
    pg_key_lock_name: String,
    pg_many_keys_from: u64,
    schema_first: String,
    schema_rest: String,
    schema_max_bytes: u64,
    schema_forbidden_prefix: String,
    memory_urls: Vec<String>,
    usage: String,
    /// The leading words of the statements a body may not run.
    transaction_control: Vec<String>,
    /// The calling convention's numbers, in the order emitted.
    protocol: Protocol,
}

/// `/protocol` of `host/sql/store.json`.
struct Protocol {
    connection_wait_ms: u64,
    max_connections: u64,
    retry_attempts: u64,
    retry_base_ms: u64,
    retry_max_ms: u64,
    value_bytes: u64,
    list_items: u64,
    call_bytes: u64,
    max_entropy: u64,
}

impl Protocol {
    /// (name, Rust type, value, doc) of every constant.
    fn constants(&self) -> [(&'static str, &'static str, u64, &'static str); 9] {
        [
            (
                "CONNECTION_WAIT_MS",
                "u64",
                self.connection_wait_ms,
                "How long a call waits for a free connection, and for a lock another transaction holds (HOSTS.md rule 15), unless told otherwise.",
            ),
            (
                "MAX_CONNECTIONS",
                "usize",
                self.max_connections,
                "Workers (instance and connection) a kernel keeps at most, unless told otherwise.",
            ),
            (
                "RETRY_ATTEMPTS",
                "u32",
                self.retry_attempts,
                "Runs of a call in all when the store keeps reporting conflicts (HOSTS.md rule 3).",
            ),
            (
                "RETRY_BASE_MS",
                "u64",
                self.retry_base_ms,
                "The first pause between runs.",
            ),
            (
                "RETRY_MAX_MS",
                "u64",
                self.retry_max_ms,
                "The longest pause between runs.",
            ),
            (
                "MAX_VALUE_BYTES",
                "usize",
                self.value_bytes,
                "The longest string or byte list a call may carry (HOSTS.md rule 16).",
            ),
            (
                "MAX_LIST_ITEMS",
                "usize",
                self.list_items,
                "The longest list a call may carry.",
            ),
            (
                "MAX_CALL_BYTES",
                "usize",
                self.call_bytes,
                "The most bytes of strings and byte lists one call may carry in all.",
            ),
            (
                "MAX_ENTROPY",
                "u8",
                self.max_entropy,
                "The most random bytes one store read may ask for (HOSTS.md rule 7).",
            ),
        ]
    }
}

fn load(c: &Contract, root: &Path) -> Result<Facts, String> {
    let path = root.join("host/sql/store.json");
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let json: Value =
        serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    let at = |pointer: &str| -> Result<&Value, String> {
        json.pointer(pointer)
            .ok_or_else(|| format!("host/sql/store.json: missing {pointer}"))
    };
    let text = |pointer: &str| -> Result<String, String> {
        at(pointer)?
            .as_str()
            .map(str::to_owned)
            .ok_or_else(|| format!("host/sql/store.json: {pointer} is not a string"))
    };
    let number = |pointer: &str| -> Result<u64, String> {
        at(pointer)?
            .as_u64()
            .ok_or_else(|| format!("host/sql/store.json: {pointer} is not a number"))
    };
    let texts = |pointer: &str| -> Result<Vec<String>, String> {
        at(pointer)?
            .as_array()
            .and_then(|items| {
                items
                    .iter()
                    .map(|i| i.as_str().map(str::to_owned))
                    .collect()
            })
            .ok_or_else(|| format!("host/sql/store.json: {pointer} is not a list of strings"))
    };
    let mut tables: Vec<(String, String)> = c
        .named("table")
        .cases()
        .iter()
        .map(|t| (t.name.clone(), t.docs.replace('\n', " ")))
        .collect();
    for extra in at("/tables/extra")?
        .as_array()
        .ok_or("host/sql/store.json: /tables/extra is not a list")?
    {
        let name = extra["name"]
            .as_str()
            .ok_or("an extra table without a name")?;
        let docs = extra["docs"].as_str().unwrap_or_default();
        if tables.iter().any(|(t, _)| t == name) {
            return Err(format!("table {name} is both in the WIT and extra"));
        }
        tables.push((name.to_owned(), docs.to_owned()));
    }
    for (name, _) in &tables {
        if !name.chars().all(|ch| ch.is_ascii_lowercase() || ch == '_') {
            return Err(format!(
                "table {name}: names are spliced into SQL, so only a-z and _"
            ));
        }
    }
    let ddl = text("/sqlite/table-ddl")?;
    let synchronous = texts("/sqlite/synchronous/values")?;
    let synchronous_default = text("/sqlite/synchronous/default")?;
    if !synchronous.contains(&synchronous_default) {
        return Err("the default synchronous mode is not one of the modes".into());
    }
    Ok(Facts {
        sqlite_schema: tables
            .iter()
            .map(|(t, _)| ddl.replace("{table}", t))
            .collect(),
        tables,
        sqlite_scheme: text("/sqlite/scheme")?,
        sqlite_suffixes: texts("/sqlite/bare-path-suffixes")?,
        sqlite_prefix: text("/sqlite/table-prefix")?,
        journal_mode: text("/sqlite/journal-mode")?,
        busy_timeout_ms: number("/sqlite/busy-timeout-ms")?,
        synchronous_default,
        synchronous,
        pg_schemes: texts("/postgres/schemes")?,
        pg_default_schema: text("/postgres/default-schema")?,
        pg_setup_lock: number("/postgres/setup-lock")?,
        pg_key_lock_name: text("/postgres/key-lock-name")?,
        pg_many_keys_from: number("/postgres/many-keys-from")?,
        schema_first: text("/postgres/schema/first")?,
        schema_rest: text("/postgres/schema/rest")?,
        schema_max_bytes: number("/postgres/schema/max-bytes")?,
        schema_forbidden_prefix: text("/postgres/schema/forbidden-prefix")?,
        memory_urls: texts("/memory/urls")?,
        usage: text("/usage")?,
        transaction_control: texts("/bodies/transaction-control")?,
        protocol: Protocol {
            connection_wait_ms: number("/protocol/connection-wait-ms")?,
            max_connections: number("/protocol/max-connections")?,
            retry_attempts: number("/protocol/retry/attempts")?,
            retry_base_ms: number("/protocol/retry/base-ms")?,
            retry_max_ms: number("/protocol/retry/max-ms")?,
            value_bytes: number("/protocol/limits/value-bytes")?,
            list_items: number("/protocol/limits/list-items")?,
            call_bytes: number("/protocol/limits/call-bytes")?,
            max_entropy: number("/protocol/max-entropy")?,
        },
    })
}

pub fn emit(c: &Contract, root: &Path) -> Result<Vec<Output>, String> {
    let facts = load(c, root)?;
    Ok(vec![
        Output {
            path: "host/rust/src/store/facts.rs".into(),
            text: rustfmt(root, &rust(c, &facts))?,
        },
        Output {
            path: "host/python/src/gak/stores/_facts.py".into(),
            text: python(c, &facts),
        },
        Output {
            path: "host/js/src/store/facts.js".into(),
            text: js(c, &facts),
        },
        Output {
            path: "host/go/facts_gen.go".into(),
            text: go(c, &facts),
        },
    ])
}

fn quoted(items: &[String]) -> String {
    items
        .iter()
        .map(|s| format!("{s:?}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A string literal every target language reads the same way (the facts
/// are ASCII; `{:?}` escapes quotes and backslashes as they all do).
fn lit(s: &str) -> String {
    assert!(s.is_ascii(), "store facts are ASCII: {s:?}");
    format!("{s:?}")
}

fn rust(c: &Contract, f: &Facts) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "// {}", banner(c));
    o.push_str(
        "//! The store facts every binding shares (`host/sql/store.json` and the WIT's\n\
         //! `store.table`), as constants.\n\n",
    );
    let _ = writeln!(
        o,
        "/// The tables a binding provides, in this order: the kernel's (WIT\n\
         /// `store.table`), then:\n{}pub const TABLES: [&str; {}] = [{}];\n",
        f.tables
            .iter()
            .skip(c.tables().len())
            .map(|(t, d)| format!("/// - `{t}`: {d}.\n"))
            .collect::<String>(),
        f.tables.len(),
        quoted(&f.tables.iter().map(|(t, _)| t.clone()).collect::<Vec<_>>())
    );
    let _ = writeln!(
        o,
        "/// The prefix of every SQLite table's name (`gak_tasks`).\npub const SQLITE_TABLE_PREFIX: &str = {};\n",
        lit(&f.sqlite_prefix)
    );
    let _ = writeln!(
        o,
        "/// The SQLite schema: one statement per table, each idempotent.\npub const SQLITE_SCHEMA: &str = {};\n",
        lit(&f.sqlite_schema.concat())
    );
    let _ = writeln!(
        o,
        "/// `PRAGMA journal_mode`.\npub const SQLITE_JOURNAL_MODE: &str = {};\n\n\
         /// How long a SQLite connection waits for the write lock.\npub const SQLITE_BUSY_TIMEOUT_MS: u64 = {};\n\n\
         /// `sqlite:PATH?synchronous=MODE`: the modes.\npub const SQLITE_SYNCHRONOUS: [&str; {}] = [{}];\n\n\
         /// The synchronous mode of a SQLite URL without `?synchronous=`.\n\
         pub const SQLITE_SYNCHRONOUS_DEFAULT: &str = {};\n\n\
         /// The SQLite URL scheme.\npub const SQLITE_SCHEME: &str = {};\n\n\
         /// The suffixes that make a bare path a SQLite file.\n\
         pub const SQLITE_BARE_SUFFIXES: [&str; {}] = [{}];\n",
        lit(&f.journal_mode),
        f.busy_timeout_ms,
        f.synchronous.len(),
        quoted(&f.synchronous),
        lit(&f.synchronous_default),
        lit(&f.sqlite_scheme),
        f.sqlite_suffixes.len(),
        quoted(&f.sqlite_suffixes),
    );
    let _ = writeln!(
        o,
        "/// The PostgreSQL URL schemes.\npub const POSTGRES_SCHEMES: [&str; {}] = [{}];\n\n\
         /// The schema of a URL without `?schema=`.\npub const POSTGRES_DEFAULT_SCHEMA: &str = {};\n\n\
         /// The advisory lock every host takes around its schema set-up.\npub const POSTGRES_SETUP_LOCK: i64 = {};\n\n\
         /// The name of a key's advisory lock, hashed by the server\n/// (`hashtextextended(name, 0)`).\n\
         pub const POSTGRES_KEY_LOCK_NAME: &str = {};\n\n\
         /// From how many keys a host sends a point read or a write set as\n\
         /// `gak_read_many_v1` / `gak_write_many_v1` (one statement per table)\n\
         /// instead of `gak_read_v1` / `gak_write_v1` (one per key).\n\
         pub const POSTGRES_MANY_KEYS_FROM: usize = {};\n",
        f.pg_schemes.len(),
        quoted(&f.pg_schemes),
        lit(&f.pg_default_schema),
        f.pg_setup_lock,
        lit(&f.pg_key_lock_name),
        f.pg_many_keys_from,
    );
    let _ = writeln!(
        o,
        "/// `memory:` URLs.\npub const MEMORY_URLS: [&str; {}] = [{}];\n\n\
         /// The store URLs a host accepts, for messages.\npub const USAGE: &str = {};\n",
        f.memory_urls.len(),
        quoted(&f.memory_urls),
        lit(&f.usage)
    );
    let _ = writeln!(
        o,
        "/// The leading words (upper case) of the statements a sink body may not\n\
         /// run through a lent driver handle: they begin, end or split the\n\
         /// kernel's transaction (HOSTS.md rule 12).\n\
         pub const TRANSACTION_CONTROL: [&str; {}] = [{}];\n",
        f.transaction_control.len(),
        quoted(&f.transaction_control),
    );
    for (name, ty, value, doc) in f.protocol.constants() {
        let _ = writeln!(o, "/// {doc}\npub const {name}: {ty} = {value};\n");
    }
    let _ = writeln!(
        o,
        "/// A PostgreSQL schema name gak accepts: a plain lowercase identifier\n\
         /// (first {first}, then {rest}; at most {max} bytes; not `{forbidden}*`),\n\
         /// so it can be quoted safely and never names another schema.\n\
         pub fn valid_schema(name: &str) -> bool {{\n\
             let mut chars = name.chars();\n\
             chars.next().is_some_and(|c| {first_lit}.contains(c))\n\
                 && chars.all(|c| {rest_lit}.contains(c))\n\
                 && name.len() <= {max}\n\
                 && !name.starts_with({forbidden_lit})\n\
         }}\n",
        first = f.schema_first,
        rest = f.schema_rest,
        max = f.schema_max_bytes,
        forbidden = f.schema_forbidden_prefix,
        first_lit = lit(&f.schema_first),
        rest_lit = lit(&f.schema_rest),
        forbidden_lit = lit(&f.schema_forbidden_prefix),
    );
    o.push_str(
        "/// Which binding a store URL names.\n\
         #[derive(Clone, Copy, Debug, PartialEq, Eq)]\n\
         pub enum StoreKind {\n\
             /// `memory:`.\n\
             Memory,\n\
             /// `sqlite:PATH`, or a bare path with a SQLite suffix.\n\
             Sqlite,\n\
             /// `postgres://…`.\n\
             Postgres,\n\
         }\n\n\
         /// Which binding a store URL names; none for a URL no binding takes.\n\
         pub fn store_kind(url: &str) -> Option<StoreKind> {\n\
             if POSTGRES_SCHEMES.iter().any(|s| url.starts_with(s)) {\n\
                 Some(StoreKind::Postgres)\n\
             } else if MEMORY_URLS.contains(&url) {\n\
                 Some(StoreKind::Memory)\n\
             } else if url.starts_with(SQLITE_SCHEME) || SQLITE_BARE_SUFFIXES.iter().any(|s| url.ends_with(s)) {\n\
                 Some(StoreKind::Sqlite)\n\
             } else {\n\
                 None\n\
             }\n\
         }\n\n",
    );
    o.push_str(
        "/// The smallest string above every string that starts with `prefix`, for\n\
         /// a range read `prefix <= key < end`; none when no such string exists (the\n\
         /// empty prefix, or one made only of U+10FFFF). Incrementing the last code\n\
         /// point works because UTF-8 byte order is code point order and no\n\
         /// encoding is a prefix of another; the surrogates are skipped.\n\
         pub fn prefix_end(prefix: &str) -> Option<String> {\n\
             let mut chars: Vec<char> = prefix.chars().collect();\n\
             while let Some(last) = chars.pop() {\n\
                 let next = match last {\n\
                     '\\u{D7FF}' => Some('\\u{E000}'),\n\
                     c => char::from_u32(c as u32 + 1),\n\
                 };\n\
                 if let Some(next) = next {\n\
                     chars.push(next);\n\
                     return Some(chars.into_iter().collect());\n\
                 }\n\
             }\n\
             None\n\
         }\n",
    );
    o
}

fn python(c: &Contract, f: &Facts) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "# {}", banner(c));
    o.push_str(
        "\"\"\"The store facts every binding shares (``host/sql/store.json`` and the WIT's\n\
         ``store.table``), as constants.\"\"\"\n\nfrom __future__ import annotations\n\n\
         from typing import Optional\n\n",
    );
    let py_tuple = |items: &[String]| -> String {
        if items.len() == 1 {
            format!("({},)", lit(&items[0]))
        } else {
            format!(
                "({})",
                items.iter().map(|s| lit(s)).collect::<Vec<_>>().join(", ")
            )
        }
    };
    let _ = writeln!(
        o,
        "#: The tables a binding provides, in this order: the kernel's (WIT\n\
         #: ``store.table``), then:\n{}TABLES: tuple[str, ...] = (\n{}\n)\n",
        f.tables
            .iter()
            .skip(c.tables().len())
            .map(|(t, d)| format!("#: - ``{t}``: {d}.\n"))
            .collect::<String>(),
        f.tables
            .iter()
            .map(|(t, _)| format!("    {},", lit(t)))
            .collect::<Vec<_>>()
            .join("\n")
    );
    let _ = writeln!(
        o,
        "#: The prefix of every SQLite table's name (``gak_tasks``).\nSQLITE_TABLE_PREFIX = {}\n\n\
         #: The SQLite schema: one statement per table, each idempotent.\nSQLITE_SCHEMA = (\n{}\n)\n\n\
         #: ``PRAGMA journal_mode``.\nSQLITE_JOURNAL_MODE = {}\n\n\
         #: How long a SQLite connection waits for the write lock.\nSQLITE_BUSY_TIMEOUT_MS = {}\n\n\
         #: ``sqlite:PATH?synchronous=MODE``: the modes, and the default.\nSQLITE_SYNCHRONOUS: tuple[str, ...] = {}\n\
         SQLITE_SYNCHRONOUS_DEFAULT = {}\n\n\
         #: The SQLite URL scheme, and the suffixes that make a bare path a SQLite file.\n\
         SQLITE_SCHEME = {}\nSQLITE_BARE_SUFFIXES: tuple[str, ...] = {}\n",
        lit(&f.sqlite_prefix),
        f.sqlite_schema
            .iter()
            .map(|s| format!("    {}", lit(s)))
            .collect::<Vec<_>>()
            .join("\n"),
        lit(&f.journal_mode),
        f.busy_timeout_ms,
        py_tuple(&f.synchronous),
        lit(&f.synchronous_default),
        lit(&f.sqlite_scheme),
        py_tuple(&f.sqlite_suffixes),
    );
    let _ = writeln!(
        o,
        "#: The PostgreSQL URL schemes.\nPOSTGRES_SCHEMES: tuple[str, ...] = {}\n\n\
         #: The schema of a URL without ``?schema=``.\nPOSTGRES_DEFAULT_SCHEMA = {}\n\n\
         #: The advisory lock every host takes around its schema set-up.\nPOSTGRES_SETUP_LOCK = {}\n\n\
         #: The name of a key's advisory lock, hashed by the server\n#: (``hashtextextended(name, 0)``).\n\
         POSTGRES_KEY_LOCK_NAME = {}\n\n\
         #: From how many keys a host sends a point read or a write set as\n\
         #: ``gak_read_many_v1`` / ``gak_write_many_v1`` (one statement per table)\n\
         #: instead of ``gak_read_v1`` / ``gak_write_v1`` (one per key).\n\
         POSTGRES_MANY_KEYS_FROM = {}\n\n\
         #: ``memory:`` URLs.\nMEMORY_URLS: tuple[str, ...] = {}\n\n\
         #: The store URLs a host accepts, for messages.\nUSAGE = {}\n\n\
         #: The leading words (upper case) of the statements a sink body may not run\n\
         #: through a lent driver handle: they begin, end or split the kernel's\n\
         #: transaction (HOSTS.md rule 12).\n\
         TRANSACTION_CONTROL: tuple[str, ...] = {}\n",
        py_tuple(&f.pg_schemes),
        lit(&f.pg_default_schema),
        f.pg_setup_lock,
        lit(&f.pg_key_lock_name),
        f.pg_many_keys_from,
        py_tuple(&f.memory_urls),
        lit(&f.usage),
        py_tuple(&f.transaction_control),
    );
    for (name, _, value, doc) in f.protocol.constants() {
        let _ = writeln!(o, "#: {doc}\n{name} = {value}\n");
    }
    o.push('\n');
    let _ = writeln!(
        o,
        "def valid_schema(name: str) -> bool:\n\
         \x20   \"\"\"A PostgreSQL schema name gak accepts: a plain lowercase identifier\n\
         \x20   (first {first}, then {rest}; at most {max} bytes; not ``{forbidden}*``),\n\
         \x20   so it can be quoted safely and never names another schema.\"\"\"\n\
         \x20   return (\n\
         \x20       name[:1] != \"\"\n\
         \x20       and name[0] in {first_lit}\n\
         \x20       and all(c in {rest_lit} for c in name[1:])\n\
         \x20       and len(name.encode()) <= {max}\n\
         \x20       and not name.startswith({forbidden_lit})\n\
         \x20   )\n\n",
        first = f.schema_first,
        rest = f.schema_rest,
        max = f.schema_max_bytes,
        forbidden = f.schema_forbidden_prefix,
        first_lit = lit(&f.schema_first),
        rest_lit = lit(&f.schema_rest),
        forbidden_lit = lit(&f.schema_forbidden_prefix),
    );
    o.push_str(
        "def store_kind(url: str) -> Optional[str]:\n\
         \x20   \"\"\"Which binding a store URL names: ``memory``, ``sqlite`` or\n\
         \x20   ``postgres``; ``None`` for a URL no binding takes.\"\"\"\n\
         \x20   if url.startswith(POSTGRES_SCHEMES):\n\
         \x20       return \"postgres\"\n\
         \x20   if url in MEMORY_URLS:\n\
         \x20       return \"memory\"\n\
         \x20   if url.startswith(SQLITE_SCHEME) or url.endswith(SQLITE_BARE_SUFFIXES):\n\
         \x20       return \"sqlite\"\n\
         \x20   return None\n\n\n",
    );
    o.push_str(
        "def prefix_end(prefix: str) -> Optional[str]:\n\
         \x20   \"\"\"The smallest string above every string starting with ``prefix``, for a\n\
         \x20   range read ``prefix <= key < end``; ``None`` when there is none (the empty\n\
         \x20   prefix, or one made only of U+10FFFF). Code point order is UTF-8 byte\n\
         \x20   order, so this bounds the same keys in every binding; the surrogates\n\
         \x20   are skipped.\"\"\"\n\
         \x20   chars = list(prefix)\n\
         \x20   while chars:\n\
         \x20       last = ord(chars.pop())\n\
         \x20       if last == 0xD7FF:\n\
         \x20           chars.append(\"\\ue000\")\n\
         \x20           return \"\".join(chars)\n\
         \x20       if last < 0x10FFFF:\n\
         \x20           chars.append(chr(last + 1))\n\
         \x20           return \"\".join(chars)\n\
         \x20   return None\n",
    );
    o
}

fn js(c: &Contract, f: &Facts) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "// {}", banner(c));
    o.push_str(
        "// The store facts every binding shares (host/sql/store.json and the WIT's\n\
         // `store.table`), as constants.\n\n",
    );
    let q = |s: &str| {
        assert!(s.is_ascii(), "store facts are ASCII: {s:?}");
        format!("'{}'", s.replace('\\', "\\\\").replace('\'', "\\'"))
    };
    let js_list = |items: &[String]| -> String {
        format!(
            "Object.freeze([{}])",
            items.iter().map(|s| q(s)).collect::<Vec<_>>().join(", ")
        )
    };
    let _ = writeln!(
        o,
        "/**\n * The tables a binding provides, in this order: the kernel's (WIT\n * `store.table`), then:\n{} */\nexport const TABLES = Object.freeze([\n{}\n]);\n",
        f.tables
            .iter()
            .skip(c.tables().len())
            .map(|(t, d)| format!(" * - `{t}`: {d}.\n"))
            .collect::<String>(),
        f.tables
            .iter()
            .map(|(t, _)| format!("  {},", q(t)))
            .collect::<Vec<_>>()
            .join("\n")
    );
    let _ = writeln!(
        o,
        "/** The prefix of every SQLite table's name (`gak_tasks`). */\nexport const SQLITE_TABLE_PREFIX = {};\n\n\
         /** The SQLite schema: one statement per table, each idempotent. */\nexport const SQLITE_SCHEMA =\n{};\n\n\
         /** `PRAGMA journal_mode`. */\nexport const SQLITE_JOURNAL_MODE = {};\n\n\
         /** How long a SQLite connection waits for the write lock. */\nexport const SQLITE_BUSY_TIMEOUT_MS = {};\n\n\
         /** `sqlite:PATH?synchronous=MODE`: the modes, and the default. */\nexport const SQLITE_SYNCHRONOUS = {};\n\
         export const SQLITE_SYNCHRONOUS_DEFAULT = {};\n\n\
         /** The SQLite URL scheme, and the suffixes that make a bare path a SQLite file. */\n\
         export const SQLITE_SCHEME = {};\nexport const SQLITE_BARE_SUFFIXES = {};\n",
        q(&f.sqlite_prefix),
        f.sqlite_schema
            .iter()
            .map(|s| format!("  {}", q(s)))
            .collect::<Vec<_>>()
            .join(" +\n"),
        q(&f.journal_mode),
        f.busy_timeout_ms,
        js_list(&f.synchronous),
        q(&f.synchronous_default),
        q(&f.sqlite_scheme),
        js_list(&f.sqlite_suffixes),
    );
    let _ = writeln!(
        o,
        "/** The PostgreSQL URL schemes. */\nexport const POSTGRES_SCHEMES = {};\n\n\
         /** The schema of a URL without `?schema=`. */\nexport const POSTGRES_DEFAULT_SCHEMA = {};\n\n\
         /** The advisory lock every host takes around its schema set-up. */\nexport const POSTGRES_SETUP_LOCK = {};\n\n\
         /** The name of a key's advisory lock, hashed by the server (`hashtextextended(name, 0)`). */\n\
         export const POSTGRES_KEY_LOCK_NAME = {};\n\n\
         /**\n * From how many keys a host sends a point read or a write set as\n\
         \x20* `gak_read_many_v1` / `gak_write_many_v1` (one statement per table)\n\
         \x20* instead of `gak_read_v1` / `gak_write_v1` (one per key).\n */\n\
         export const POSTGRES_MANY_KEYS_FROM = {};\n\n\
         /** `memory:` URLs. */\nexport const MEMORY_URLS = {};\n\n\
         /** The store URLs a host accepts, for messages. */\nexport const USAGE = {};\n\n\
         /**\n * The leading words (upper case) of the statements a sink body may not run\n\
         \x20* through a lent driver handle: they begin, end or split the kernel's\n\
         \x20* transaction (HOSTS.md rule 12).\n */\n\
         export const TRANSACTION_CONTROL = {};\n",
        js_list(&f.pg_schemes),
        q(&f.pg_default_schema),
        f.pg_setup_lock,
        q(&f.pg_key_lock_name),
        f.pg_many_keys_from,
        js_list(&f.memory_urls),
        q(&f.usage),
        js_list(&f.transaction_control),
    );
    for (name, _, value, doc) in f.protocol.constants() {
        let _ = writeln!(o, "/** {doc} */\nexport const {name} = {value};\n");
    }
    let _ = writeln!(
        o,
        "/**\n * A PostgreSQL schema name gak accepts: a plain lowercase identifier (first\n * {first}, then {rest}; at most {max} bytes; not `{forbidden}*`),\n * so it can be quoted safely and never names another schema.\n */\n\
         export function validSchema(name) {{\n\
         \x20 if (typeof name !== 'string' || name.length === 0) return false;\n\
         \x20 if (!{first_lit}.includes(name[0])) return false;\n\
         \x20 for (let i = 1; i < name.length; i++) if (!{rest_lit}.includes(name[i])) return false;\n\
         \x20 return Buffer.byteLength(name) <= {max} && !name.startsWith({forbidden_lit});\n\
         }}\n",
        first = f.schema_first,
        rest = f.schema_rest,
        max = f.schema_max_bytes,
        forbidden = f.schema_forbidden_prefix,
        first_lit = q(&f.schema_first),
        rest_lit = q(&f.schema_rest),
        forbidden_lit = q(&f.schema_forbidden_prefix),
    );
    o.push_str(
        "/**\n * Which binding a store URL names: `memory`, `sqlite` or `postgres`;\n\
         \x20* undefined for a URL no binding takes.\n */\n\
         export function storeKind(url) {\n\
         \x20 if (POSTGRES_SCHEMES.some((s) => url.startsWith(s))) return 'postgres';\n\
         \x20 if (MEMORY_URLS.includes(url)) return 'memory';\n\
         \x20 if (url.startsWith(SQLITE_SCHEME) || SQLITE_BARE_SUFFIXES.some((s) => url.endsWith(s))) return 'sqlite';\n\
         \x20 return undefined;\n\
         }\n\n",
    );
    o.push_str(
        "/**\n * The smallest string above every string that starts with `prefix`, for a\n\
         \x20* range read `prefix <= key < end`; undefined when none exists (the empty\n\
         \x20* prefix, or one made only of U+10FFFF): increment the last code point,\n\
         \x20* skipping the surrogates.\n */\n\
         export function prefixEnd(prefix) {\n\
         \x20 const points = Array.from(prefix, (c) => c.codePointAt(0));\n\
         \x20 while (points.length > 0) {\n\
         \x20   const last = points.pop();\n\
         \x20   if (last < 0x10ffff) {\n\
         \x20     points.push(last === 0xd7ff ? 0xe000 : last + 1);\n\
         \x20     return String.fromCodePoint(...points);\n\
         \x20   }\n\
         \x20 }\n\
         \x20 return undefined;\n\
         }\n",
    );
    o
}

/// Go: the protocol's numbers and the SQLite busy timeout, unexported (the
/// Go package's defaults and bounds; the store bindings are libgak's).
fn go(c: &Contract, f: &Facts) -> String {
    let mut o = super::go::head(c);
    o.push_str(
        "\n// The store facts every binding shares (host/sql/store.json) that the Go\n\
         // package uses itself.\n\npackage gak\n\nconst (\n",
    );
    let lower =
        |screaming: &str| super::go::unexported(&screaming.to_lowercase().replace('_', "-"));
    for (name, _, value, doc) in f.protocol.constants() {
        let _ = writeln!(o, "\t// {doc}\n\t{} = {value}", lower(name));
    }
    let _ = writeln!(
        o,
        "\t// How long a SQLite connection waits for the write lock.\n\t{} = {}",
        lower("SQLITE_BUSY_TIMEOUT_MS"),
        f.busy_timeout_ms
    );
    o.push_str(")\n");
    o
}
