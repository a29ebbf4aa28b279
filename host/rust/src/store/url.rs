//! Store URLs by one grammar, shared by every host (HOSTS.md rule 14,
//! pinned by `tests/store-facts/cases.json` → `postgres-url`), and how a URL
//! is named in a message.
//!
//! A password may hold any character — `? @ / # %`, spaces — when its
//! writer did not percent-encode it, so the user information cannot end at
//! the first delimiter: it runs to the **last** `@` after `://`. A parser
//! that cut at the first `?` or `@` took part of a password for an option
//! or a host, and then echoed it in its error. Here the user information is
//! split off first and nothing after that ever holds a byte of it; messages
//! hide the whole span, user included.

/// The parts of a `postgres://` / `postgresql://` URL.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PostgresUrl {
    /// The user, percent-decoded leniently (absent: no user information).
    pub user: Option<String>,
    /// The password, likewise (absent: no `:` in the user information).
    pub password: Option<String>,
    /// `HOST[:PORT]`, in order (`[v6]` without its brackets).
    pub hosts: Vec<(String, Option<u16>)>,
    /// The database (absent: none after the hosts).
    pub dbname: Option<String>,
    /// The parameters after `?`, percent-decoded; a repeated one keeps its
    /// last value, in the place it first had.
    pub params: Vec<(String, String)>,
}

/// Why a URL could not be split. The message holds no byte of the user
/// information.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UrlError(pub String);

