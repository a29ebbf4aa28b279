//! The host-protocol fuzzers' cases (`tests/host-protocol/fuzz/`), generated
//! once here from a seed and replayed by every host's suite, so a new host
//! inherits them (README there).
//!
//! - **SQL texts** for a sink body's lent driver handle: statements, comments
//!   of both kinds (`--` ended by `\n`, `\r` or `\r\n`; `/* */`, nested),
//!   quoted strings and identifiers, `E'…'` and dollar-quoted strings, empty
//!   statements, letter case, Unicode spaces, several statements — each
//!   labelled, per database, with what a host must do with it. The label is
//!   known by construction (the generator decides what PostgreSQL sees) and
//!   checked against the real server by `tests/tests/host_fuzz.rs`.
//! - **Passwords** over every printable ASCII byte, each carrying markers
//!   that no message may contain, and the URL templates they go into.
//! - **Retry sequences**: attempts that meet a conflict, then one that does
//!   not; the call answers what its last attempt did.
//!
//! The generator is a splitmix64 stream, written out here so the cases do
//! not change when a crate does.
use serde::Serialize;

/// The seed of the committed cases.
pub const SEED: u64 = 23;
/// How many SQL texts are committed.
pub const SQL_CASES: usize = 240;
/// How many passwords are committed (each goes into every URL template).
pub const PASSWORD_CASES: usize = 48;
/// How many retry sequences are committed.
pub const RETRY_CASES: usize = 40;
/// The retry bound every host keeps (HOSTS.md rule 3).
pub const RETRY_ATTEMPTS: usize = 10;

/// A deterministic stream of numbers (splitmix64).
pub struct Stream(u64);

impl Stream {
    /// The stream of `seed`.
    pub fn new(seed: u64) -> Stream {
        Stream(seed)
    }

    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `0..n`.
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }

    fn pick<'a, T>(&mut self, from: &'a [T]) -> &'a T {
        &from[self.below(from.len())]
    }
}

/// What a host must do with a SQL text its body runs through the lent
/// handle's one-statement call, on one database.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Expect {
    /// The call raises to the body: the text holds transaction control, or
    /// (PostgreSQL) more than one statement. Nothing it would do happens.
    Refuse,
    /// One harmless statement: it runs, the call commits.
    Run,
    /// No more than the all-or-nothing rule (a syntax error, a spelling the
    /// databases read differently).
    Any,
}

/// One SQL text and what each database's host must do with it.
#[derive(Clone, Debug, Serialize)]
pub struct SqlCase {
    /// The text, as the body passes it.
    pub sql: String,
    /// On PostgreSQL.
    pub postgres: Expect,
    /// On SQLite.
    pub sqlite: Expect,
    /// The PostgreSQL statement that would end the kernel's transaction if
    /// it ran (for the oracle check against the server), if the text has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ends: Option<&'static str>,
}

/// A piece of text and how each database reads it.
struct Piece {
    text: String,
    /// SQLite reads it as PostgreSQL does.
    neutral: bool,
    /// Neither database reads it predictably as whitespace or a token
    /// boundary (a Unicode space, `\v`).
    odd: bool,
}

impl Piece {
    fn same(text: impl Into<String>) -> Piece {
        Piece {
            text: text.into(),
            neutral: true,
            odd: false,
        }
    }
    fn pg_only(text: impl Into<String>) -> Piece {
        Piece {
            text: text.into(),
            neutral: false,
            odd: false,
        }
    }
}

