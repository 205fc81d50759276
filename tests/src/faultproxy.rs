//! A TCP fault proxy for the network-fault scenarios (issue 17): it listens on
//! `127.0.0.1:0`, forwards every connection to a target address, and gives each
//! connection a [`Fault`] drawn at random from a weighted [`Mix`] (switchable at run
//! time). The handle also cuts every open connection and heals.
//!
//! Why not a crate: the Rust toxiproxy crates are clients of Shopify's Go server (a
//! binary or container this machine does not have), and the Rust ports of the server
//! are unmaintained daemons, not libraries a test can embed. What the scenarios need
//! is small: a per-connection fault, drawn from a mix, on tokio.
//!
//! Faults, per connection:
//! - [`Fault::Pass`]: bytes flow both ways untouched.
//! - [`Fault::Delay`]: every chunk, both ways, waits this long before it is written.
//! - [`Fault::Blackhole`]: the connection is accepted, the bytes the client sends
//!   are read and discarded, nothing reaches the target, nothing comes back, until
//!   the connection is cut (the "drop" of the issue).
//! - [`Fault::Reset`]: forwarded normally for a random time up to the given bound,
//!   then both sides are closed with RST (`SO_LINGER` 0).
//! - [`Fault::HalfOpen`]: the client's bytes reach the target, but the target's
//!   answers are discarded; both sockets stay open (a request runs on the server
//!   and its answer is lost).
//! - [`Fault::SlowRead`]: the target's answers trickle to the client a few bytes at
//!   a time.
//!
//! Only loopback: the proxy binds `127.0.0.1`, and its target is an address the test
//! gives (a server it started on `127.0.0.1`).

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// What happens to one connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    Pass,
    /// Latency per chunk, each direction.
    Delay(Duration),
    /// Accept, swallow, never answer.
    Blackhole,
    /// Forward, then RST both sides after a random time below this bound.
    Reset(Duration),
    /// Forward the client's bytes; discard the target's.
    HalfOpen,
    /// Trickle the target's bytes to the client: this many bytes per 10 ms.
    SlowRead(usize),
}

impl Fault {
    /// A short name for counts and notes.
    pub fn name(self) -> &'static str {
        match self {
            Self::Pass => "pass",
            Self::Delay(_) => "delay",
            Self::Blackhole => "blackhole",
            Self::Reset(_) => "reset",
            Self::HalfOpen => "half-open",
            Self::SlowRead(_) => "slow-read",
        }
    }
}

/// Faults with weights: a new connection gets each with probability weight / total.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mix(pub Vec<(Fault, u32)>);

impl Mix {
    /// Every connection gets `fault`.
    pub fn only(fault: Fault) -> Self {
        Self(vec![(fault, 1)])
    }

    /// Every connection passes.
    pub fn healthy() -> Self {
        Self::only(Fault::Pass)
    }

    fn draw(&self, uniform: u64) -> Fault {
        let total: u64 = self.0.iter().map(|(_, w)| u64::from(*w)).sum();
        if total == 0 {
            return Fault::Pass;
        }
        let mut pick = uniform % total;
        for (fault, weight) in &self.0 {
            let w = u64::from(*weight);
            if pick < w {
                return *fault;
            }
            pick -= w;
        }
        Fault::Pass
    }
}

/// SplitMix64: enough randomness for fault choices, seedable so a run can be
/// repeated (the seed is in [`FaultProxy::seed`]).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

/// An open connection's fault, its cancel token and its swallowed flag.
type OpenConnection = (Fault, CancellationToken, Arc<AtomicBool>);

/// The needle to look for, and what to do when a request contains it.
type Watch<'a> = (&'a Mutex<Option<Vec<u8>>>, &'a (dyn Fn() + Sync));

struct Shared {
    target: SocketAddr,
    mix: Mutex<Mix>,
    rng: Mutex<Rng>,
    /// Open connections: id → (fault, its cancel token, its swallowed flag).
    open: Mutex<HashMap<u64, OpenConnection>>,
    next_id: AtomicU64,
    /// Connections accepted, per fault name.
    counts: Mutex<BTreeMap<&'static str, u64>>,
    /// Connections cut by [`FaultProxy::cut_all`] / [`FaultProxy::heal`] or reset.
    resets: AtomicU64,
    /// See [`FaultProxy::swallow`].
    swallow: Mutex<Option<Vec<u8>>>,
    /// Connections swallowed so far.
    swallowed: AtomicU64,
    /// HTTP responses with a 5xx status seen coming back from the target.
    http_5xx: AtomicU64,
}

