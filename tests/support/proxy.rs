//! A TCP fault proxy: sits on a free loopback port in front of one node and, on command,
//! delays, holds or breaks the traffic that crosses it.
//!
//! ```no_run
//! # async fn demo(fleet: &redlock_tests::RedisFleet) -> std::io::Result<()> {
//! use std::time::Duration;
//! use redlock_tests::proxy::{Direction, FaultProxy};
//!
//! let proxy = FaultProxy::start(fleet.addr(0)).await?;
//! let faults = proxy.handle(); // cloneable, usable from any task while the proxy runs
//! println!("point the client at {}", proxy.url());
//! faults.set_latency(Direction::ToClient, Duration::from_millis(30));
//! faults.set_blackhole(true);   // accept, never forward
//! faults.heal();                // traffic flows again, held bytes first
//! faults.reset_connections();   // every open connection is closed with a TCP reset
//! faults.redirect(fleet.addr(1)); // new connections reach another server (a VIP move)
//! faults.set_connect_delay(Duration::from_millis(200)); // slow connection establishment
//! # Ok(())
//! # }
//! ```
//!
//! # Held, never dropped
//!
//! A blackhole or a one-way cut *holds* the bytes of the affected direction: they are read
//! (up to a bounded buffer, then the sender's socket fills up) but not forwarded until the
//! fault heals, and then forwarded in order. That is what TCP does over a partition that
//! heals: it retransmits, late, or it gives up and breaks the connection. It never loses
//! bytes in the middle of a stream. A proxy that discarded them would desynchronise the
//! Redis protocol, and a client would pair a reply with the wrong request, a failure no real
//! network can produce. To model a partition long enough for TCP to give up, heal and then
//! [`reset_connections`](ProxyHandle::reset_connections).
//!
//! Latency is applied per chunk from the moment it was read, so a steady stream is delayed,
//! not throttled; order is always kept. A connection accepted while the upstream node is down
//! is closed at once, as a refused connection would be.

use std::fmt;
use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// How many chunks one direction of a connection buffers before it stops reading.
const CHUNKS_IN_FLIGHT: usize = 64;

/// The largest chunk read at once.
const CHUNK_SIZE: usize = 16 * 1024;

/// One direction of the traffic through the proxy.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Direction {
    /// From the client to the node: requests.
    ToServer,
    /// From the node to the client: replies.
    ToClient,
}

/// The faults in force, as a snapshot.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Faults {
    /// Added to every chunk travelling to the node.
    pub latency_to_server: Duration,
    /// Added to every chunk travelling to the client.
    pub latency_to_client: Duration,
    /// Both directions held.
    pub blackhole: bool,
    /// Requests held (the node hears nothing; replies to earlier requests still flow).
    pub cut_to_server: bool,
    /// Replies held (the node executes requests; the client hears nothing).
    pub cut_to_client: bool,
    /// How long a new connection waits before it is forwarded at all.
    pub connect_delay: Duration,
}

impl Faults {
    /// The latency of `direction`.
    pub fn latency(&self, direction: Direction) -> Duration {
        match direction {
            Direction::ToServer => self.latency_to_server,
            Direction::ToClient => self.latency_to_client,
        }
    }

    /// Whether `direction` is held.
    pub fn holds(&self, direction: Direction) -> bool {
        self.blackhole
            || match direction {
                Direction::ToServer => self.cut_to_server,
                Direction::ToClient => self.cut_to_client,
            }
    }

    /// Whether no fault is in force.
    pub fn is_healed(&self) -> bool {
        *self == Self::default()
    }
}

/// What the connections watch: the faults, plus the generation that a reset bumps.
#[derive(Clone, Copy, Debug, Default)]
struct Control {
    faults: Faults,
    generation: u64,
    closed: bool,
    /// Where new connections go instead of the upstream the proxy was started with.
    redirect: Option<SocketAddr>,
}

#[derive(Debug, Default)]
struct Counters {
    accepted: AtomicU64,
    to_server: AtomicU64,
    to_client: AtomicU64,
}

impl Counters {
    fn bytes(&self, direction: Direction) -> &AtomicU64 {
        match direction {
            Direction::ToServer => &self.to_server,
            Direction::ToClient => &self.to_client,
        }
    }
}

/// Controls a running [`FaultProxy`]. Cheap to clone; every setter takes effect at once on
/// every connection, open or future.
#[derive(Clone)]
pub struct ProxyHandle {
    control: Arc<watch::Sender<Control>>,
    counters: Arc<Counters>,
}

impl ProxyHandle {
    /// Adds `latency` to every chunk travelling in `direction` (zero removes it).
    pub fn set_latency(&self, direction: Direction, latency: Duration) {
        self.control.send_modify(|c| match direction {
            Direction::ToServer => c.faults.latency_to_server = latency,
            Direction::ToClient => c.faults.latency_to_client = latency,
        });
    }