/// Statements that begin, end or split a transaction (PostgreSQL's
/// `TransactionStmt`), with the one that ends it when run inside one.
const CONTROL: [(&str, Option<&str>); 20] = [
    ("COMMIT", Some("COMMIT")),
    ("COMMIT WORK", Some("COMMIT")),
    ("COMMIT TRANSACTION", Some("COMMIT")),
    ("COMMIT AND CHAIN", Some("COMMIT")),
    ("END", Some("END")),
    ("END WORK", Some("END")),
    ("ROLLBACK", Some("ROLLBACK")),
    ("ROLLBACK AND NO CHAIN", Some("ROLLBACK")),
    ("ABORT", Some("ABORT")),
    ("ABORT TRANSACTION", Some("ABORT")),
    ("BEGIN", None),
    ("BEGIN ISOLATION LEVEL SERIALIZABLE", None),
    ("START TRANSACTION", None),
    ("SAVEPOINT s1", None),
    ("RELEASE SAVEPOINT s1", None),
    ("RELEASE s1", None),
    ("ROLLBACK TO SAVEPOINT s1", None),
    ("PREPARE TRANSACTION 'gak'", None),
    ("COMMIT PREPARED 'gak'", None),
    ("ROLLBACK PREPARED 'gak'", None),
];

/// One harmless statement each database runs without a row or an error
/// (`WHERE 1 = 0`: a driver's "execute" may refuse a statement that
/// returns rows), hiding transaction control in its literals and comments.
const BENIGN: [&str; 8] = [
    "SELECT 1 WHERE 1 = 0",
    "select 'x;COMMIT' where 1 = 0",
    "SELECT 'it''s; ROLLBACK' WHERE 1 = 0",
    "SELECT 1 AS \"a;END\" WHERE 1 = 0",
    "SELECT 1 /* ;COMMIT */ WHERE 1 = 0",
    "SELECT 'a\\' WHERE 1 = 0",
    "SELECT 1 -- ;ROLLBACK\n WHERE 1 = 0",
    "SELECT '--' WHERE 1 = 0",
];

/// As [`BENIGN`], for PostgreSQL only (dollar quotes, `E'…'` escapes).
const BENIGN_PG: [&str; 5] = [
    "SELECT $$;COMMIT$$ WHERE 1 = 0",
    "SELECT $q$ ' ;ROLLBACK $q$ WHERE 1 = 0",
    "SELECT E'\\';COMMIT' WHERE 1 = 0",
    "SELECT e'\\\\\\';END' WHERE 1 = 0",
    "SELECT $a$ $b$ ;ABORT $b$ $a$ WHERE 1 = 0",
];

/// Words that end a comment or literal in one database and not the other,
/// or that look like statements inside one.
const COMMENT_TEXT: [&str; 8] = [
    "",
    " note",
    " COMMIT",
    ";ROLLBACK",
    " ' open quote",
    " $$ open dollar",
    " \" open ident",
    " END;",
];

const UNICODE_SPACES: [&str; 4] = ["\u{a0}", "\u{2003}", "\u{3000}", "\u{feff}"];

/// Whitespace or a comment: skipped by PostgreSQL (and, when neutral, by
/// SQLite).
fn trivia(s: &mut Stream) -> Piece {
    match s.below(12) {
        0 => Piece::same(" "),
        1 => Piece::same("\t"),
        2 => Piece::same("\n"),
        3 => Piece::same("\r\n"),
        4 => Piece::same("\r"),
        5 => Piece::same("\x0c"),
        6 => Piece::same(format!("--{}\n", s.pick(&COMMENT_TEXT))),
        7 => Piece::same(format!("--{}\r\n", s.pick(&COMMENT_TEXT))),
        // PostgreSQL ends a `--` comment at `\r`; SQLite reads on to `\n`.
        8 => Piece::pg_only(format!("--{}\r", s.pick(&COMMENT_TEXT))),
        9 => Piece::same(format!("/*{}*/", s.pick(&COMMENT_TEXT))),
        // PostgreSQL nests block comments; SQLite ends at the first `*/`.
        10 => Piece::pg_only(format!(
            "/*{} /*{}*/{}*/",
            s.pick(&COMMENT_TEXT),
            s.pick(&COMMENT_TEXT),
            s.pick(&COMMENT_TEXT)
        )),
        _ => {
            if s.chance(50) {
                Piece {
                    text: s.pick(&UNICODE_SPACES).to_string(),
                    neutral: false,
                    odd: true,
                }
            } else {
                // `\v` is whitespace to PostgreSQL 16 and later, not to 15.
                Piece {
                    text: "\x0b".into(),
                    neutral: false,
                    odd: true,
                }
            }
        }
    }
}