/// A running proxy; it stops (and cuts its connections) when dropped.
pub struct FaultProxy {
    addr: SocketAddr,
    seed: u64,
    shared: Arc<Shared>,
    stop: CancellationToken,
    task: JoinHandle<()>,
}

impl FaultProxy {
    /// A proxy on `127.0.0.1:0` to `target`, passing everything at first. The seed
    /// is `SWITCHBOARD_FAULT_SEED` if set, else drawn from the clock.
    pub async fn start(target: SocketAddr) -> std::io::Result<Self> {
        let seed = std::env::var("SWITCHBOARD_FAULT_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| {
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(1, |d| d.as_nanos() as u64)
            });
        Self::with_seed(target, seed).await
    }

    /// [`FaultProxy::start`] with a fixed seed.
    pub async fn with_seed(target: SocketAddr, seed: u64) -> std::io::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            target,
            mix: Mutex::new(Mix::healthy()),
            rng: Mutex::new(Rng(seed)),
            open: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(0),
            counts: Mutex::new(BTreeMap::new()),
            resets: AtomicU64::new(0),
            swallow: Mutex::new(None),
            swallowed: AtomicU64::new(0),
            http_5xx: AtomicU64::new(0),
        });
        let stop = CancellationToken::new();
        let task = tokio::spawn(accept_loop(listener, shared.clone(), stop.clone()));
        Ok(Self {
            addr,
            seed,
            shared,
            stop,
            task,
        })
    }

    /// Where clients connect.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:port`.
    pub fn http_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// Faults for new connections from now on (open ones keep theirs).
    pub fn set_mix(&self, mix: Mix) {
        *self.shared.mix.lock().expect("mix") = mix;
    }

    /// From now on, a connection whose client sends bytes containing `needle` (an
    /// HTTP request line such as `/subscribe`) becomes a blackhole from that chunk
    /// on: that request never reaches the target, nothing more comes back, and the
    /// socket stays open. `None` stops swallowing new requests *without* cutting
    /// the connections already swallowed (a network that heals silently, no RST:
    /// the client must notice by itself); [`FaultProxy::heal`] cuts them.
    pub fn swallow(&self, needle: Option<&[u8]>) {
        *self.shared.swallow.lock().expect("swallow") = needle.map(<[u8]>::to_vec);
    }

    /// Connections swallowed so far (see [`FaultProxy::swallow`]).
    pub fn swallowed(&self) -> u64 {
        self.shared.swallowed.load(Ordering::Relaxed)
    }

    /// HTTP/1.1 responses with a 5xx status the target sent back (status lines seen
    /// on the wire; meaningful only when the target speaks HTTP).
    pub fn http_5xx(&self) -> u64 {
        self.shared.http_5xx.load(Ordering::Relaxed)
    }

    /// Resets every open connection (RST to both sides).
    pub fn cut_all(&self) {
        self.cut(|_| true);
    }

    /// Back to healthy: new connections pass, and every open connection with a
    /// fault other than [`Fault::Pass`] is reset (a blackholed or half-open one
    /// would otherwise hang until its client gives up).
    pub fn heal(&self) {
        self.set_mix(Mix::healthy());
        self.swallow(None);
        self.cut(|f| f != Fault::Pass);
    }

    fn cut(&self, which: impl Fn(Fault) -> bool) {
        let open = self.shared.open.lock().expect("open");
        for (fault, cancel, _) in open.values() {
            if which(*fault) {
                cancel.cancel();
            }
        }
    }

    /// Every open connection goes silent from now on, both ways, with no RST: the
    /// sockets stay open and nothing more passes (a network path that died under
    /// established connections). New connections follow the mix. [`FaultProxy::heal`]
    /// cuts the frozen ones.
    pub fn freeze_all(&self) {
        let mut open = self.shared.open.lock().expect("open");
        for (fault, _, swallowed) in open.values_mut() {
            swallowed.store(true, Ordering::SeqCst);
            *fault = Fault::Blackhole;
        }
    }

    /// Connections accepted so far, per fault name.
    pub fn counts(&self) -> BTreeMap<&'static str, u64> {
        self.shared.counts.lock().expect("counts").clone()
    }

    /// Open connections now.
    pub fn open_connections(&self) -> usize {
        self.shared.open.lock().expect("open").len()
    }

    /// Connections closed with RST (cut, or a [`Fault::Reset`] firing).
    pub fn resets(&self) -> u64 {
        self.shared.resets.load(Ordering::Relaxed)
    }

    /// The counts as one line: `pass 12, reset 3, …`.
    pub fn summary(&self) -> String {
        self.counts()
            .iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.stop.cancel();
        self.cut_all();
        self.task.abort();
    }
}

