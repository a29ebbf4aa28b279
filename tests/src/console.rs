//! Driving `gak serve` over real HTTP (a plain HTTP/1.1 client on a
//! socket, so the tests see exactly the bytes a browser would), and a
//! browser through ChromeDriver's WebDriver protocol (the same client,
//! JSON bodies), for `tests/serve.rs` and `tests/console_browser.rs`.
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

use crate::cli::gak_bin;

/// A running `gak serve`, killed when dropped.
pub struct Server {
    child: Child,
    /// `host:port`.
    pub addr: String,
}

impl Server {
    pub fn start(store: &str, extra: &[&str]) -> Server {
        let mut child = Command::new(gak_bin())
            .args(["serve", "--store", store, "--listen", "127.0.0.1:0"])
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start gak serve");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("stdout"))
            .read_line(&mut line)
            .expect("read the first line");
        let addr = line
            .split("http://")
            .nth(1)
            .and_then(|rest| rest.split('/').next())
            .unwrap_or_else(|| panic!("no address in {line:?}"))
            .to_owned();
        Server { child, addr }
    }

    pub fn get(&self, path: &str, headers: &[(&str, &str)]) -> Answer {
        self.send("GET", path, headers, b"")
    }

    pub fn post(&self, path: &str, headers: &[(&str, &str)], form: &str) -> Answer {
        let mut h = headers.to_vec();
        h.push(("content-type", "application/x-www-form-urlencoded"));
        self.send("POST", path, &h, form.as_bytes())
    }

    /// One request to the console (see [`http`]).
    pub fn send(&self, method: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) -> Answer {
        http(&self.addr, method, path, headers, body)
    }
}

/// One HTTP/1.1 request on a fresh connection to `addr`, read to its end.
pub fn http(addr: &str, method: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) -> Answer {
    let mut stream = TcpStream::connect(addr).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .expect("timeout");
    let mut head = format!(
        "{method} {path} HTTP/1.1\r\nhost: {addr}\r\nconnection: close\r\ncontent-length: {}\r\n",
        body.len()
    );
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes()).expect("send the head");
    // A large body goes from another thread: the server may answer (413)
    // before it has read it all.
    let writer = {
        let mut stream = stream.try_clone().expect("clone");
        let body = body.to_vec();
        std::thread::spawn(move || {
            let _ = stream.write_all(&body);
        })
    };
    let raw = read_answer(&mut stream);
    let _ = writer.join();
    Answer::parse(&raw)
}

/// An answer's bytes: the head, then exactly its `content-length` (a
/// server may keep the connection open whatever the request asked), or
/// its chunks, or everything up to the close.
fn read_answer(stream: &mut TcpStream) -> Vec<u8> {
    let mut raw = Vec::new();
    let mut buf = [0u8; 64 * 1024];
    let head_end = loop {
        if let Some(at) = raw.windows(4).position(|w| w == b"\r\n\r\n") {
            break at + 4;
        }
        match stream.read(&mut buf) {
            Ok(0) | Err(_) => return raw,
            Ok(n) => raw.extend_from_slice(&buf[..n]),
        }
    };
    let head = String::from_utf8_lossy(&raw[..head_end]).to_ascii_lowercase();
    let length = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse::<usize>().ok());
    let chunked = head.contains("transfer-encoding: chunked");
    let mut body = raw.split_off(head_end);
    if let Some(length) = length {
        while body.len() < length {
            match stream.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => body.extend_from_slice(&buf[..n]),
            }
        }
        body.truncate(length);
    } else if chunked {
        let mut decoded = Vec::new();
        loop {
            // One chunk: its size line, its bytes, CRLF.
            let Some(eol) = body.windows(2).position(|w| w == b"\r\n") else {
                match stream.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => body.extend_from_slice(&buf[..n]),
                }
                continue;
            };
            let size = usize::from_str_radix(
                String::from_utf8_lossy(&body[..eol])
                    .split(';')
                    .next()
                    .unwrap_or("0")
                    .trim(),
                16,
            )
            .unwrap_or(0);
            if size == 0 {
                break;
            }
            if body.len() < eol + 2 + size + 2 {
                match stream.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => body.extend_from_slice(&buf[..n]),
                }
                continue;
            }
            decoded.extend_from_slice(&body[eol + 2..eol + 2 + size]);
            body.drain(..eol + 2 + size + 2);
        }
        body = decoded;
    } else {
        let _ = stream.read_to_end(&mut body);
    }
    raw.extend_from_slice(&body);
    raw
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Answer {
    pub fn parse(raw: &[u8]) -> Answer {
        let text = String::from_utf8_lossy(raw);
        let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
        let mut lines = head.lines();
        let status = lines
            .next()
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        let headers = lines
            .filter_map(|l| l.split_once(':'))
            .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
            .collect();
        Answer {
            status,
            headers,
            body: body.to_owned(),
        }
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// The `gak_csrf` cookie this answer set, as `name=value`.
    pub fn csrf_cookie(&self) -> String {
        self.headers
            .iter()
            .filter(|(k, _)| k == "set-cookie")
            .find_map(|(_, v)| v.split(';').next().filter(|c| c.starts_with("gak_csrf=")))
            .expect("a gak_csrf cookie")
            .to_owned()
    }

    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("{e}: {}", self.body))
    }
}