/// `word` with each ASCII letter's case chosen at random.
fn mixed_case(s: &mut Stream, word: &str) -> String {
    word.chars()
        .map(|c| {
            if s.chance(50) {
                c.to_ascii_lowercase()
            } else {
                c.to_ascii_uppercase()
            }
        })
        .collect()
}

/// A transaction-control statement: random letter case, and its spaces
/// sometimes replaced by comments (which PostgreSQL reads as spaces).
fn control(s: &mut Stream) -> (Piece, Option<&'static str>) {
    let (text, ends) = *s.pick(&CONTROL);
    let mut neutral = true;
    let mut out = String::new();
    for (i, word) in text.split(' ').enumerate() {
        if i > 0 {
            if s.chance(25) {
                let t = trivia(s);
                if t.odd {
                    out.push(' ');
                } else {
                    neutral &= t.neutral;
                    // A comment between words needs no space; a `--`
                    // comment brings its own line end.
                    out.push_str(&t.text);
                    if !t.text.ends_with(['\n', '\r']) && !t.text.ends_with("*/") {
                        out.push(' ');
                    }
                }
            } else {
                out.push(' ');
            }
        }
        // Quoted names (`'gak'`) keep their case.
        if word.starts_with('\'') {
            out.push_str(word);
        } else {
            out.push_str(&mixed_case(s, word));
        }
    }
    // Only BEGIN, COMMIT, END, ROLLBACK, SAVEPOINT and RELEASE are SQLite
    // statements; the rest are syntax errors there (which also raise).
    (
        Piece {
            text: out,
            neutral,
            odd: false,
        },
        ends,
    )
}

/// How the texts are built: statements (benign or control) between runs
/// of trivia and semicolons.
fn sql_case(s: &mut Stream) -> SqlCase {
    if s.chance(25) {
        return plain_case(s);
    }
    let statements = match s.below(10) {
        0 => 0,
        1..=6 => 1,
        7 | 8 => 2,
        _ => 3,
    };
    let mut text = String::new();
    let (mut neutral, mut odd) = (true, false);
    let (mut controls, mut benign) = (0usize, 0usize);
    let mut ends = None;
    // A statement before the ending one that fails inside a transaction
    // (RELEASE of no savepoint, COMMIT PREPARED…) stops the rest of a
    // multi-statement text: the oracle then cannot see the end.
    let mut poisoned = false;
    // SQLite's one-statement calls differ on what may follow the statement
    // (a `;`, a comment): a SQLite `run` needs nothing but spaces around it.
    let mut sqlite_plain = true;
    let mut push = |p: Piece, text: &mut String, sqlite_plain: &mut bool, in_statement: bool| {
        neutral &= p.neutral;
        odd |= p.odd;
        if !in_statement && !p.text.chars().all(|c| c == ' ' || c == '\n') {
            *sqlite_plain = false;
        }
        text.push_str(&p.text);
    };
    for i in 0..statements.max(1) {
        if i > 0 {
            push(Piece::same(";"), &mut text, &mut sqlite_plain, false);
        }
        for _ in 0..s.below(3) {
            let p = if s.chance(20) {
                Piece::same(";")
            } else {
                trivia(s)
            };
            push(p, &mut text, &mut sqlite_plain, false);
        }
        if statements == 0 {
            break;
        }
        // A statement glued to what precedes it (`;COMMIT`, `*/COMMIT`)
        // or after a space.
        if s.chance(30) && !text.is_empty() && !text.ends_with([' ', '\n', '\r']) {
            push(Piece::same(" "), &mut text, &mut sqlite_plain, false);
        }
        if s.chance(45) {
            let (p, end) = control(s);
            controls += 1;
            if !poisoned && ends.is_none() {
                ends = end;
            }
            let lead = p
                .text
                .split(|c: char| !c.is_ascii_alphabetic())
                .next()
                .unwrap_or("");
            poisoned |= end.is_none()
                && !["BEGIN", "START", "SAVEPOINT"]
                    .iter()
                    .any(|w| w.eq_ignore_ascii_case(lead));
            push(p, &mut text, &mut sqlite_plain, true);
        } else if s.chance(80) {
            benign += 1;
            push(
                Piece::same(*s.pick(&BENIGN)),
                &mut text,
                &mut sqlite_plain,
                true,
            );
        } else {
            benign += 1;
            push(
                Piece::pg_only(*s.pick(&BENIGN_PG)),
                &mut text,
                &mut sqlite_plain,
                true,
            );
        }
    }
    for _ in 0..s.below(3) {
        let p = if s.chance(30) {
            Piece::same(";")
        } else {
            trivia(s)
        };
        push(p, &mut text, &mut sqlite_plain, false);
    }
    let statements = controls + benign;
    let postgres = if odd {
        Expect::Any
    } else if controls > 0 || statements > 1 {
        Expect::Refuse
    } else if statements == 1 {
        Expect::Run
    } else {
        Expect::Any
    };
    let sqlite = if odd || !neutral {
        Expect::Any
    } else if controls > 0 {
        Expect::Refuse
    } else if statements == 1 && sqlite_plain {
        Expect::Run
    } else {
        Expect::Any
    };
    SqlCase {
        sql: text,
        postgres,
        sqlite,
        ends: if odd { None } else { ends },
    }
}

