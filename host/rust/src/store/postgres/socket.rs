//! A session's socket watched by the thread that waits for it.
//!
//! A connection made by tokio-postgres' `Config::connect` is a tokio
//! socket: the runtime's reactor — for the blocking API, the one `gak-io`
//! thread — learns that an answer arrived and wakes the caller, a thread
//! switch on each side of every round trip (stop 37 measured 43 % of an
//! unbatched job's client CPU in the kernel, most of it those switches).
//! A session made on a calling thread of the blocking API
//! ([`crate::drive::on_caller_thread`]) gets a [`CallerSocket`] instead: a
//! non-blocking socket whose waits go to the calling thread's own
//! `poll(2)` ([`crate::drive::watch`]), so the thread that needs the
//! answer is the one the kernel wakes.
//!
//! Connecting follows tokio-postgres' own `connect` (hosts and `hostaddr`s
//! in order, every address of a name, the connect timeout, `TCP_NODELAY`,
//! keepalives, `tcp_user_timeout`, `target_session_attrs`), then hands the
//! socket to `Config::connect_raw`, which negotiates TLS and logs in as
//! `connect` does. A configuration this does not follow (random host
//! order) is left to tokio-postgres.
use std::future::{Future, poll_fn};
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::net::UnixStream;
use std::pin::{Pin, pin};
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};
use std::time::Duration;

use socket2::{Domain, SockRef, Socket, TcpKeepalive, Type};
use tokio::io::{AsyncRead, AsyncWrite, Interest, ReadBuf};
use tokio_postgres::config::{Host, LoadBalanceHosts, TargetSessionAttrs};
use tokio_postgres::tls::MakeTlsConnect;
use tokio_postgres::{Client, Config, SimpleQueryMessage};

use super::driver::Connection;
use crate::drive::{Descriptor, Ready, watch};

/// The socket itself, TCP or a Unix-domain socket.
#[derive(Debug)]
enum Io {
    Tcp(TcpStream),
    Unix(UnixStream),
}

impl AsFd for Io {
    fn as_fd(&self) -> BorrowedFd<'_> {
        match self {
            Io::Tcp(s) => s.as_fd(),
            Io::Unix(s) => s.as_fd(),
        }
    }
}

/// A non-blocking socket whose waits the calling thread keeps.
pub(crate) struct CallerSocket {
    io: Arc<Io>,
    fd: Descriptor,
    /// The socket registered with a tokio runtime's reactor, made the
    /// first time it is polled outside a calling thread's `run` (the async
    /// API over the blocking kernel's pool, [`crate::blocking::Kernel::as_async`]).
    reactor: OnceLock<io::Result<Reactor>>,
}

impl CallerSocket {
    fn new(io: Io) -> Self {
        let io = Arc::new(io);
        CallerSocket {
            fd: io.clone(),
            io,
            reactor: OnceLock::new(),
        }
    }

    /// One non-blocking attempt of `op`; on `WouldBlock` the calling
    /// thread waits for `ready`, or else the current runtime's reactor.
    fn attempt<T>(
        &self,
        ready: Ready,
        cx: &mut Context<'_>,
        mut op: impl FnMut(&Io) -> io::Result<T>,
    ) -> Poll<io::Result<T>> {
        loop {
            match op(&self.io) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    if watch(&self.fd, ready, cx.waker()) {
                        return Poll::Pending;
                    }
                    return self.through_reactor(ready, cx, op);
                }
                other => return Poll::Ready(other),
            }
        }
    }

    /// `op` as a tokio socket does it, over a duplicate of the descriptor
    /// registered with the current runtime's reactor: wait for its
    /// readiness, try, and on `WouldBlock` let it clear what it thought
    /// and wait again.
    fn through_reactor<T>(
        &self,
        ready: Ready,
        cx: &mut Context<'_>,
        mut op: impl FnMut(&Io) -> io::Result<T>,
    ) -> Poll<io::Result<T>> {
        let registered = self.reactor.get_or_init(|| {
            if tokio::runtime::Handle::try_current().is_err() {
                return Err(io::Error::other(
                    "a PostgreSQL session of the blocking API was used outside it and outside a tokio runtime",
                ));
            }
            Reactor::of(&self.io)
        });
        let reactor = match registered {
            Ok(reactor) => reactor,
            Err(e) => return Poll::Ready(Err(io::Error::new(e.kind(), e.to_string()))),
        };
        loop {
            std::task::ready!(reactor.poll_ready(ready, cx))?;
            match reactor.try_io(ready, || op(&self.io)) {
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
                    ) => {}
                other => return Poll::Ready(other),
            }
        }
    }
}