impl std::fmt::Display for UrlError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl PostgresUrl {
    /// The value of parameter `name`, if given.
    pub fn param(&self, name: &str) -> Option<&str> {
        self.params
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Split a PostgreSQL URL. `url` must start with one of
/// [`super::facts::POSTGRES_SCHEMES`].
pub fn parse_postgres(url: &str) -> Result<PostgresUrl, UrlError> {
    let rest = super::facts::POSTGRES_SCHEMES
        .iter()
        .find_map(|s| url.strip_prefix(s))
        .ok_or_else(|| UrlError("not a postgres:// URL".into()))?;
    let mut out = PostgresUrl::default();
    let rest = match rest.rfind('@') {
        Some(at) => {
            let userinfo = &rest[..at];
            let (user, password) = match userinfo.split_once(':') {
                Some((u, p)) => (u, Some(p)),
                None => (userinfo, None),
            };
            out.user = Some(lenient_decode(user));
            out.password = password.map(lenient_decode);
            &rest[at + 1..]
        }
        None => rest,
    };
    let (before_query, query) = match rest.split_once('?') {
        Some((b, q)) => (b, Some(q)),
        None => (rest, None),
    };
    let (hosts, dbname) = match before_query.split_once('/') {
        Some((h, d)) => (h, Some(d)),
        None => (before_query, None),
    };
    for spec in hosts.split(',').filter(|h| !h.is_empty()) {
        out.hosts.push(host(spec)?);
    }
    out.dbname = dbname
        .filter(|d| !d.is_empty())
        .map(|d| strict_decode(d, "the database name"))
        .transpose()?;
    for pair in query
        .unwrap_or_default()
        .split('&')
        .filter(|p| !p.is_empty())
    {
        let (name, value) = pair.split_once('=').ok_or_else(|| {
            UrlError(format!(
                "parameter {:?} has no value (expected NAME=VALUE)",
                shown_name(pair)
            ))
        })?;
        let name = strict_decode(name, "a parameter name")?;
        if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
            return Err(UrlError(
                "a parameter name that is not a plain word (letters, digits, '_')".into(),
            ));
        }
        let value = strict_decode(value, &format!("parameter {name}"))?;
        match out.params.iter_mut().find(|(n, _)| *n == name) {
            Some(slot) => slot.1 = value,
            None => out.params.push((name, value)),
        }
    }
    Ok(out)
}

/// A parameter name fit for a message (a `password` parameter's value is
/// never shown, and names are short).
fn shown_name(pair: &str) -> String {
    let name: String = pair.chars().take(40).collect();
    if name.to_ascii_lowercase().starts_with("password") {
        "password".into()
    } else {
        name
    }
}

fn host(spec: &str) -> Result<(String, Option<u16>), UrlError> {
    let (name, port) = if let Some(v6) = spec.strip_prefix('[') {
        let (name, after) = v6
            .split_once(']')
            .ok_or_else(|| UrlError(format!("host {spec:?}: an IPv6 address without its ]")))?;
        let port = match after {
            "" => None,
            p => Some(p.strip_prefix(':').ok_or_else(|| {
                UrlError(format!("host {spec:?}: expected :PORT after the address"))
            })?),
        };
        (name.to_owned(), port)
    } else {
        match spec.rsplit_once(':') {
            Some((name, port)) => (strict_decode(name, "a host")?, Some(port)),
            None => (strict_decode(spec, "a host")?, None),
        }
    };
    let port = port
        .map(|p| {
            p.parse::<u16>().ok().filter(|p| *p > 0).ok_or_else(|| {
                UrlError(format!("host {name:?}: port {p:?} is not a port (1-65535)"))
            })
        })
        .transpose()?;
    Ok((name, port))
}

/// Percent-decoding for the user information: a `%` not followed by two
/// hex digits stays as written (a password may hold one), `+` stays `+`,
/// escapes that do not make UTF-8 become U+FFFD.
fn lenient_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = (b[i] == b'%').then(|| escape(b, i)).flatten();
        match hex {
            Some(v) => {
                out.push(v);
                i += 3;
            }
            None => {
                out.push(b[i]);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Percent-decoding for everything after the user information: a `%`
/// must start an escape.
fn strict_decode(s: &str, what: &str) -> Result<String, UrlError> {
    decode(s).map_err(|()| UrlError(format!("{what}: bad percent-encoding (%XX) in {s:?}")))
}

/// The byte a `%XX` at `b[i]` stands for: exactly two hex digits (no sign,
/// as `from_str_radix` would take).
fn escape(b: &[u8], i: usize) -> Option<u8> {
    let digits = b.get(i + 1..i + 3)?;
    if !digits.iter().all(u8::is_ascii_hexdigit) {
        return None;
    }
    u8::from_str_radix(std::str::from_utf8(digits).ok()?, 16).ok()
}

fn decode(s: &str) -> Result<String, ()> {
    let b = s.as_bytes();
    if !b.contains(&b'%') {
        return Ok(s.to_owned());
    }
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    let mut exact = true;
    while i < b.len() {
        if b[i] == b'%' {
            match escape(b, i) {
                Some(v) => {
                    out.push(v);
                    i += 3;
                    continue;
                }
                None => exact = false,
            }
        }
        out.push(b[i]);
        i += 1;
    }
    if !exact {
        // The lenient caller keeps the text as written; the strict one
        // refuses it.
        return Err(());
    }
    String::from_utf8(out).map_err(|_| ())
}

/// `text` with every store URL's user information (everything between
/// `://` and the last `@` of its line) and every `password=` value
/// replaced by `***`: how a store may be named in a message or a log.
/// Hiding the user too costs a little context and spares every question of
/// where a password that holds `:` or `@` begins.
pub fn hide_password(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("://") {
        let (head, tail) = rest.split_at(at + 3);
        out.push_str(head);
        let line_end = tail.find(['\n', '\r']).unwrap_or(tail.len());
        match tail[..line_end].rfind('@') {
            Some(userinfo_end) => {
                out.push_str("***");
                rest = &tail[userinfo_end..];
            }
            None => rest = tail,
        }
    }
    out.push_str(rest);
    let mut redacted = String::with_capacity(out.len());
    let mut parts = out.split("password=");
    redacted.push_str(parts.next().unwrap_or_default());
    for part in parts {
        redacted.push_str("password=***");
        let end = part.find(['&', ' ', '\n', '\r']).unwrap_or(part.len());
        redacted.push_str(&part[end..]);
    }
    redacted
}

#[cfg(test)]
mod tests {
    use super::{hide_password, parse_postgres};

    #[test]
    fn the_user_information_runs_to_the_last_at() {
        let u = parse_postgres("postgres://alice:p@hunter2@127.0.0.1:1/test").unwrap();
        assert_eq!(u.password.as_deref(), Some("p@hunter2"));
        assert_eq!(u.hosts, vec![("127.0.0.1".to_owned(), Some(1))]);
        let u = parse_postgres("postgres://alice:p?clock=hunter2@h/db").unwrap();
        assert_eq!(u.password.as_deref(), Some("p?clock=hunter2"));
        assert!(u.params.is_empty());
    }

    #[test]
    fn messages_hide_the_whole_user_information() {
        let shown = hide_password("cannot open postgres://alice:p?x@y@host:1/db?password=z&a=b");
        assert_eq!(
            shown,
            "cannot open postgres://***@host:1/db?password=***&a=b"
        );
        assert_eq!(hide_password("mysql://h/db"), "mysql://h/db");
    }
}