async fn accept_loop(listener: TcpListener, shared: Arc<Shared>, stop: CancellationToken) {
    loop {
        let accepted = tokio::select! {
            () = stop.cancelled() => return,
            a = listener.accept() => a,
        };
        let Ok((client, _)) = accepted else {
            // Out of descriptors or the like: do not spin.
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        };
        let _ = client.set_nodelay(true);
        let (fault, uniform) = {
            let mut rng = shared.rng.lock().expect("rng");
            let pick = rng.next();
            let extra = rng.next();
            (shared.mix.lock().expect("mix").draw(pick), extra)
        };
        *shared
            .counts
            .lock()
            .expect("counts")
            .entry(fault.name())
            .or_default() += 1;
        let id = shared.next_id.fetch_add(1, Ordering::Relaxed);
        let cancel = stop.child_token();
        let swallowed = Arc::new(AtomicBool::new(false));
        shared
            .open
            .lock()
            .expect("open")
            .insert(id, (fault, cancel.clone(), swallowed.clone()));
        let shared = shared.clone();
        tokio::spawn(async move {
            let reset = connection(client, fault, uniform, &shared, id, swallowed, cancel).await;
            if reset {
                shared.resets.fetch_add(1, Ordering::Relaxed);
            }
            shared.open.lock().expect("open").remove(&id);
        });
    }
}

/// Closes with RST: `SO_LINGER` 0, then drop. (tokio deprecates `set_linger`
/// because a *non-zero* linger blocks the thread in `close`; a zero linger never
/// blocks: the kernel discards the send buffer and sends RST at once.)
#[allow(deprecated)]
fn abort(stream: TcpStream) {
    let _ = stream.set_linger(Some(Duration::ZERO));
    drop(stream);
}