/// A duplicate of a [`CallerSocket`]'s descriptor as a tokio socket, for
/// its readiness alone (the bytes still go through the original).
enum Reactor {
    Tcp(tokio::net::TcpStream),
    Unix(tokio::net::UnixStream),
}

impl Reactor {
    fn of(io: &Io) -> io::Result<Reactor> {
        Ok(match io {
            Io::Tcp(s) => Reactor::Tcp(tokio::net::TcpStream::from_std(s.try_clone()?)?),
            Io::Unix(s) => Reactor::Unix(tokio::net::UnixStream::from_std(s.try_clone()?)?),
        })
    }

    fn poll_ready(&self, ready: Ready, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match (self, ready) {
            (Reactor::Tcp(s), Ready::Read) => s.poll_read_ready(cx),
            (Reactor::Tcp(s), Ready::Write) => s.poll_write_ready(cx),
            (Reactor::Unix(s), Ready::Read) => s.poll_read_ready(cx),
            (Reactor::Unix(s), Ready::Write) => s.poll_write_ready(cx),
        }
    }

    fn try_io<T>(&self, ready: Ready, op: impl FnOnce() -> io::Result<T>) -> io::Result<T> {
        let interest = match ready {
            Ready::Read => Interest::READABLE,
            Ready::Write => Interest::WRITABLE,
        };
        match self {
            Reactor::Tcp(s) => s.try_io(interest, op),
            Reactor::Unix(s) => s.try_io(interest, op),
        }
    }
}

// The std streams' reads and writes, through a shared reference (what
// `impl Read for &TcpStream` is for); writes use `MSG_NOSIGNAL`, so a
// closed peer is an error, never a `SIGPIPE` in the embedding process.
fn read(io: &Io, buf: &mut [u8]) -> io::Result<usize> {
    match io {
        Io::Tcp(s) => (&*s).read(buf),
        Io::Unix(s) => (&*s).read(buf),
    }
}

fn write(io: &Io, buf: &[u8]) -> io::Result<usize> {
    match io {
        Io::Tcp(s) => (&*s).write(buf),
        Io::Unix(s) => (&*s).write(buf),
    }
}

impl AsyncRead for CallerSocket {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let n = match self.attempt(Ready::Read, cx, |io| read(io, buf.initialize_unfilled())) {
            Poll::Ready(Ok(n)) => n,
            Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
            Poll::Pending => return Poll::Pending,
        };
        buf.advance(n);
        Poll::Ready(Ok(()))
    }
}

impl AsyncWrite for CallerSocket {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.attempt(Ready::Write, cx, |io| write(io, buf))
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let how = std::net::Shutdown::Write;
        Poll::Ready(match &*self.io {
            Io::Tcp(s) => s.shutdown(how),
            Io::Unix(s) => s.shutdown(how),
        })
    }
}

/// The TLS makers [`connect`] takes: `NoTls` and the binding's rustls one.
pub(crate) trait Tls:
    MakeTlsConnect<CallerSocket, Stream: Send + 'static, Error: std::fmt::Display>
{
}

impl<T> Tls for T where
    T: MakeTlsConnect<CallerSocket, Stream: Send + 'static, Error: std::fmt::Display>
{
}

