//! A TCP proxy in front of PostgreSQL that loses a commit's answer for
//! real: it forwards the client's `COMMIT`, lets the server commit and
//! answer, withholds the answer, and cuts both sockets. The client sees a
//! closed connection; the server has committed. That is the ambiguous
//! commit real deployments meet (a network partition, a load balancer
//! timing out, a pod killed) and the kernel must never re-run such a call.
//!
//! It reads the wire protocol (v3) without TLS: the kernel must connect
//! through it with `sslmode=disable` ([`CommitCutter::config`] does).
//!
//! Only the `COMMIT` of a transaction that wrote is cut: the binding ends a
//! read-only transaction with a `COMMIT` it does not wait for, whose lost
//! answer would be no ambiguity at all. A transaction wrote when it bound
//! an `INSERT`, `UPDATE` or `DELETE` statement or a call of the write-set
//! function `gak_write_v1` (the proxy remembers which prepared statements
//! are writes from their `Parse` message).
use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use gak::tokio_postgres::Config;
use gak::tokio_postgres::config::{Host, SslMode};

/// What the proxy saw and did, shared with its threads.
#[derive(Debug, Default)]
struct Shared {
    armed: AtomicBool,
    /// `COMMIT`s of writing transactions forwarded (answered or not).
    commits: AtomicUsize,
    /// Connections cut after a withheld answer.
    cuts: AtomicUsize,
    /// The command tags of the withheld answers (`COMMIT` when the server
    /// committed, `ROLLBACK` when it had aborted the transaction).
    withheld: Mutex<Vec<String>>,
    /// Every statement the clients had the server run, in order: simple
    /// queries, and each `Execute` as the SQL its portal was bound to (what
    /// the server log shows with `log_statement = all`).
    statements: Mutex<Vec<String>>,
    /// Milliseconds the `COMMIT` / `ROLLBACK` of a transaction that wrote
    /// nothing is held before it is forwarded (a slow network on the one
    /// message a binding may send without waiting for its answer).
    slow_quiet_ends: std::sync::atomic::AtomicU64,
}

/// The proxy; it stops accepting when dropped (open connections die with
/// their peers).
#[derive(Debug)]
pub struct CommitCutter {
    port: u16,
    upstream: Config,
    shared: Arc<Shared>,
}

