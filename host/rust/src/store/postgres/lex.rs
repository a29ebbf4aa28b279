//! What PostgreSQL will run when a sink body hands it a text: the text is
//! lexed as the server's scanner (`scan.l`) lexes it, so no spelling —
//! `;COMMIT`, `-- note\rCOMMIT` (a `--` comment ends at `\r` too),
//! `/* a /* nested */ */COMMIT`, `E'\';COMMIT'` — hides a statement from
//! the guard. A body's text is refused when any statement in it begins,
//! ends or splits the kernel's transaction, and when it holds more than one
//! statement (a body sends one statement per call, on the extended
//! protocol, which the server also refuses to split), and when it is a
//! `COPY` naming `STDIN` or `STDOUT`: the handle runs statements, and COPY's
//! data exchange is a protocol of its own that no host's handle speaks.
//!
//! Where the server could read a text two ways, both readings are checked:
//! a body may have turned `standard_conforming_strings` off earlier in the
//! transaction, and then a backslash escapes a quote inside `'…'` too.

/// Why a body's text is refused before it reaches the server.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// A statement in it is transaction control (its leading words).
    TransactionControl(&'static str),
    /// It holds this many statements; a body sends one per call.
    Statements(usize),
    /// A `COPY` whose rows would cross the connection (`FROM STDIN`, `TO
    /// STDOUT`).
    CopyData,
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::TransactionControl(words) => write!(
                f,
                "a sink body cannot run `{words}`: the kernel's transaction is not the body's to end"
            ),
            Refusal::Statements(n) => write!(
                f,
                "a sink body sends one statement per call, and this text holds {n}"
            ),
            Refusal::CopyData => write!(
                f,
                "a sink body cannot run COPY FROM STDIN or TO STDOUT: its handle runs statements, not COPY's data exchange (write rows with INSERT)"
            ),
        }
    }
}

/// Refuse `sql` if PostgreSQL would run transaction control or more than
/// one statement from it, under either reading of backslashes.
pub fn check(sql: &str) -> Result<(), Refusal> {
    check_reading(sql, false)?;
    check_reading(sql, true)
}

fn check_reading(sql: &str, backslash_quotes: bool) -> Result<(), Refusal> {
    let statements = statements(sql, backslash_quotes);
    for statement in &statements {
        if let Some(phrase) = control(&statement.words) {
            return Err(Refusal::TransactionControl(phrase));
        }
        if statement.copy_data() {
            return Err(Refusal::CopyData);
        }
    }
    if statements.len() > 1 {
        return Err(Refusal::Statements(statements.len()));
    }
    Ok(())
}

/// The transaction-control phrase `words` begin with, if any.
fn control(words: &[String]) -> Option<&'static str> {
    crate::store::facts::TRANSACTION_CONTROL
        .iter()
        .copied()
        .find(|phrase| {
            let mut want = phrase.split(' ');
            let mut have = words.iter();
            want.all(|w| have.next().is_some_and(|h| h.eq_ignore_ascii_case(w)))
        })
}

/// PostgreSQL's whitespace (`\v` too, as PostgreSQL 16 reads it: refusing
/// more, never less, than an older server would run).
fn space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r' | 0x0c | 0x0b)
}

/// An identifier's first byte: ASCII letters, `_`, and every byte of a
/// non-ASCII character (the server reads those as letters).
fn ident_start(b: u8) -> bool {
    b.is_ascii_alphabetic() || b == b'_' || b >= 0x80
}

fn ident_cont(b: u8) -> bool {
    ident_start(b) || b.is_ascii_digit() || b == b'$'
}

/// A dollar-quote tag's bytes (no `$`: a tag cannot hold one).
fn tag_cont(b: u8) -> bool {
    ident_start(b) || b.is_ascii_digit()
}

/// One statement of a text, as far as the guard reads it.
#[derive(Debug, Default, PartialEq, Eq)]
struct Statement {
    /// Its first two words when they are identifiers (upper case; fewer
    /// when it starts otherwise).
    words: Vec<String>,
    /// A word token of it (not a literal or a quoted identifier) is
    /// `STDIN` or `STDOUT`.
    stdio: bool,
}

impl Statement {
    /// A `COPY` whose rows would cross the connection.
    fn copy_data(&self) -> bool {
        self.stdio && self.words.first().is_some_and(|w| w == "COPY")
    }
}