/// Whether [`connect`] follows `config` (else tokio-postgres connects).
pub(crate) fn follows(config: &Config) -> bool {
    config.get_load_balance_hosts() == LoadBalanceHosts::Disable
}

/// A connection over a [`CallerSocket`], tried host by host as
/// tokio-postgres' `connect` tries them. The error is the last attempt's.
pub(crate) async fn connect<T: Tls>(
    config: &Config,
    mut tls: T,
) -> Result<(Client, Connection), String> {
    let hosts = config.get_hosts();
    let addrs = config.get_hostaddrs();
    if hosts.is_empty() && addrs.is_empty() {
        return Err("both host and hostaddr are missing".into());
    }
    if !hosts.is_empty() && !addrs.is_empty() && hosts.len() != addrs.len() {
        return Err(format!(
            "number of hosts ({}) is different from number of hostaddrs ({})",
            hosts.len(),
            addrs.len()
        ));
    }
    let count = hosts.len().max(addrs.len());
    let ports = config.get_ports();
    if ports.len() > 1 && ports.len() != count {
        return Err("invalid number of ports".into());
    }
    let mut last = String::new();
    for i in 0..count {
        let port = ports.get(i).or(ports.first()).copied().unwrap_or(5432);
        // The host names the server for TLS; `hostaddr` is where to dial.
        let hostname = match hosts.get(i) {
            Some(Host::Tcp(name)) => Some(name.as_str()),
            _ => None,
        };
        let attempt = match (addrs.get(i), hosts.get(i)) {
            (Some(ip), _) => Dial::Tcp(ip.to_string()),
            (None, Some(Host::Tcp(name))) => Dial::Tcp(name.clone()),
            (None, Some(Host::Unix(dir))) => Dial::Unix(dir.join(format!(".s.PGSQL.{port}"))),
            (None, None) => unreachable!("count is the longer list's length"),
        };
        match connect_host(config, &mut tls, attempt, hostname, port).await {
            Ok(done) => return Ok(done),
            Err(e) => last = e,
        }
    }
    Err(last)
}

enum Dial {
    Tcp(String),
    Unix(std::path::PathBuf),
}

async fn connect_host<T: Tls>(
    config: &Config,
    tls: &mut T,
    dial: Dial,
    hostname: Option<&str>,
    port: u16,
) -> Result<(Client, Connection), String> {
    let timeout = config.get_connect_timeout().copied();
    match dial {
        Dial::Unix(path) => {
            let stream = UnixStream::connect(&path).map_err(|e| e.to_string())?;
            stream.set_nonblocking(true).map_err(|e| e.to_string())?;
            login(config, tls, Io::Unix(stream), hostname).await
        }
        Dial::Tcp(host) => {
            // The calling thread resolves the name, as it is blocked anyway.
            let addrs: Vec<SocketAddr> = (host.as_str(), port)
                .to_socket_addrs()
                .map_err(|e| e.to_string())?
                .collect();
            let mut last = "could not resolve any addresses".to_owned();
            for addr in addrs {
                let stream = match dial_tcp(config, addr, timeout).await {
                    Ok(stream) => stream,
                    Err(e) => {
                        last = e.to_string();
                        continue;
                    }
                };
                match login(config, tls, Io::Tcp(stream), hostname).await {
                    Ok(done) => return Ok(done),
                    Err(e) => last = e,
                }
            }
            Err(last)
        }
    }
}

/// A TCP connection to `addr`, made without blocking the thread's other
/// waits, within the connect timeout, with tokio-postgres' socket options.
async fn dial_tcp(
    config: &Config,
    addr: SocketAddr,
    timeout: Option<Duration>,
) -> io::Result<TcpStream> {
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, None)?;
    socket.set_cloexec(true)?;
    socket.set_nonblocking(true)?;
    match socket.connect(&addr.into()) {
        Ok(()) => {}
        Err(e) if e.raw_os_error() == Some(libc_einprogress()) => {
            let stream: TcpStream = socket.into();
            let io: Descriptor = Arc::new(Io::Tcp(stream.try_clone()?));
            let connected = writable(io);
            match timeout {
                Some(limit) => tokio::time::timeout(limit, connected)
                    .await
                    .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "connection timed out"))?,
                None => connected.await,
            }
            if let Some(e) = stream.take_error()? {
                return Err(e);
            }
            return finish_tcp(config, stream);
        }
        Err(e) => return Err(e),
    }
    finish_tcp(config, socket.into())
}