/// One statement with nothing but spaces and line feeds around it: the
/// form every driver's one-statement call takes alike on SQLite.
fn plain_case(s: &mut Stream) -> SqlCase {
    let pad = |s: &mut Stream| [" ", "\n", "", "  "][s.below(4)].to_owned();
    let lead = pad(s);
    let (statement, postgres, sqlite, ends) = if s.chance(50) {
        let (p, end) = control(s);
        let sqlite = if p.neutral {
            Expect::Refuse
        } else {
            Expect::Any
        };
        if s.chance(20) {
            // U+FEFF where a token starts is a space to SQLite's tokenizer
            // (the statement is still transaction control there) and a
            // letter to PostgreSQL's (one identifier: a syntax error). Both
            // raise.
            (format!("\u{feff}{}", p.text), Expect::Refuse, sqlite, None)
        } else {
            (p.text, Expect::Refuse, sqlite, end)
        }
    } else {
        (
            (*s.pick(&BENIGN)).to_owned(),
            Expect::Run,
            Expect::Run,
            None,
        )
    };
    let trail = pad(s);
    SqlCase {
        sql: format!("{lead}{statement}{trail}"),
        postgres,
        sqlite,
        ends,
    }
}

/// `COPY` statements whose rows would cross the connection (`FROM STDIN`,
/// `TO STDOUT`): a body's handle speaks statements, not COPY's data
/// exchange, so every host refuses them before they are sent. (SQLite has
/// no COPY: a syntax error there.)
const COPY_DATA: [&str; 5] = [
    "COPY gak_fuzz_rows FROM STDIN",
    "copy (select 1) to stdout",
    "COPY gak_fuzz_rows (a, b) FROM stdin WITH (FORMAT csv)",
    "/* rows */ COPY \"gak_fuzz_rows\" TO\nSTDOUT",
    "COPY gak_fuzz_rows FROM STDIN -- ;",
];

/// `n` SQL texts from `seed`, then the [`COPY_DATA`] texts.
pub fn sql_cases(seed: u64, n: usize) -> Vec<SqlCase> {
    let mut s = Stream::new(seed ^ 0x5351_4C00);
    let mut cases: Vec<SqlCase> = (0..n).map(|_| sql_case(&mut s)).collect();
    cases.extend(COPY_DATA.iter().map(|sql| SqlCase {
        sql: (*sql).to_owned(),
        postgres: Expect::Refuse,
        sqlite: Expect::Any,
        ends: None,
    }));
    cases
}

/// A password and the markers no message may contain.
#[derive(Clone, Debug, Serialize)]
pub struct PasswordCase {
    /// The password, as written into the URL (not percent-encoded).
    pub password: String,
    /// Runs of letters and digits inside it: a message holding any of them
    /// showed (part of) the password.
    pub markers: Vec<String>,
}