/// A headless Chromium driven through ChromeDriver (WebDriver, W3C).
pub struct Browser {
    driver: Child,
    addr: String,
    session: String,
}

/// The WebDriver key of an element reference.
const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";

impl Browser {
    /// Start `chromedriver` on a free port and a headless `chromium`
    /// session in it.
    pub fn start(chromedriver: &str, chromium: &str) -> Browser {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let mut driver = Command::new(chromedriver)
            .arg(format!("--port={port}"))
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start chromedriver");
        // ChromeDriver prints a line when it listens ("... started
        // successfully"): wait for that, not for a while.
        let mut out = BufReader::new(driver.stdout.take().expect("stdout"));
        let mut line = String::new();
        loop {
            line.clear();
            let n = out.read_line(&mut line).expect("read chromedriver");
            assert!(n > 0, "chromedriver exited before it listened");
            if line.contains("started successfully") {
                break;
            }
        }
        std::thread::spawn(move || {
            let mut sink = Vec::new();
            let _ = out.read_to_end(&mut sink);
        });
        let addr = format!("127.0.0.1:{port}");
        let caps = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": chromium,
                "args": ["--headless=new", "--no-sandbox", "--disable-gpu",
                         "--disable-dev-shm-usage", "--window-size=1280,900"]
            }
        }}});
        let answer = wd(&addr, "POST", "/session", Some(&caps));
        let session = answer["value"]["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no session: {answer}"))
            .to_owned();
        Browser {
            driver,
            addr,
            session,
        }
    }

    fn call(&self, method: &str, path: &str, body: Option<&Value>) -> Value {
        let answer = wd(
            &self.addr,
            method,
            &format!("/session/{}{path}", self.session),
            body,
        );
        assert!(
            answer["value"]["error"].is_null(),
            "WebDriver {method} {path}: {answer}"
        );
        answer["value"].clone()
    }

    /// Open a URL and wait for its load (WebDriver's navigate returns
    /// when the page has loaded).
    pub fn open(&self, url: &str) {
        self.call("POST", "/url", Some(&json!({ "url": url })));
    }

    /// The URL shown now.
    pub fn url(&self) -> String {
        self.call("GET", "/url", None)
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }

    /// The page's HTML as the browser holds it.
    pub fn source(&self) -> String {
        self.call("GET", "/source", None)
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }

    fn element(&self, css: &str) -> String {
        let found = self.call(
            "POST",
            "/element",
            Some(&json!({ "using": "css selector", "value": css })),
        );
        found[ELEMENT]
            .as_str()
            .unwrap_or_else(|| panic!("no element {css}: {found}"))
            .to_owned()
    }

    /// Click the first element `css` selects, on the page as it is (a
    /// radio button, a check box).
    pub fn click(&self, css: &str) {
        let id = self.element(css);
        self.call("POST", &format!("/element/{id}/click"), Some(&json!({})));
    }

    /// Click a link or a form's button and wait until the browser shows
    /// the document that click loads. WebDriver's click may return before
    /// a form's submission has begun to navigate, so the old document is
    /// marked first and the wait is for a loaded document without the mark
    /// (a condition, polled against a deadline — not a pause).
    pub fn follow(&self, css: &str) {
        self.script("window.__gakOld = true; return true;");
        self.click(css);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        loop {
            let loaded = self.script(
                "return window.__gakOld === undefined && document.readyState === 'complete';",
            );
            if loaded == json!(true) {
                return;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "clicking {css} loaded no new page within 20 s"
            );
            std::thread::yield_now();
        }
    }

    fn script(&self, body: &str) -> Value {
        self.call(
            "POST",
            "/execute/sync",
            Some(&json!({ "script": body, "args": [] })),
        )
    }

    /// Type `text` into the first element `css` selects.
    pub fn type_into(&self, css: &str, text: &str) {
        let id = self.element(css);
        self.call(
            "POST",
            &format!("/element/{id}/value"),
            Some(&json!({ "text": text })),
        );
    }

    /// Replace the text of the first element `css` selects.
    pub fn replace_text(&self, css: &str, text: &str) {
        let id = self.element(css);
        self.call("POST", &format!("/element/{id}/clear"), Some(&json!({})));
        self.call(
            "POST",
            &format!("/element/{id}/value"),
            Some(&json!({ "text": text })),
        );
    }

    /// A PNG of the viewport.
    pub fn screenshot(&self) -> Vec<u8> {
        use base64::Engine as _;
        let b64 = self.call("GET", "/screenshot", None);
        base64::engine::general_purpose::STANDARD
            .decode(b64.as_str().unwrap_or_default())
            .expect("base64 PNG")
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = wd(
            &self.addr,
            "DELETE",
            &format!("/session/{}", self.session),
            None,
        );
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

fn wd(addr: &str, method: &str, path: &str, body: Option<&Value>) -> Value {
    let text = body.map(Value::to_string).unwrap_or_default();
    let headers: &[(&str, &str)] = if body.is_some() {
        &[("content-type", "application/json")]
    } else {
        &[]
    };
    let answer = http(addr, method, path, headers, text.as_bytes());
    serde_json::from_str(&answer.body)
        .unwrap_or_else(|e| panic!("WebDriver {method} {path} answered {}: {e}", answer.status))
}
