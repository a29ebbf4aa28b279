//! The console's HTML: escaping, links and the page frame. Everything a
//! store holds (task ids, titles, reasons, results, group names) is
//! attacker-controlled text: it reaches a page only through [`esc`] (text
//! and attribute values alike) and a URL only through [`seg`] / [`query`].
use std::fmt::Write as _;

use serde_json::Value;

/// Text escaped for an HTML text node or a double- or single-quoted
/// attribute value.
pub fn esc(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            // Control characters show as the replacement character.
            c if c.is_control() && c != '\n' && c != '\t' => out.push('\u{FFFD}'),
            c => out.push(c),
        }
    }
    out
}

/// A value for one path segment or query value: every byte but the
/// unreserved ones percent-encoded (so `/`, `?`, `#`, `&` never split it).
pub fn seg(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(b));
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

/// `?a=1&b=2` from pairs (values encoded), or nothing when empty.
pub fn query(pairs: &[(&str, &str)]) -> String {
    let parts: Vec<String> = pairs
        .iter()
        .map(|(k, v)| format!("{k}={}", seg(v)))
        .collect();
    if parts.is_empty() {
        String::new()
    } else {
        format!("?{}", parts.join("&"))
    }
}

/// The console's style sheet (served from `/gak.css`: the pages allow no
/// inline style or script).
pub const CSS: &str = "\
body{font:14px/1.45 system-ui,sans-serif;margin:0;color:#1d2330;background:#f6f7f9}
header{background:#1d2330;color:#fff;padding:.6em 1.2em;display:flex;gap:1.4em;align-items:baseline}
header a{color:#cfd8ff;text-decoration:none}header b{font-size:1.1em}
main{padding:1em 1.2em;max-width:80em}
table{border-collapse:collapse;background:#fff;width:100%}
th,td{text-align:left;padding:.3em .6em;border-bottom:1px solid #e3e6ea;vertical-align:top}
th{background:#eef0f3;font-weight:600}
td.err{color:#9b1c1c;max-width:28em;overflow-wrap:anywhere}
dl{display:grid;grid-template-columns:max-content auto;gap:.2em 1em;background:#fff;padding:.8em}
dt{font-weight:600}dd{margin:0;overflow-wrap:anywhere;white-space:pre-wrap}
nav.tabs a{margin-right:.8em}nav.tabs a.on{font-weight:700;text-decoration:none;color:#1d2330}
.refused{background:#fde8e8;border:1px solid #f5b5b5;padding:.6em;margin:.6em 0}
.ok{background:#e6f6ea;border:1px solid #a7dcb4;padding:.6em;margin:.6em 0}
form.inline{display:inline}
p.counts a{margin-right:1.1em;text-decoration:none}p.counts b{font-size:1.15em}
fieldset{background:#fff;border:1px solid #d5d9df;margin:.8em 0}
textarea{width:100%;font-family:monospace}
.state-dead,.state-uncertain{color:#9b1c1c;font-weight:600}
.state-claimed,.state-in-flight{color:#8a5a00}
.state-done,.state-completed{color:#1e6b34}
";

/// A whole page: the header's links, the title and `body`.
pub fn page(title: &str, body: &str) -> String {
    format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
<meta name=\"viewport\" content=\"width=device-width\">\
<title>{t} · gak</title><link rel=\"stylesheet\" href=\"/gak.css\"></head>\n<body>\
<header><b>gak</b><a href=\"/tasks\">Board</a><a href=\"/groups\">Groups</a>\
<a href=\"/keys\">Keys</a><a href=\"/runs\">Runs</a><a href=\"/retention\">Retention</a>\
<a href=\"/metrics\">Metrics</a></header>\n<main><h1>{t}</h1>\n{body}</main></body></html>\n",
        t = esc(title)
    )
}

/// A JSON value as text for a cell: strings as they are (escaped by the
/// caller), null as nothing, lists joined.
pub fn plain(v: &Value) -> String {
    match v {
        Value::Null => String::new(),
        Value::String(s) => s.clone(),
        Value::Array(items) => items.iter().map(plain).collect::<Vec<_>>().join(", "),
        other => other.to_string(),
    }
}

/// An object's fields as a definition list, in the object's order, values
/// escaped; `times` names the fields holding kernel milliseconds, shown as
/// UTC with how long ago or until.
pub fn fields(v: &Value, times: &[&str], now: u64) -> String {
    let mut out = String::from("<dl>");
    if let Value::Object(map) = v {
        for (k, val) in map {
            let text = match val.as_u64() {
                Some(ms) if times.contains(&k.as_str()) => super::super::time::when(ms, now),
                _ => plain(val),
            };
            let _ = write!(out, "<dt>{}</dt><dd>{}</dd>", esc(k), esc(&text));
        }
    }
    out.push_str("</dl>\n");
    out
}

/// A form's hidden CSRF field.
pub fn csrf_field(csrf: &str) -> String {
    format!(
        "<input type=\"hidden\" name=\"csrf\" value=\"{}\">",
        esc(csrf)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markup_and_quotes_never_survive() {
        let evil = "<script>alert(\"x\")</script>' onload='x&";
        let out = esc(evil);
        for bad in ['<', '>', '"', '\''] {
            assert!(!out.contains(bad), "{out}");
        }
        assert_eq!(esc("a\u{0}b"), "a\u{FFFD}b");
    }

    #[test]
    fn a_segment_keeps_nothing_that_splits_a_url() {
        assert_eq!(seg("a/b?c#d&e f"), "a%2Fb%3Fc%23d%26e%20f");
        assert_eq!(seg("é"), "%C3%A9");
        assert_eq!(
            query(&[("state", "dead"), ("after", "x&y")]),
            "?state=dead&after=x%26y"
        );
    }
}