/// The URLs each password goes into (`{password}`): every one fails to
/// open, each in a different place of the parser or the connection.
pub const URL_TEMPLATES: [&str; 10] = [
    "postgres://alice:{password}@127.0.0.1:1/test?connect_timeout=2",
    "postgresql://alice:{password}@127.0.0.1:1/test",
    "postgres://alice:{password}@127.0.0.1:1/test?schema=Bad-Name",
    "postgres://alice:{password}@127.0.0.1:1/test?clock=sometimes",
    "postgres://alice:{password}@127.0.0.1:1/test?statement_timeout_ms=soon",
    "postgres://alice:{password}@127.0.0.1:1/test?sslmode=sometimes",
    "postgres://alice:{password}@127.0.0.1:1/test?sslmode=verify-full&sslrootcert=/nonexistent/gak-root.pem",
    "postgres://alice:{password}@127.0.0.1:1/test?no_such_option=1",
    "postgres://{password}@127.0.0.1:1/test",
    "mysql://alice:{password}@127.0.0.1:1/test",
];

const MARKER_ALPHABET: &[u8] = b"ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz23456789";

fn marker(s: &mut Stream) -> String {
    // Upper, lower and a digit in each: never a word a message would hold.
    let mut m = String::from("Q");
    m.push(char::from(b"abcdefghijkmnopqrstuvwxyz"[s.below(25)]));
    m.push(char::from(b"23456789"[s.below(8)]));
    for _ in 0..4 {
        m.push(char::from(MARKER_ALPHABET[s.below(MARKER_ALPHABET.len())]));
    }
    m
}

/// `n` passwords from `seed`: markers between runs of printable ASCII
/// punctuation and spaces, the characters URL parsers cut at (`? @ / # % :
/// & =`) among them. The first ones hold each special character alone.
pub fn password_cases(seed: u64, n: usize) -> Vec<PasswordCase> {
    let mut s = Stream::new(seed ^ 0x5057_0000);
    let specials: Vec<char> = (0x20u8..0x7f)
        .map(char::from)
        .filter(|c| !c.is_ascii_alphanumeric())
        .collect();
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let mut password = String::new();
        let mut markers = Vec::new();
        if i < specials.len() {
            // One special character between two markers.
            let (a, b) = (marker(&mut s), marker(&mut s));
            password = format!("{a}{}{b}", specials[i]);
            markers.extend([a, b]);
        } else {
            if s.chance(30) {
                password.push(*s.pick(&specials));
            }
            for _ in 0..1 + s.below(4) {
                let m = marker(&mut s);
                password.push_str(&m);
                markers.push(m);
                for _ in 0..1 + s.below(4) {
                    password.push(*s.pick(&specials));
                }
            }
        }
        out.push(PasswordCase { password, markers });
    }
    out
}

/// What a body does on one attempt of a call.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum BodyEnd {
    /// Returns success.
    Ok,
    /// Returns its ordinary failure (an error, a non-zero code, a raise).
    Fail,
    /// Panics (Go); a host without panics treats it as `fail`.
    Panic,
}

/// One attempt of a call whose body meets (and swallows) a store conflict,
/// or not, then ends as `body` says.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Attempt {
    /// The body meets a conflict (the call will re-run).
    pub conflict: bool,
    /// How the body ends.
    pub body: BodyEnd,
}

/// What the call answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Answer {
    /// Committed.
    Ok,
    /// The last attempt's body failed.
    WriteFailed,
    /// The last attempt's body panicked (Go re-panics; elsewhere
    /// `write-failed`).
    Panic,
    /// Every allowed attempt met a conflict.
    Storage,
}

/// A sequence of attempts and the answer: the last attempt's.
#[derive(Clone, Debug, Serialize)]
pub struct RetryCase {
    /// Every attempt the call makes, in order.
    pub attempts: Vec<Attempt>,
    /// What the call answers.
    pub answer: Answer,
}