impl CommitCutter {
    /// Listen on a free local port, forwarding to the server of `dsn` (a
    /// TCP host; a Unix socket cannot be proxied).
    pub fn start(dsn: &str) -> CommitCutter {
        let upstream = Config::from_str(dsn).expect("a PostgreSQL DSN");
        let host = match upstream.get_hosts().first() {
            Some(Host::Tcp(h)) => h.clone(),
            other => panic!("the commit-cutting proxy needs a TCP host, not {other:?}"),
        };
        let port = upstream.get_ports().first().copied().unwrap_or(5432);
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the proxy");
        let local = listener.local_addr().expect("proxy address").port();
        let shared = Arc::new(Shared::default());
        let accepted = shared.clone();
        std::thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else { return };
                let Ok(server) = TcpStream::connect((host.as_str(), port)) else {
                    continue;
                };
                connection(client, server, accepted.clone());
            }
        });
        CommitCutter {
            port: local,
            upstream,
            shared,
        }
    }

    /// The upstream's user, password and database, at the proxy, without
    /// TLS.
    pub fn config(&self) -> Config {
        let mut config = Config::new();
        config
            .host("127.0.0.1")
            .port(self.port)
            .ssl_mode(SslMode::Disable);
        if let Some(user) = self.upstream.get_user() {
            config.user(user);
        }
        if let Some(password) = self.upstream.get_password() {
            config.password(password);
        }
        if let Some(db) = self.upstream.get_dbname() {
            config.dbname(db);
        }
        config
    }

    /// The next `COMMIT` (on any connection) loses its answer.
    pub fn arm(&self) {
        self.shared.armed.store(true, Ordering::SeqCst);
    }

    /// From now on, hold the end of every transaction that wrote nothing
    /// for `ms` before forwarding it (0: forward at once again).
    pub fn slow_quiet_ends(&self, ms: u64) {
        self.shared.slow_quiet_ends.store(ms, Ordering::SeqCst);
    }

    /// `COMMIT`s forwarded so far.
    pub fn commits(&self) -> usize {
        self.shared.commits.load(Ordering::SeqCst)
    }

    /// Connections cut after a withheld answer so far.
    pub fn cuts(&self) -> usize {
        self.shared.cuts.load(Ordering::SeqCst)
    }

    /// The statements run so far (see [`Shared::statements`]).
    pub fn statements(&self) -> Vec<String> {
        self.shared
            .statements
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// The command tags of the answers withheld so far.
    pub fn withheld(&self) -> Vec<String> {
        self.shared
            .withheld
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}

/// One message: its type byte (none for the startup message) and body.
fn read_message(from: &mut TcpStream, typed: bool) -> Option<(Option<u8>, Vec<u8>)> {
    let kind = if typed {
        let mut k = [0u8; 1];
        from.read_exact(&mut k).ok()?;
        Some(k[0])
    } else {
        None
    };
    let mut len = [0u8; 4];
    from.read_exact(&mut len).ok()?;
    let len = u32::from_be_bytes(len) as usize;
    let mut body = vec![0u8; len.checked_sub(4)?];
    from.read_exact(&mut body).ok()?;
    Some((kind, body))
}

fn write_message(to: &mut TcpStream, kind: Option<u8>, body: &[u8]) -> Option<()> {
    let mut out = Vec::with_capacity(body.len() + 5);
    out.extend(kind);
    out.extend_from_slice(&(body.len() as u32 + 4).to_be_bytes());
    out.extend_from_slice(body);
    to.write_all(&out).ok()
}

/// The NUL-terminated strings at the start of a message body.
fn cstrings(body: &[u8], n: usize) -> Vec<String> {
    body.split(|b| *b == 0)
        .take(n)
        .map(|s| String::from_utf8_lossy(s).into_owned())
        .collect()
}

/// Does this client message make the transaction a writing one? `known`
/// collects the names of prepared write statements.
fn writes(kind: Option<u8>, body: &[u8], known: &mut std::collections::HashSet<String>) -> bool {
    let is_write = |sql: &str| {
        let sql = sql.trim_start().to_ascii_uppercase();
        sql.starts_with("INSERT")
            || sql.starts_with("DELETE")
            || sql.starts_with("UPDATE")
            || sql.contains(".GAK_WRITE_")
    };
    match kind {
        Some(b'P') => {
            let parts = cstrings(body, 2);
            if parts.len() == 2 && is_write(&parts[1]) {
                known.insert(parts[0].clone());
            }
            false
        }
        Some(b'B') => {
            let parts = cstrings(body, 2);
            parts.len() == 2 && known.contains(&parts[1])
        }
        Some(b'Q') => is_write(&String::from_utf8_lossy(body)),
        _ => false,
    }
}

fn cut(streams: &[&TcpStream]) {
    for s in streams {
        let _ = s.shutdown(Shutdown::Both);
    }
}

fn connection(client: TcpStream, server: TcpStream, shared: Arc<Shared>) {
    let cutting = Arc::new(AtomicBool::new(false));
    let (Ok(mut c_in), Ok(mut s_out)) = (client.try_clone(), server.try_clone()) else {
        return;
    };
    let (mut s_in, mut c_out) = (server, client);
    let (up_shared, up_cutting) = (shared.clone(), cutting.clone());
    // client -> server
    std::thread::spawn(move || {
        let mut typed = false;
        let (mut write_statements, mut wrote) = (std::collections::HashSet::new(), false);
        let mut prepared: std::collections::HashMap<String, String> = Default::default();
        let mut bound = String::new();
        while let Some((kind, body)) = read_message(&mut c_in, typed) {
            typed = true;
            wrote |= writes(kind, &body, &mut write_statements);
            let ran = match kind {
                Some(b'P') => {
                    if let [name, sql] = cstrings(&body, 2).as_slice() {
                        prepared.insert(name.clone(), sql.clone());
                    }
                    None
                }
                Some(b'B') => {
                    if let [_, statement] = cstrings(&body, 2).as_slice() {
                        bound = prepared.get(statement).cloned().unwrap_or_default();
                    }
                    None
                }
                Some(b'E') => Some(bound.clone()),
                Some(b'Q') => Some(
                    String::from_utf8_lossy(body.strip_suffix(&[0]).unwrap_or(&body)).into_owned(),
                ),
                _ => None,
            };
            if let Some(sql) = ran {
                up_shared
                    .statements
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .push(sql);
            }
            let ends = kind == Some(b'Q')
                && (body.starts_with(b"COMMIT") || body.starts_with(b"ROLLBACK"));
            let commit = kind == Some(b'Q') && body.starts_with(b"COMMIT") && wrote;
            if ends && !wrote {
                let ms = up_shared.slow_quiet_ends.load(Ordering::SeqCst);
                if ms > 0 {
                    std::thread::sleep(std::time::Duration::from_millis(ms));
                }
            }
            if ends {
                wrote = false;
            }
            if commit {
                up_shared.commits.fetch_add(1, Ordering::SeqCst);
                if up_shared.armed.swap(false, Ordering::SeqCst) {
                    // Set before forwarding: the answer cannot overtake it.
                    up_cutting.store(true, Ordering::SeqCst);
                }
            }
            if write_message(&mut s_out, kind, &body).is_none() {
                break;
            }
        }
        cut(&[&c_in, &s_out]);
    });
    // server -> client
    std::thread::spawn(move || {
        let mut tag = String::new();
        while let Some((kind, body)) = read_message(&mut s_in, true) {
            if cutting.load(Ordering::SeqCst) {
                if kind == Some(b'C') {
                    tag = String::from_utf8_lossy(body.strip_suffix(&[0]).unwrap_or(&body))
                        .into_owned();
                }
                // A pipelined client sends its last writes in the same
                // batch as COMMIT: their answers (each ending in 'Z') come
                // first and are withheld too. Only the 'Z' after COMMIT's
                // own tag means the COMMIT was answered.
                if kind == Some(b'Z') && (tag == "COMMIT" || tag == "ROLLBACK") {
                    // The server has answered the COMMIT in full: it is
                    // durable there. The client never hears of it.
                    shared
                        .withheld
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .push(std::mem::take(&mut tag));
                    shared.cuts.fetch_add(1, Ordering::SeqCst);
                    break;
                }
                continue;
            }
            if write_message(&mut c_out, kind, &body).is_none() {
                break;
            }
        }
        cut(&[&s_in, &c_out]);
    });
}
