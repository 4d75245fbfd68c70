//! What one block costs: the client process's CPU time (`getrusage`) and every node's, as
//! `INFO cpu` and `INFO commandstats` tell it, read before and after the block.

use std::collections::BTreeMap;
use std::time::Duration;

use nix::sys::resource::{UsageWho, getrusage};

/// This process's user + system CPU time so far (every thread: the runtime's workers too).
pub(crate) fn client_cpu() -> Duration {
    let usage = getrusage(UsageWho::RUSAGE_SELF).expect("getrusage");
    let micros = |t: nix::sys::time::TimeVal| {
        Duration::from_secs(t.tv_sec().unsigned_abs())
            + Duration::from_micros(t.tv_usec().unsigned_abs())
    };
    micros(usage.user_time()) + micros(usage.system_time())
}

/// One command's counters on the nodes: calls and microseconds spent in them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct CommandCost {
    pub(crate) calls: u64,
    pub(crate) usec: u64,
}

/// What the nodes had spent at one moment, summed over the nodes.
#[derive(Clone, Debug, Default)]
pub(crate) struct Servers {
    /// `used_cpu_sys + used_cpu_user`, in seconds.
    pub(crate) cpu: f64,
    /// By command name (`set`, `evalsha`, `publish`, …).
    pub(crate) commands: BTreeMap<String, CommandCost>,
}

impl Servers {
    /// Reads every node's `INFO cpu commandstats` through `connections`.
    pub(crate) fn read(connections: &mut [redis::Connection]) -> Self {
        let mut total = Self::default();
        for connection in connections {
            let text: String = redis::cmd("INFO")
                .arg("cpu")
                .arg("commandstats")
                .query(connection)
                .expect("INFO cpu commandstats");
            total.add(&text);
        }
        total
    }

    /// Adds one node's `INFO` text.
    fn add(&mut self, info: &str) {
        for line in info.lines() {
            if let Some(seconds) = line
                .strip_prefix("used_cpu_sys:")
                .or_else(|| line.strip_prefix("used_cpu_user:"))
            {
                self.cpu += seconds.trim().parse::<f64>().expect("a CPU time");
            } else if let Some(rest) = line.strip_prefix("cmdstat_") {
                let Some((name, fields)) = rest.split_once(':') else {
                    continue;
                };
                let field = |wanted: &str| {
                    fields
                        .split(',')
                        .find_map(|f| f.strip_prefix(wanted)?.strip_prefix('='))
                        .and_then(|v| v.trim().parse::<u64>().ok())
                        .unwrap_or(0)
                };
                let cost = self.commands.entry(name.to_owned()).or_default();
                cost.calls += field("calls");
                cost.usec += field("usec");
            }
        }
    }

    /// What was spent between `before` and `self`.
    pub(crate) fn since(&self, before: &Self) -> Self {
        let commands = self
            .commands
            .iter()
            .filter_map(|(name, after)| {
                let was = before.commands.get(name).copied().unwrap_or_default();
                let calls = after.calls.saturating_sub(was.calls);
                (calls > 0).then(|| {
                    let usec = after.usec.saturating_sub(was.usec);
                    (name.clone(), CommandCost { calls, usec })
                })
            })
            .collect();
        Self {
            cpu: self.cpu - before.cpu,
            commands,
        }
    }
}