    /// Holds every byte in both directions while `on`: connections are accepted, nothing is
    /// forwarded.
    pub fn set_blackhole(&self, on: bool) {
        self.control.send_modify(|c| c.faults.blackhole = on);
    }

    /// Holds every byte travelling in `direction` while `on`; the other direction flows.
    pub fn set_cut(&self, direction: Direction, on: bool) {
        self.control.send_modify(|c| match direction {
            Direction::ToServer => c.faults.cut_to_server = on,
            Direction::ToClient => c.faults.cut_to_client = on,
        });
    }

    /// Makes every connection accepted from now on wait `delay` before the proxy opens its
    /// side to the node: the client's first bytes (redis-rs' connection handshake, so the
    /// whole connection setup) wait that long, as over a slow network path or a node slow to
    /// accept. Open connections are not affected; zero removes the delay.
    pub fn set_connect_delay(&self, delay: Duration) {
        self.control.send_modify(|c| c.faults.connect_delay = delay);
    }

    /// Removes every fault: no latency, no blackhole, no cut, no connect delay. Held bytes
    /// are forwarded.
    pub fn heal(&self) {
        self.control.send_modify(|c| c.faults = Faults::default());
    }

    /// Closes every open connection with a TCP reset, held bytes included. New connections
    /// are accepted as usual.
    pub fn reset_connections(&self) {
        self.control.send_modify(|c| c.generation += 1);
    }

    /// Sends every connection accepted from now on to `upstream` instead: the name the
    /// client was given now reaches another server, as after a failover behind a virtual IP
    /// or a DNS change. Open connections stay with the server they reached; follow with
    /// [`reset_connections`](Self::reset_connections) to move the client over at once.
    pub fn redirect(&self, upstream: SocketAddr) {
        self.control.send_modify(|c| c.redirect = Some(upstream));
    }

    /// The faults in force.
    pub fn faults(&self) -> Faults {
        self.control.borrow().faults
    }

    /// How many connections the proxy accepted so far.
    pub fn accepted_connections(&self) -> u64 {
        self.counters.accepted.load(Ordering::Relaxed)
    }

    /// How many bytes were forwarded in `direction` so far.
    pub fn forwarded_bytes(&self, direction: Direction) -> u64 {
        self.counters.bytes(direction).load(Ordering::Relaxed)
    }
}

impl fmt::Debug for ProxyHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ProxyHandle")
            .field("faults", &self.faults())
            .field("accepted", &self.accepted_connections())
            .finish()
    }
}

/// A TCP proxy on a free `127.0.0.1` port in front of `upstream`, running on the tokio
/// runtime it was started on until it is dropped.
pub struct FaultProxy {
    local: SocketAddr,
    upstream: SocketAddr,
    handle: ProxyHandle,
    accept: JoinHandle<()>,
}

impl FaultProxy {
    /// Listens on a free loopback port and forwards every connection to `upstream`.
    ///
    /// # Errors
    ///
    /// When no port can be bound.
    pub async fn start(upstream: SocketAddr) -> io::Result<Self> {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await?;
        let local = listener.local_addr()?;
        let (control, _) = watch::channel(Control::default());
        let handle = ProxyHandle {
            control: Arc::new(control),
            counters: Arc::new(Counters::default()),
        };
        let accept = tokio::spawn(accept_loop(listener, upstream, handle.clone()));
        Ok(Self {
            local,
            upstream,
            handle,
            accept,
        })
    }

    /// The address clients connect to.
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// `redis://127.0.0.1:<port>` of the proxy.
    pub fn url(&self) -> String {
        format!("redis://{}", self.local)
    }

    /// The node behind the proxy: the one it was started with, or the one it was last
    /// [redirected](ProxyHandle::redirect) to.
    pub fn upstream(&self) -> SocketAddr {
        self.handle
            .control
            .borrow()
            .redirect
            .unwrap_or(self.upstream)
    }

    /// A handle that controls the faults.
    pub fn handle(&self) -> ProxyHandle {
        self.handle.clone()
    }
}

impl Drop for FaultProxy {
    /// Stops accepting and closes every connection.
    fn drop(&mut self) {
        self.accept.abort();
        self.handle.control.send_modify(|c| c.closed = true);
    }
}

impl fmt::Debug for FaultProxy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FaultProxy")
            .field("local", &self.local)
            .field("upstream", &self.upstream())
            .field("faults", &self.handle.faults())
            .finish()
    }
}

async fn accept_loop(listener: TcpListener, upstream: SocketAddr, handle: ProxyHandle) {
    loop {
        let Ok((client, _)) = listener.accept().await else {
            // Out of file descriptors or similar: back off instead of spinning.
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        };
        handle.counters.accepted.fetch_add(1, Ordering::Relaxed);
        let upstream = handle.control.borrow().redirect.unwrap_or(upstream);
        tokio::spawn(serve(client, upstream, handle.clone()));
    }
}