/// The non-empty statements of `sql`.
fn statements(sql: &str, backslash_quotes: bool) -> Vec<Statement> {
    let s = sql.as_bytes();
    let n = s.len();
    let mut out: Vec<Statement> = Vec::new();
    // The current statement, how many tokens it has had, and whether a
    // token that is not a word came first.
    let mut tokens = 0usize;
    let mut words = Statement::default();
    let mut leading = true;
    let mut i = 0;
    let token =
        |tokens: &mut usize, word: Option<&[u8]>, words: &mut Statement, leading: &mut bool| {
            *tokens += 1;
            if let Some(w) = word {
                words.stdio |=
                    w.eq_ignore_ascii_case(b"STDIN") || w.eq_ignore_ascii_case(b"STDOUT");
            }
            match word {
                Some(w) if *leading && words.words.len() < 2 => {
                    words
                        .words
                        .push(String::from_utf8_lossy(w).to_ascii_uppercase());
                }
                _ => *leading = false,
            }
        };
    while i < n {
        let b = s[i];
        if space(b) {
            i += 1;
        } else if s[i..].starts_with(b"--") {
            // To the end of the line: `\n` or `\r`.
            i = s[i..]
                .iter()
                .position(|&c| c == b'\n' || c == b'\r')
                .map_or(n, |p| i + p);
        } else if s[i..].starts_with(b"/*") {
            // Block comments nest.
            let mut depth = 0usize;
            while i < n {
                if s[i..].starts_with(b"/*") {
                    depth += 1;
                    i += 2;
                } else if s[i..].starts_with(b"*/") {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
        } else if b == b';' {
            if tokens > 0 {
                out.push(std::mem::take(&mut words));
            }
            tokens = 0;
            leading = true;
            i += 1;
        } else if b == b'\'' {
            i = quoted(s, i, b'\'', backslash_quotes);
            token(&mut tokens, None, &mut words, &mut leading);
        } else if b == b'"' {
            i = quoted(s, i, b'"', false);
            token(&mut tokens, None, &mut words, &mut leading);
        } else if b == b'$' {
            i = dollar(s, i);
            token(&mut tokens, None, &mut words, &mut leading);
        } else if ident_start(b) {
            let start = i;
            while i < n && ident_cont(s[i]) {
                i += 1;
            }
            let word = &s[start..i];
            // A string with a prefix: E'…' (backslash escapes), B'…', X'…',
            // N'…', U&'…' / U&"…".
            if i < n && s[i] == b'\'' && word.len() == 1 {
                let escapes = matches!(word[0], b'e' | b'E') || backslash_quotes;
                i = quoted(s, i, b'\'', escapes);
                token(&mut tokens, None, &mut words, &mut leading);
            } else if word.eq_ignore_ascii_case(b"u")
                && s[i..].starts_with(b"&")
                && matches!(s.get(i + 1), Some(b'\'' | b'"'))
            {
                let quote = s[i + 1];
                i = quoted(s, i + 1, quote, quote == b'\'' && backslash_quotes);
                token(&mut tokens, None, &mut words, &mut leading);
            } else {
                token(&mut tokens, Some(word), &mut words, &mut leading);
            }
        } else if b.is_ascii_digit() {
            // A number (digits, `.`, exponent, `_`, letters of a trailing
            // junk suffix are all one token as far as statements go).
            while i < n && (s[i].is_ascii_alphanumeric() || s[i] == b'.' || s[i] == b'_') {
                i += 1;
            }
            token(&mut tokens, None, &mut words, &mut leading);
        } else {
            // An operator or punctuation: one token per byte is enough here
            // (`--` and `/*` inside an operator start a comment, as above).
            i += 1;
            token(&mut tokens, None, &mut words, &mut leading);
        }
    }
    if tokens > 0 {
        out.push(words);
    }
    out
}

/// The index after the literal opened by `s[i] == quote`: a doubled quote
/// is an escaped quote; with `escapes`, so is a backslash and what follows.
/// An unterminated literal runs to the end.
fn quoted(s: &[u8], mut i: usize, quote: u8, escapes: bool) -> usize {
    let n = s.len();
    i += 1;
    while i < n {
        let b = s[i];
        if escapes && b == b'\\' {
            i += 2;
        } else if b == quote {
            if s.get(i + 1) == Some(&quote) {
                i += 2;
            } else {
                return i + 1;
            }
        } else {
            i += 1;
        }
    }
    n
}

/// The index after what a `$` at `s[i]` starts: a dollar-quoted string
/// (`$$…$$`, `$tag$…$tag$`), or just the `$` (a parameter `$1` is read as
/// a number next).
fn dollar(s: &[u8], i: usize) -> usize {
    let n = s.len();
    let mut j = i + 1;
    if j < n && ident_start(s[j]) {
        j += 1;
        while j < n && tag_cont(s[j]) {
            j += 1;
        }
    }
    if j >= n || s[j] != b'$' {
        return i + 1;
    }
    let tag = &s[i..=j];
    match s[j + 1..].windows(tag.len()).position(|w| w == tag) {
        Some(p) => j + 1 + p + tag.len(),
        None => n,
    }
}

#[cfg(test)]
mod tests {
    use super::{Refusal, Statement, check, statements};

    fn refused(sql: &str) -> bool {
        check(sql).is_err()
    }

    #[test]
    fn every_spelling_of_an_ending_is_refused() {
        for sql in [
            "COMMIT",
            "  commit;",
            ";COMMIT",
            ";ROLLBACK",
            " ;\n;END",
            "-- note\rCOMMIT",
            "-- note\r\nCOMMIT",
            "/* a */;COMMIT",
            "/* a /* nested */ still */ END",
            "/**/abort",
            "prepare /* c */ transaction 'x'",
            "PREPARE\nTRANSACTION 'x'",
            "SELECT 1; COMMIT",
            "start transaction",
            "SAVEPOINT s1",
            "release s1",
            "\x0bCOMMIT",
            "SELECT 'a\\'';COMMIT;--'",
        ] {
            assert!(refused(sql), "{sql:?} was not refused");
        }
    }

    #[test]
    fn what_hides_an_ending_is_not_read_as_one() {
        for sql in [
            "SELECT 'COMMIT'",
            "SELECT 1 -- ;COMMIT",
            "SELECT /* ; COMMIT */ 1",
            "SELECT $$;COMMIT$$",
            "SELECT $q$ $$ ;END $q$",
            "SELECT E'\\';COMMIT'",
            "SELECT \"a;END\"",
            "SELECT 1;",
            ";;SELECT 1;;",
            "committed_rows",
            "PREPARE q AS SELECT 1",
            "SELECT a$b$ FROM t",
            "SELECT $1::text",
            "",
            "-- only a comment",
        ] {
            assert_eq!(check(sql), Ok(()), "{sql:?}");
        }
    }

    #[test]
    fn non_ascii_letters_make_identifiers() {
        // The server reads U+00A0 as a letter: `\u{a0}COMMIT` is one
        // identifier, a syntax error, never a COMMIT.
        assert_eq!(
            statements("\u{a0}COMMIT", false),
            vec![Statement {
                words: vec!["\u{a0}COMMIT".to_owned()],
                stdio: false
            }]
        );
    }

    #[test]
    fn copy_through_the_connection_is_refused() {
        for sql in [
            "COPY t FROM STDIN",
            "copy t from stdin with (format csv)",
            "COPY (SELECT 1) TO STDOUT",
            "/* rows */ COPY t (a, b) TO\nstdout;",
            "COPY \"t\" FROM STDIN",
        ] {
            assert_eq!(check(sql), Err(Refusal::CopyData), "{sql:?}");
        }
        for sql in [
            "COPY t FROM '/tmp/rows.csv'",
            "COPY t FROM 'stdin'",
            "COPY \"stdin\" FROM '/tmp/rows.csv'",
            "COPY t TO '/tmp/x' -- STDOUT",
            "SELECT stdin FROM t",
            "INSERT INTO t SELECT * FROM stdout",
        ] {
            assert_eq!(check(sql), Ok(()), "{sql:?}");
        }
    }

    #[test]
    fn several_statements_are_refused() {
        assert_eq!(check("SELECT 1; SELECT 2"), Err(Refusal::Statements(2)));
        // Under backslash escapes the literal swallows the semicolon; under
        // standard strings it does not: either reading refuses.
        assert!(check("SELECT 'a\\'; SELECT 2 --'").is_err());
    }
}
