//! A fake Redis node whose clock runs at a chosen rate: a small RESP server that answers
//! `PING`, `INFO`, `TIME`, `CONFIG GET`, `CLIENT`, `SELECT` and `AUTH` like a healthy master
//! (`appendfsync always`, `noeviction`, up for a day) and refuses everything else. It holds
//! no keys: it exists to test what is measured from outside, such as a clock that runs fast,
//! which a real `redis-server` cannot be made to do.
//!
//! ```no_run
//! # async fn demo() -> std::io::Result<()> {
//! use redlock_tests::fake::FakeNode;
//!
//! let fast = FakeNode::start(1.02).await?; // its TIME runs 2 % fast
//! println!("point the doctor at {}", fast.url());
//! # Ok(())
//! # }
//! ```
//!
//! `TIME` answers `start_wall + rate × (now − start)`, with `now` read from the monotonic
//! clock when the request is parsed: the node reads its clock between the request's arrival
//! and the reply's departure, as a real server does.

use std::collections::hash_map::RandomState;
use std::fmt;
use std::hash::BuildHasher;
use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use tokio::io::{AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

/// The longest request the fake node reads; anything larger closes the connection.
const MAX_REQUEST: usize = 64 * 1024;

struct Clock {
    rate: f64,
    start: Instant,
    start_wall_us: u128,
}

impl Clock {
    /// The node's time, in microseconds since the Unix epoch.
    fn now_us(&self) -> u128 {
        let elapsed = self.start.elapsed().as_secs_f64() * 1e6 * self.rate;
        self.start_wall_us + elapsed as u128
    }
}

/// A fake node on a free `127.0.0.1` port, running on the tokio runtime it was started on
/// until it is dropped.
pub struct FakeNode {
    local: SocketAddr,
    run_id: String,
    times: Arc<AtomicU64>,
    accept: JoinHandle<()>,
}

impl FakeNode {
    /// Starts a node whose `TIME` runs `rate` times as fast as this host's monotonic clock
    /// (`1.02`: 2 % fast).
    ///
    /// # Errors
    ///
    /// When no port can be bound.
    pub async fn start(rate: f64) -> io::Result<Self> {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await?;
        let local = listener.local_addr()?;
        let clock = Arc::new(Clock {
            rate,
            start: Instant::now(),
            start_wall_us: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_micros()),
        });
        // 40 hex digits, as a real run_id, different for every fake node.
        let random = |salt: u64| RandomState::new().hash_one((salt, local));
        let run_id = format!(
            "{:016x}{:016x}{:08x}",
            random(1),
            random(2),
            random(3) >> 32
        );
        let times = Arc::new(AtomicU64::new(0));
        let accept = tokio::spawn(accept_loop(
            listener,
            clock,
            Arc::from(run_id.as_str()),
            Arc::clone(&times),
        ));
        Ok(Self {
            local,
            run_id,
            times,
            accept,
        })
    }

    /// `redis://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("redis://{}", self.local)
    }

    /// The address clients connect to.
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// The `run_id` its `INFO` reports.
    pub fn run_id(&self) -> &str {
        &self.run_id
    }

    /// How many `TIME` requests it answered.
    pub fn time_requests(&self) -> u64 {
        self.times.load(Ordering::Relaxed)
    }
}

impl Drop for FakeNode {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

impl fmt::Debug for FakeNode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FakeNode")
            .field("local", &self.local)
            .field("time_requests", &self.time_requests())
            .finish_non_exhaustive()
    }
}

async fn accept_loop(
    listener: TcpListener,
    clock: Arc<Clock>,
    run_id: Arc<str>,
    times: Arc<AtomicU64>,
) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
            continue;
        };
        let _ = stream.set_nodelay(true);
        tokio::spawn(serve(
            stream,
            Arc::clone(&clock),
            Arc::clone(&run_id),
            Arc::clone(&times),
        ));
    }
}

/// Answers one connection's requests in order until it closes or sends something that is
/// not RESP.
async fn serve(stream: TcpStream, clock: Arc<Clock>, run_id: Arc<str>, times: Arc<AtomicU64>) {
    let (read, mut write) = stream.into_split();
    let mut read = BufReader::new(read);
    while let Ok(Some(request)) = read_request(&mut read).await {
        let reply = answer(&request, &clock, &run_id, &times);
        if write.write_all(&reply).await.is_err() {
            return;
        }
    }
}

/// Reads one request: a RESP array of bulk strings. `None` at the end of the stream.
async fn read_request<R: tokio::io::AsyncBufRead + Unpin>(
    read: &mut R,
) -> io::Result<Option<Vec<Vec<u8>>>> {
    let Some(header) = read_line(read).await? else {
        return Ok(None);
    };
    let count = parse_length(&header, b'*')?;
    let mut parts = Vec::with_capacity(count.min(64));
    for _ in 0..count {
        let line = read_line(read).await?.ok_or_else(truncated)?;
        let length = parse_length(&line, b'$')?;
        let mut data = vec![0; length + 2];
        read.read_exact(&mut data).await?;
        data.truncate(length);
        parts.push(data);
    }
    Ok(Some(parts))
}