/// Forwards one connection until either side closes, a reset, or the proxy's end.
async fn serve(mut client: TcpStream, upstream: SocketAddr, handle: ProxyHandle) {
    let mut control = handle.control.subscribe();
    let (generation, delay) = {
        let c = control.borrow();
        (c.generation, c.faults.connect_delay)
    };
    // The delay in force when the connection arrived; the client's bytes wait in the
    // socket meanwhile, unread. A reset during the wait is seen just below, as for any
    // connection of an older generation.
    if !delay.is_zero() {
        tokio::time::sleep(delay).await;
    }
    let Ok(mut server) = TcpStream::connect(upstream).await else {
        // The node is down: the client sees its connection close at once.
        let _ = client.set_zero_linger();
        return;
    };
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    {
        let (client_read, client_write) = client.split();
        let (server_read, server_write) = server.split();
        let requests = pump(
            client_read,
            server_write,
            Direction::ToServer,
            &handle,
            control.clone(),
            generation,
        );
        let replies = pump(
            server_read,
            client_write,
            Direction::ToClient,
            &handle,
            control.clone(),
            generation,
        );
        let ended = control.wait_for(|c| c.generation != generation || c.closed);
        tokio::select! {
            // A reset wins over bytes released in the same instant (a reset then a heal must
            // not let held bytes through; the writers check that too, for the case where
            // they run before this task sees the reset).
            biased;
            _ = ended => {}
            _ = async { tokio::try_join!(requests, replies) } => {}
        }
    }
    let over = {
        let c = control.borrow();
        c.generation != generation || c.closed
    };
    if !over {
        // Both directions ended on their own: each side already saw the other's close.
        return;
    }
    // A reset: RST rather than FIN, and whatever was held is gone with the connection.
    let _ = client.set_zero_linger();
    let _ = server.set_zero_linger();
}

/// Copies one direction: a reader stamps each chunk with its delivery time, a writer
/// delivers chunks in order once that time has come and the direction is not held. The
/// connection belongs to `generation`: once a reset moves past it, nothing more is written.
async fn pump<R, W>(
    mut from: R,
    mut to: W,
    direction: Direction,
    handle: &ProxyHandle,
    mut control: watch::Receiver<Control>,
    generation: u64,
) -> io::Result<()>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let (chunks, mut queue) = mpsc::channel::<(Instant, Vec<u8>)>(CHUNKS_IN_FLIGHT);
    let latency_source = control.clone();
    let reader = async move {
        loop {
            let mut chunk = vec![0; CHUNK_SIZE];
            let read = from.read(&mut chunk).await?;
            if read == 0 {
                // End of stream: dropping `chunks` lets the writer finish and pass it on.
                return Ok::<(), io::Error>(());
            }
            chunk.truncate(read);
            let latency = latency_source.borrow().faults.latency(direction);
            if chunks
                .send((Instant::now() + latency, chunk))
                .await
                .is_err()
            {
                return Ok(());
            }
        }
    };
    let writer = async move {
        while let Some((deliver_at, chunk)) = queue.recv().await {
            // Only when there is a delay: tokio rounds a timer up to its next millisecond
            // tick, so sleeping until "now" would add up to a millisecond to every chunk.
            if deliver_at > Instant::now() {
                tokio::time::sleep_until(deliver_at).await;
            }
            wait_until_flowing(&mut control, direction, generation).await?;
            to.write_all(&chunk).await?;
            handle
                .counters
                .bytes(direction)
                .fetch_add(chunk.len() as u64, Ordering::Relaxed);
        }
        // The end of the stream is held like any byte.
        wait_until_flowing(&mut control, direction, generation).await?;
        to.shutdown().await
    };
    tokio::try_join!(reader, writer).map(|_| ())
}

/// Waits until `direction` may flow. Fails once the connection is over (a reset, or the
/// proxy's end), even if the faults were healed in the same instant: the writer can observe
/// a reset and a heal together before the connection's task sees the reset, and the held
/// bytes must go with the connection rather than through.
async fn wait_until_flowing(
    control: &mut watch::Receiver<Control>,
    direction: Direction,
    generation: u64,
) -> io::Result<()> {
    let over = |c: &Control| c.closed || c.generation != generation;
    // The sender lives as long as the proxy's handle; if it is gone, the proxy is gone too.
    let Ok(current) = control
        .wait_for(|c| over(c) || !c.faults.holds(direction))
        .await
    else {
        return Err(connection_over());
    };
    if over(&current) {
        return Err(connection_over());
    }
    Ok(())
}

fn connection_over() -> io::Error {
    io::Error::new(
        io::ErrorKind::ConnectionAborted,
        "the proxy reset the connection",
    )
}