fn body_end(s: &mut Stream) -> BodyEnd {
    match s.below(3) {
        0 => BodyEnd::Ok,
        1 => BodyEnd::Fail,
        _ => BodyEnd::Panic,
    }
}

/// `n` retry sequences from `seed`: 0 to 3 conflicting attempts, then one
/// that meets none; every tenth, as many conflicting attempts as the
/// retry bound allows (the call answers `storage`).
pub fn retry_cases(seed: u64, n: usize) -> Vec<RetryCase> {
    let mut s = Stream::new(seed ^ 0x5245_5452);
    (0..n)
        .map(|i| {
            if i % 10 == 9 {
                let attempts = (0..RETRY_ATTEMPTS)
                    .map(|_| Attempt {
                        conflict: true,
                        body: body_end(&mut s),
                    })
                    .collect();
                return RetryCase {
                    attempts,
                    answer: Answer::Storage,
                };
            }
            let mut attempts: Vec<Attempt> = (0..s.below(4))
                .map(|_| Attempt {
                    conflict: true,
                    body: body_end(&mut s),
                })
                .collect();
            let last = body_end(&mut s);
            attempts.push(Attempt {
                conflict: false,
                body: last,
            });
            let answer = match last {
                BodyEnd::Ok => Answer::Ok,
                BodyEnd::Fail => Answer::WriteFailed,
                BodyEnd::Panic => Answer::Panic,
            };
            RetryCase { attempts, answer }
        })
        .collect()
}

/// A generated file: its generator's settings and its cases.
#[derive(Serialize)]
struct File<'a, T: Serialize> {
    generator: &'static str,
    seed: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    templates: Option<&'a [&'a str]>,
    cases: &'a [T],
}

/// JSON with one case per line (diffs stay readable).
fn write<T: Serialize>(seed: u64, templates: Option<&[&str]>, cases: &[T]) -> String {
    let head = File::<T> {
        generator: "cargo run -p gak-tests --bin gak-hostfuzz",
        seed,
        templates,
        cases: &[],
    };
    let mut head = serde_json::to_string(&head).expect("serializable");
    head.truncate(head.len() - "[]}".len());
    let mut out = head;
    out.push_str("[\n");
    for (i, case) in cases.iter().enumerate() {
        out.push_str("  ");
        out.push_str(&serde_json::to_string(case).expect("serializable"));
        out.push_str(if i + 1 < cases.len() { ",\n" } else { "\n" });
    }
    out.push_str("]}\n");
    out
}

/// The three files (`sql.json`, `passwords.json`, `retries.json`) for
/// `seed` with the given sizes, as (name, text).
pub fn files(
    seed: u64,
    sql: usize,
    passwords: usize,
    retries: usize,
) -> Vec<(&'static str, String)> {
    vec![
        ("sql.json", write(seed, None, &sql_cases(seed, sql))),
        (
            "passwords.json",
            write(seed, Some(&URL_TEMPLATES), &password_cases(seed, passwords)),
        ),
        (
            "retries.json",
            write(seed, None, &retry_cases(seed, retries)),
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_labels_cover_every_kind() {
        let cases = sql_cases(SEED, SQL_CASES);
        for want in [Expect::Refuse, Expect::Run, Expect::Any] {
            assert!(
                cases.iter().any(|c| c.postgres == want),
                "{want:?} on postgres"
            );
            assert!(cases.iter().any(|c| c.sqlite == want), "{want:?} on sqlite");
        }
        assert!(
            cases
                .iter()
                .any(|c| c.sql.contains("\r") && c.postgres == Expect::Refuse)
        );
        assert!(cases.iter().any(|c| c.ends.is_some()));
    }

    #[test]
    fn passwords_hold_every_special_character() {
        let cases = password_cases(SEED, PASSWORD_CASES);
        for c in "?@/#%:&= ".chars() {
            assert!(cases.iter().any(|p| p.password.contains(c)), "{c:?}");
        }
        for p in &cases {
            for m in &p.markers {
                assert!(p.password.contains(m.as_str()));
            }
        }
    }
}