async fn read_line<R: tokio::io::AsyncBufRead + Unpin>(
    read: &mut R,
) -> io::Result<Option<Vec<u8>>> {
    use tokio::io::AsyncBufReadExt;

    let mut line = Vec::new();
    let read_bytes = read.read_until(b'\n', &mut line).await?;
    if read_bytes == 0 {
        return Ok(None);
    }
    if !line.ends_with(b"\r\n") {
        return Err(truncated());
    }
    line.truncate(line.len() - 2);
    Ok(Some(line))
}

fn parse_length(line: &[u8], marker: u8) -> io::Result<usize> {
    let bad = || io::Error::new(io::ErrorKind::InvalidData, "not a RESP request");
    let (first, digits) = line.split_first().ok_or_else(bad)?;
    if *first != marker {
        return Err(bad());
    }
    let length: usize = std::str::from_utf8(digits)
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or_else(bad)?;
    if length > MAX_REQUEST {
        return Err(bad());
    }
    Ok(length)
}

fn truncated() -> io::Error {
    io::Error::new(io::ErrorKind::UnexpectedEof, "truncated request")
}

fn answer(request: &[Vec<u8>], clock: &Clock, run_id: &str, times: &AtomicU64) -> Vec<u8> {
    let word = |index: usize| {
        request
            .get(index)
            .map(|part| String::from_utf8_lossy(part).to_ascii_uppercase())
            .unwrap_or_default()
    };
    match word(0).as_str() {
        "PING" => b"+PONG\r\n".to_vec(),
        "TIME" => {
            let now = clock.now_us();
            times.fetch_add(1, Ordering::Relaxed);
            array(&[(now / 1_000_000).to_string(), (now % 1_000_000).to_string()])
        }
        "INFO" => bulk(&format!(
            "# Server\r\nredis_version:7.0.0-fake\r\nredis_mode:standalone\r\nrun_id:{run_id}\r\n\
             uptime_in_seconds:86400\r\n# Memory\r\nmaxmemory:0\r\nmaxmemory_policy:noeviction\r\n\
             # Persistence\r\naof_enabled:1\r\n# Replication\r\nrole:master\r\nconnected_slaves:0\r\n"
        )),
        "CONFIG" if word(1) == "GET" && word(2) == "APPENDFSYNC" => {
            array(&["appendfsync".to_owned(), "always".to_owned()])
        }
        "CLIENT" | "SELECT" | "AUTH" => b"+OK\r\n".to_vec(),
        other => format!(
            "-ERR unknown command '{}': this fake node keeps no keys\r\n",
            other
                .chars()
                .filter(char::is_ascii_alphanumeric)
                .take(32)
                .collect::<String>()
        )
        .into_bytes(),
    }
}

fn bulk(text: &str) -> Vec<u8> {
    format!("${}\r\n{text}\r\n", text.len()).into_bytes()
}

fn array(items: &[String]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", items.len()).into_bytes();
    for item in items {
        out.extend(bulk(item));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn answers_like_a_healthy_master_with_a_fast_clock() {
        let node = FakeNode::start(1.5).await.unwrap();
        let client = redis::Client::open(node.url()).unwrap();
        let mut connection = client.get_multiplexed_async_connection().await.unwrap();
        let pong: String = redis::cmd("PING")
            .query_async(&mut connection)
            .await
            .unwrap();
        assert_eq!(pong, "PONG");
        let info: String = redis::cmd("INFO")
            .query_async(&mut connection)
            .await
            .unwrap();
        assert!(
            info.contains(&format!("run_id:{}", node.run_id())),
            "{info}"
        );

        let time = |(s, us): (u64, u64)| s as f64 + us as f64 / 1e6;
        let first: (u64, u64) = redis::cmd("TIME")
            .query_async(&mut connection)
            .await
            .unwrap();
        let started = Instant::now();
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        let second: (u64, u64) = redis::cmd("TIME")
            .query_async(&mut connection)
            .await
            .unwrap();
        let host = started.elapsed().as_secs_f64();
        let node_elapsed = time(second) - time(first);
        // 1.5 times the host's elapsed time, give or take the two round trips.
        assert!(
            (node_elapsed / host - 1.5).abs() < 0.1,
            "{node_elapsed} over {host}"
        );
        assert_eq!(node.time_requests(), 2);

        let refused: redis::RedisResult<()> = redis::cmd("SET")
            .arg("k")
            .arg("v")
            .query_async(&mut connection)
            .await;
        assert!(refused.is_err());
    }
}