/// `EINPROGRESS`: a non-blocking connect under way.
fn libc_einprogress() -> i32 {
    rustix::io::Errno::INPROGRESS.raw_os_error()
}

/// Ready when the socket is writable (a non-blocking connect ended, well
/// or not).
async fn writable(fd: Descriptor) {
    let mut waited = false;
    poll_fn(|cx| {
        if waited && is_ready(&fd) {
            return Poll::Ready(());
        }
        waited = true;
        if !watch(&fd, Ready::Write, cx.waker()) {
            // Connecting happens only on a calling thread (`on_caller_thread`).
            cx.waker().wake_by_ref();
        }
        Poll::Pending
    })
    .await
}

fn is_ready(fd: &Descriptor) -> bool {
    use rustix::event::{PollFd, PollFlags, Timespec, poll};
    let mut fds = [PollFd::from_borrowed_fd(fd.as_fd(), PollFlags::OUT)];
    let now = Timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    matches!(poll(&mut fds, Some(&now)), Ok(n) if n > 0)
}

fn finish_tcp(config: &Config, stream: TcpStream) -> io::Result<TcpStream> {
    stream.set_nodelay(true)?;
    let sock = SockRef::from(&stream);
    if let Some(limit) = config.get_tcp_user_timeout() {
        sock.set_tcp_user_timeout(Some(*limit))?;
    }
    if config.get_keepalives() {
        let mut keepalive = TcpKeepalive::new().with_time(config.get_keepalives_idle());
        if let Some(interval) = config.get_keepalives_interval() {
            keepalive = keepalive.with_interval(interval);
        }
        if let Some(retries) = config.get_keepalives_retries() {
            keepalive = keepalive.with_retries(retries);
        }
        sock.set_tcp_keepalive(&keepalive)?;
    }
    Ok(stream)
}

/// TLS and the start-up over `io`, then `target_session_attrs`.
async fn login<T: Tls>(
    config: &Config,
    tls: &mut T,
    io: Io,
    hostname: Option<&str>,
) -> Result<(Client, Connection), String> {
    let connector = tls
        .make_tls_connect(hostname.unwrap_or(""))
        .map_err(|e| e.to_string())?;
    let (client, connection) = config
        .connect_raw(CallerSocket::new(io), connector)
        .await
        .map_err(|e| super::said(&e))?;
    let mut connection: Connection = Box::pin(async move { drop(connection.await) });
    let wanted = config.get_target_session_attrs();
    if wanted != TargetSessionAttrs::Any {
        let mut query = pin!(client.simple_query("SHOW transaction_read_only"));
        let answer = poll_fn(|cx| {
            if let Poll::Ready(out) = query.as_mut().poll(cx) {
                return Poll::Ready(Some(out));
            }
            if connection.as_mut().poll(cx).is_ready() {
                return Poll::Ready(None);
            }
            query.as_mut().poll(cx).map(Some)
        })
        .await
        .ok_or("connection closed")?
        .map_err(|e| super::said(&e))?;
        let read_only = answer.iter().find_map(|m| match m {
            SimpleQueryMessage::Row(row) => row.get(0).map(|v| v == "on"),
            _ => None,
        });
        match (wanted, read_only) {
            (TargetSessionAttrs::ReadWrite, Some(true)) => {
                return Err("database does not allow writes".into());
            }
            (TargetSessionAttrs::ReadOnly, Some(false)) => {
                return Err("database is not read only".into());
            }
            (_, None) => return Err("unexpected message from server".into()),
            _ => {}
        }
    }
    Ok((client, connection))
}