/// Serves one connection; `true` when it ended with RST.
async fn connection(
    mut client: TcpStream,
    fault: Fault,
    uniform: u64,
    shared: &Shared,
    id: u64,
    swallowed: Arc<AtomicBool>,
    cancel: CancellationToken,
) -> bool {
    if fault == Fault::Blackhole {
        let mut buf = vec![0u8; 16 * 1024];
        loop {
            tokio::select! {
                () = cancel.cancelled() => {
                    abort(client);
                    return true;
                }
                n = client.read(&mut buf) => match n {
                    Ok(0) | Err(_) => return false,
                    Ok(_) => {}
                },
            }
        }
    }
    let connect = tokio::time::timeout(Duration::from_secs(5), TcpStream::connect(shared.target));
    let mut upstream = tokio::select! {
        () = cancel.cancelled() => {
            abort(client);
            return true;
        }
        c = connect => match c {
            Ok(Ok(s)) => s,
            _ => {
                abort(client);
                return true;
            }
        },
    };
    let _ = upstream.set_nodelay(true);
    let (up_shape, down_shape) = match fault {
        Fault::Delay(d) => (Shape::Delay(d), Shape::Delay(d)),
        Fault::HalfOpen => (Shape::Pass, Shape::Discard),
        Fault::SlowRead(n) => (Shape::Pass, Shape::Trickle(n.max(1))),
        Fault::Pass | Fault::Reset(_) | Fault::Blackhole => (Shape::Pass, Shape::Pass),
    };
    let reset_after = match fault {
        Fault::Reset(max) => {
            let ms = u64::try_from(max.as_millis()).unwrap_or(u64::MAX).max(1);
            Some(Duration::from_millis(uniform % ms))
        }
        _ => None,
    };
    let on_swallow = || {
        swallowed.store(true, Ordering::SeqCst);
        shared.swallowed.fetch_add(1, Ordering::Relaxed);
        // Healing cuts it, as any blackhole.
        if let Some(entry) = shared.open.lock().expect("open").get_mut(&id) {
            entry.0 = Fault::Blackhole;
        }
    };
    let ended = {
        let (mut cr, mut cw) = client.split();
        let (mut ur, mut uw) = upstream.split();
        let up = Direction {
            shape: up_shape,
            swallowed: &swallowed,
            watch: Some((&shared.swallow, &on_swallow)),
            count_5xx: None,
        };
        let down = Direction {
            shape: down_shape,
            swallowed: &swallowed,
            watch: None,
            count_5xx: Some(&shared.http_5xx),
        };
        let pumps =
            futures::future::try_join(pump(&mut cr, &mut uw, up), pump(&mut ur, &mut cw, down));
        let timer = async {
            match reset_after {
                Some(d) => tokio::time::sleep(d).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            r = pumps => r.is_ok(),
            () = cancel.cancelled() => false,
            () = timer => false,
        }
    };
    if ended {
        false
    } else {
        abort(client);
        abort(upstream);
        true
    }
}

#[derive(Clone, Copy)]
enum Shape {
    Pass,
    Delay(Duration),
    Discard,
    Trickle(usize),
}

/// One direction of a connection.
struct Direction<'a> {
    shape: Shape,
    /// Set once the connection is swallowed: both directions discard from then on.
    swallowed: &'a AtomicBool,
    /// Client to target only: the needle to look for, and what to do on a match.
    watch: Option<Watch<'a>>,
    /// Target to client only: counts HTTP 5xx status lines.
    count_5xx: Option<&'a AtomicU64>,
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    !needle.is_empty() && haystack.windows(needle.len()).any(|w| w == needle)
}

/// Copies `from` to `to` shaped; at EOF shuts `to`'s write side (a half-close
/// travels on). Returns an error when either side failed.
async fn pump<R, W>(from: &mut R, to: &mut W, direction: Direction<'_>) -> std::io::Result<()>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let n = from.read(&mut buf).await?;
        if let Some((needle, on_match)) = direction.watch
            && !direction.swallowed.load(Ordering::SeqCst)
            && needle
                .lock()
                .expect("swallow")
                .as_deref()
                .is_some_and(|needle| contains(&buf[..n], needle))
        {
            on_match();
        }
        if let Some(count) = direction.count_5xx {
            let lines = buf[..n]
                .windows(10)
                .filter(|w| w.starts_with(b"HTTP/1.1 5"))
                .count();
            count.fetch_add(lines as u64, Ordering::Relaxed);
        }
        let shape = if direction.swallowed.load(Ordering::SeqCst) {
            Shape::Discard
        } else {
            direction.shape
        };
        if n == 0 {
            if !matches!(shape, Shape::Discard) {
                to.shutdown().await?;
            }
            return Ok(());
        }
        match shape {
            Shape::Pass => to.write_all(&buf[..n]).await?,
            Shape::Delay(d) => {
                tokio::time::sleep(d).await;
                to.write_all(&buf[..n]).await?;
            }
            Shape::Discard => {}
            Shape::Trickle(k) => {
                for chunk in buf[..n].chunks(k) {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    to.write_all(chunk).await?;
                    to.flush().await?;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    /// An echo server on loopback; counts the bytes it received.
    async fn echo() -> (SocketAddr, Arc<AtomicU64>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let received = Arc::new(AtomicU64::new(0));
        let r = received.clone();
        tokio::spawn(async move {
            while let Ok((mut s, _)) = listener.accept().await {
                let r = r.clone();
                tokio::spawn(async move {
                    let mut buf = vec![0u8; 4096];
                    loop {
                        match s.read(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => {
                                r.fetch_add(n as u64, Ordering::SeqCst);
                                if s.write_all(&buf[..n]).await.is_err() {
                                    return;
                                }
                            }
                        }
                    }
                });
            }
        });
        (addr, received)
    }

    async fn roundtrip(addr: SocketAddr, msg: &[u8], within: Duration) -> std::io::Result<Vec<u8>> {
        let mut s = TcpStream::connect(addr).await?;
        s.write_all(msg).await?;
        let mut got = vec![0u8; msg.len()];
        tokio::time::timeout(within, s.read_exact(&mut got))
            .await
            .map_err(|_| std::io::Error::new(std::io::ErrorKind::TimedOut, "no answer"))??;
        Ok(got)
    }

    #[tokio::test]
    async fn pass_forwards_both_ways() {
        let (target, _) = echo().await;
        let proxy = FaultProxy::with_seed(target, 1).await.unwrap();
        let got = roundtrip(proxy.addr(), b"hello", Duration::from_secs(5))
            .await
            .unwrap();
        assert_eq!(got, b"hello");
        assert_eq!(proxy.counts().get("pass"), Some(&1));
    }

    #[tokio::test]
    async fn delay_adds_latency_per_chunk() {
        let (target, _) = echo().await;
        let proxy = FaultProxy::with_seed(target, 1).await.unwrap();
        proxy.set_mix(Mix::only(Fault::Delay(Duration::from_millis(150))));
        let started = Instant::now();
        let got = roundtrip(proxy.addr(), b"hi", Duration::from_secs(5))
            .await
            .unwrap();
        assert_eq!(got, b"hi");
        // 150 ms there and 150 ms back.
        assert!(
            started.elapsed() >= Duration::from_millis(300),
            "{:?}",
            started.elapsed()
        );
    }

    #[tokio::test]
    async fn blackhole_swallows_and_never_answers_until_cut() {
        let (target, received) = echo().await;
        let proxy = FaultProxy::with_seed(target, 1).await.unwrap();
        proxy.set_mix(Mix::only(Fault::Blackhole));
        let mut s = TcpStream::connect(proxy.addr()).await.unwrap();
        s.write_all(b"anyone?").await.unwrap();
        let mut buf = [0u8; 8];
        let read = tokio::time::timeout(Duration::from_millis(400), s.read(&mut buf)).await;
        assert!(read.is_err(), "no answer from a blackhole: {read:?}");
        assert_eq!(
            received.load(Ordering::SeqCst),
            0,
            "nothing reached the target"
        );
        proxy.heal();
        let after = tokio::time::timeout(Duration::from_secs(5), s.read(&mut buf))
            .await
            .expect("the cut is seen at once");
        assert!(
            matches!(&after, Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset),
            "healing resets a blackholed connection: {after:?}"
        );
        // New connections pass again.
        let got = roundtrip(proxy.addr(), b"back", Duration::from_secs(5))
            .await
            .unwrap();
        assert_eq!(got, b"back");
    }

    #[tokio::test]
    async fn reset_closes_with_rst_mid_stream() {
        let (target, _) = echo().await;
        let proxy = FaultProxy::with_seed(target, 1).await.unwrap();
        proxy.set_mix(Mix::only(Fault::Reset(Duration::from_millis(200))));
        let mut s = TcpStream::connect(proxy.addr()).await.unwrap();
        let mut buf = [0u8; 8];
        let read = tokio::time::timeout(Duration::from_secs(5), s.read(&mut buf))
            .await
            .expect("the reset comes within its bound");
        assert!(
            matches!(&read, Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset),
            "{read:?}"
        );
        assert_eq!(proxy.resets(), 1);
    }

    #[tokio::test]
    async fn half_open_delivers_requests_but_loses_answers() {
        let (target, received) = echo().await;
        let proxy = FaultProxy::with_seed(target, 1).await.unwrap();
        proxy.set_mix(Mix::only(Fault::HalfOpen));
        let mut s = TcpStream::connect(proxy.addr()).await.unwrap();
        s.write_all(b"request").await.unwrap();
        let mut buf = [0u8; 8];
        let read = tokio::time::timeout(Duration::from_millis(400), s.read(&mut buf)).await;
        assert!(
            read.is_err(),
            "the answer is lost, the socket open: {read:?}"
        );
        assert_eq!(received.load(Ordering::SeqCst), 7, "the request arrived");
        assert_eq!(proxy.open_connections(), 1);
    }

    #[tokio::test]
    async fn slow_read_trickles_the_answer() {
        let (target, _) = echo().await;
        let proxy = FaultProxy::with_seed(target, 1).await.unwrap();
        proxy.set_mix(Mix::only(Fault::SlowRead(2)));
        let started = Instant::now();
        let got = roundtrip(proxy.addr(), b"0123456789", Duration::from_secs(5))
            .await
            .unwrap();
        assert_eq!(got, b"0123456789", "every byte arrives, in order");
        // 5 chunks of 2 bytes, 10 ms apart.
        assert!(
            started.elapsed() >= Duration::from_millis(50),
            "{:?}",
            started.elapsed()
        );
    }

    #[tokio::test]
    async fn cut_all_resets_open_connections() {
        let (target, _) = echo().await;
        let proxy = FaultProxy::with_seed(target, 1).await.unwrap();
        let mut s = TcpStream::connect(proxy.addr()).await.unwrap();
        s.write_all(b"x").await.unwrap();
        let mut one = [0u8; 1];
        s.read_exact(&mut one).await.unwrap();
        proxy.cut_all();
        let mut buf = [0u8; 8];
        let read = tokio::time::timeout(Duration::from_secs(5), s.read(&mut buf))
            .await
            .expect("the cut is seen at once");
        assert!(
            matches!(&read, Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset),
            "{read:?}"
        );
    }

    #[tokio::test]
    async fn swallow_blackholes_the_connection_of_a_matching_request_only() {
        let (target, received) = echo().await;
        let proxy = FaultProxy::with_seed(target, 1).await.unwrap();
        proxy.swallow(Some(b"/subscribe"));
        let got = roundtrip(proxy.addr(), b"GET /claim", Duration::from_secs(5))
            .await
            .unwrap();
        assert_eq!(got, b"GET /claim", "other requests pass");
        let mut s = TcpStream::connect(proxy.addr()).await.unwrap();
        s.write_all(b"GET /agents/a/subscribe").await.unwrap();
        let mut buf = [0u8; 8];
        let read = tokio::time::timeout(Duration::from_millis(400), s.read(&mut buf)).await;
        assert!(read.is_err(), "swallowed: {read:?}");
        assert_eq!(
            received.load(Ordering::SeqCst),
            10,
            "the request never arrived"
        );
        assert_eq!(proxy.swallowed(), 1);
        // A silent heal leaves it hanging; a heal cuts it.
        proxy.swallow(None);
        let read = tokio::time::timeout(Duration::from_millis(300), s.read(&mut buf)).await;
        assert!(read.is_err(), "still swallowed: {read:?}");
        proxy.heal();
        let read = tokio::time::timeout(Duration::from_secs(5), s.read(&mut buf))
            .await
            .expect("cut");
        assert!(read.is_err(), "{read:?}");
    }

    #[tokio::test]
    async fn freeze_silences_open_connections_without_a_reset() {
        let (target, received) = echo().await;
        let proxy = FaultProxy::with_seed(target, 1).await.unwrap();
        let mut s = TcpStream::connect(proxy.addr()).await.unwrap();
        s.write_all(b"a").await.unwrap();
        let mut one = [0u8; 1];
        s.read_exact(&mut one).await.unwrap();
        proxy.freeze_all();
        s.write_all(b"b").await.unwrap();
        let mut buf = [0u8; 8];
        let read = tokio::time::timeout(Duration::from_millis(400), s.read(&mut buf)).await;
        assert!(read.is_err(), "silent, still open: {read:?}");
        assert_eq!(received.load(Ordering::SeqCst), 1, "b never arrived");
        // New connections pass.
        let got = roundtrip(proxy.addr(), b"c", Duration::from_secs(5))
            .await
            .unwrap();
        assert_eq!(got, b"c");
        proxy.heal();
        let read = tokio::time::timeout(Duration::from_secs(5), s.read(&mut buf))
            .await
            .expect("cut");
        assert!(read.is_err(), "{read:?}");
    }

    #[test]
    fn a_mix_draws_by_weight() {
        let mix = Mix(vec![(Fault::Pass, 3), (Fault::Blackhole, 1)]);
        let mut rng = Rng(7);
        let mut counts = HashMap::new();
        for _ in 0..4000 {
            *counts.entry(mix.draw(rng.next()).name()).or_insert(0u32) += 1;
        }
        let pass = counts["pass"];
        assert!((2700..3300).contains(&pass), "{counts:?}");
        assert_eq!(Mix(vec![]).draw(5), Fault::Pass);
    }
}
